"""Shrink: small repros that fail the same way; the regression corpus; fuzz."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.impls.raises import RAISE_AT
from tracediff.cli import main
from tracediff.impls import ImplSpec, parse_impl
from tracediff.runner import DIVERGED, IDENTICAL, ScenarioResult, run_scenario
from tracediff.scenario.generator import generate
from tracediff.scenario.model import Scenario
from tracediff.scenario.profiles import load_profile
from tracediff.shrink import (
    Signature,
    default_signature,
    find_integer,
    minimize_int,
    shrink,
    simpler_ints,
    size_key,
)

REFERENCE = parse_impl("reference")
SKEWED = parse_impl("tests.impls.skewed:SkewedScheduler")
SLOT_TIEBREAK = parse_impl("tests.impls.slot_tiebreak:SlotTieBreakScheduler")
EAGER_PRUNE = parse_impl("tests.impls.eager_prune:EagerPruneScheduler")
RAISES = parse_impl("tests.impls.raises:RaisingScheduler")

# The target for a shrunk repro.
MAX_REQUESTS, MAX_PLANS = 4, 20


def _scenario(profile: str, seed: int) -> Scenario:
    return generate(load_profile(profile), seed)


def _still_fails_the_same_way(scenario: Scenario, specs: tuple[ImplSpec, ...], sig: object) -> None:
    result = run_scenario(scenario, specs)
    assert default_signature(scenario, result, specs) == sig


def _first_diverging(profile: str, impl: ImplSpec, max_requests: int) -> Scenario:
    """The first scenario of a profile with at most ``max_requests`` requests on which
    ``impl`` diverges from the reference (found, not hard-coded: the model may change)."""
    loaded = load_profile(profile)
    for seed in loaded.seeds:
        scenario = generate(loaded, seed)
        if len(scenario.requests) > max_requests:
            continue
        if run_scenario(scenario, (REFERENCE, impl)).status != IDENTICAL:
            return scenario
    raise AssertionError(f"{impl.name} never diverges on {profile}")  # pragma: no cover


@pytest.mark.parametrize(
    ("profile", "impl", "max_requests", "timeout_s"),
    [
        ("quick", SKEWED, 8, 30.0),
        ("default", SLOT_TIEBREAK, 8, 30.0),  # a tie-break decision
        ("quick", EAGER_PRUNE, 8, 30.0),
    ],
)
def test_shrink_reaches_the_target_and_keeps_the_signature(
    profile: str, impl: ImplSpec, max_requests: int, timeout_s: float
) -> None:
    specs = (REFERENCE, impl)
    result = shrink(_first_diverging(profile, impl, max_requests), specs, timeout_s=timeout_s)
    assert result.failing
    requests, plans = result.after
    assert requests <= MAX_REQUESTS and plans <= MAX_PLANS, (result.before, result.after)
    assert result.after <= result.before
    assert result.seconds <= timeout_s + 10  # the last candidate may finish after the limit
    _still_fails_the_same_way(result.shrunk, specs, result.signature)
    result.shrunk.validate()


def test_skewed_shrinks_to_one_request_and_keeps_the_field() -> None:
    result = shrink(_scenario("quick", 12), (REFERENCE, SKEWED), timeout_s=30)
    assert result.signature == Signature(DIVERGED, "plan", "credit_after")
    assert result.after[0] == 1
    assert result.complete


def test_an_error_keeps_its_signature() -> None:
    result = shrink(_scenario("quick", 6), (REFERENCE, RAISES), timeout_s=30)
    assert isinstance(result.signature, Signature)
    assert result.signature.status == "error"
    assert result.signature.record_type == RAISES.name
    assert "deliberate failure at plan N" in (result.signature.field or "")
    assert result.result.plan == RAISE_AT
    assert result.after[0] == 1


def test_identical_scenarios_are_not_shrunk() -> None:
    scenario = _scenario("quick", 3)
    result = shrink(scenario, (REFERENCE, REFERENCE), timeout_s=10)
    assert not result.failing
    assert result.shrunk == scenario and result.attempts == 0


def test_signature_is_pluggable() -> None:
    seen: list[str] = []

    def status_only(
        scenario: Scenario, result: ScenarioResult, specs: tuple[ImplSpec, ...]
    ) -> str | None:
        seen.append(result.status)
        return None if result.status == IDENTICAL else result.status

    result = shrink(
        _scenario("quick", 12), (REFERENCE, SKEWED), signature_fn=status_only, timeout_s=20
    )
    assert result.signature == DIVERGED
    assert seen and result.after[0] == 1


def test_time_limit_keeps_the_best_so_far() -> None:
    from tracediff.shrink import Shrinker

    ticks = iter(range(1000))  # every clock reading is one "second" later
    stopped = Shrinker(
        _scenario("quick", 12), (REFERENCE, SKEWED), timeout_s=5, clock=lambda: next(ticks)
    ).shrink()
    assert not stopped.complete
    assert stopped.attempts <= 5
    assert size_key(stopped.shrunk, stopped.after[1]) <= size_key(
        stopped.initial, stopped.before[1]
    )


def test_integer_search_helpers() -> None:
    assert find_integer(lambda n: n <= 37) == 37
    assert find_integer(lambda n: n <= 0) == 0
    assert minimize_int(100, 1, lambda v: v >= 42) == 42
    assert minimize_int(16021, 0, lambda v: v >= 12000) == 16000  # a round number, no creep
    assert minimize_int(7, 0, lambda v: True) == 0
    assert simpler_ints(16021, 0) == sorted(
        {8010, 4005, 2002, 1001, 500, 250, 125, 62, 31, 15, 7, 3, 1, 10000, 16000, 16020}
    )


def test_cli_shrink_save_writes_the_corpus_and_repro(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS")  # --save writes where gate reads
    args = ["shrink", "--seed", "12", "--impl", "reference", "--impl", SKEWED.name, "--save"]
    args += ["--signature", "fields"]
    result = CliRunner().invoke(main, [*args, "--traces", "traces", "--json", "out.json"])
    assert result.exit_code == 1, result.output
    saved = tmp_path / "scenarios/regressions/quick-12-diverged-plan-credit-after.json"
    assert saved.is_file()
    data = json.loads(saved.read_text())
    assert data["format"] == "tracediff-regression"
    assert data["impls"] == ["reference", SKEWED.name]
    assert data["note"] and data["signature"]["field"] == "credit_after"
    assert len(Scenario.from_dict(data).requests) == 1  # the corpus loads it as a scenario
    assert "before" in result.output and "after" in result.output
    assert f"tracediff shrink --scenario {saved.relative_to(tmp_path)}" in result.output
    assert "tracediff replay traces/quick-12-reference.trace" in result.output
    assert json.loads((tmp_path / "out.json").read_text())["after"]["requests"] == 1
    refused = CliRunner().invoke(main, ["shrink", "--scenario", str(saved), "--timeout-s", "10"])
    assert refused.exit_code == 2, refused.output  # a data file does not choose code to import
    assert f"confirm with --impl reference --impl {SKEWED.name}" in refused.stderr
    confirmed = ["--impl", "reference", "--impl", SKEWED.name]
    again = CliRunner().invoke(
        main, ["shrink", "--scenario", str(saved), "--timeout-s", "10", *confirmed]
    )
    assert again.exit_code == 1, again.output
    assert "credit_after" in again.output


def test_cli_shrink_keeps_the_divergence_explanations_signature_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS")  # --save writes where gate reads
    args = ["shrink", "--seed", "12", "--impl", "reference", "--impl", SKEWED.name, "--save"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    (saved,) = (tmp_path / "scenarios/regressions").glob("*.json")
    assert saved.name == "quick-12-value-plan-credit-after.json"
    data = json.loads(saved.read_text())
    assert data["signature"]["kind"] == "value" and "credit_after" in data["signature"]["path"]


def test_compare_signature_separates_kinds() -> None:
    from tracediff.shrink import compare_signature

    scenario = _first_diverging("quick", SLOT_TIEBREAK, 8)
    specs = (REFERENCE, SLOT_TIEBREAK)
    signature = compare_signature(scenario, run_scenario(scenario, specs), specs)
    # the tie-break moves a candidate's prefixes; the chosen round may stay the same
    assert str(signature).split(" · ")[0] in ("decision", "bookkeeping")
    assert "prefixes" in str(signature) or "probe" in str(signature)
    same = _scenario("quick", 3)
    assert compare_signature(same, run_scenario(same, specs[:1] * 2), specs[:1] * 2) is None


def test_cli_shrink_in_ci_writes_artifacts_not_the_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CI", "true")
    args = ["shrink", "--seed", "12", "--impl", "reference", "--impl", SKEWED.name]
    result = CliRunner().invoke(main, [*args, "--save", "--artifacts", "art"])
    assert result.exit_code == 1, result.output
    assert not (tmp_path / "scenarios").exists()
    assert list((tmp_path / "art/regressions").glob("quick-12-*.json"))


def test_cli_shrink_identical_and_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    same = runner.invoke(
        main, ["shrink", "--seed", "3", "--impl", "reference", "--impl", "reference"]
    )
    assert same.exit_code == 0 and "nothing to shrink" in same.output
    both = runner.invoke(main, ["shrink", "--seed", "3", "--scenario", str(tmp_path / "x.json")])
    assert both.exit_code == 2 and "exactly one of" in both.output
    neither = runner.invoke(main, ["shrink"])
    assert neither.exit_code == 2


def test_fuzz_finds_and_shrinks_a_divergence() -> None:
    result = CliRunner().invoke(
        main,
        [
            "fuzz",
            "--impl",
            "reference",
            "--impl",
            SKEWED.name,
            "--max-examples",
            "30",
            "--max-failures",
            "1",
            "--timeout-s",
            "10",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "credit_after" in result.output and "DIVERGED" in result.output


def test_fuzz_of_identical_implementations_finds_nothing() -> None:
    from tracediff.fuzz import fuzz

    result = fuzz((REFERENCE, REFERENCE), max_examples=8, seed=1)
    assert result.ok and result.examples == 8
