"""Shrink: small repros that fail the same way; the regression corpus; fuzz."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.impls.raises import RAISE_AT
from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import ImplSpec, parse_impl
from tracediff.running.runner import DIVERGED, IDENTICAL, ScenarioResult, run_scenario
from tracediff.search.shrink import (
    BUDGET,
    MINIMUM,
    TIME_CAP,
    ShrinkOptions,
    ShrinkResult,
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
    ("profile", "impl", "max_requests"),
    [
        ("quick", SKEWED, 8),
        ("quick", SLOT_TIEBREAK, 8),  # a tie-break decision
        ("quick", EAGER_PRUNE, 8),
    ],
)
def test_shrink_reaches_the_target_and_keeps_the_signature(
    profile: str, impl: ImplSpec, max_requests: int
) -> None:
    specs = (REFERENCE, impl)
    result = shrink(_first_diverging(profile, impl, max_requests), specs)
    assert result.failing and result.stopped == MINIMUM  # by itself, not by a limit
    requests, plans = result.after
    assert requests <= MAX_REQUESTS and plans <= MAX_PLANS, (result.before, result.after)
    assert result.after <= result.before
    _still_fails_the_same_way(result.shrunk, specs, result.signature)
    result.shrunk.validate()


def test_skewed_shrinks_to_one_request_and_keeps_the_field() -> None:
    result = shrink(_scenario("quick", 12), (REFERENCE, SKEWED))
    assert result.signature == Signature(DIVERGED, "plan", "credit_after")
    assert result.after[0] == 1
    assert result.complete


def test_an_error_keeps_its_signature() -> None:
    result = shrink(_scenario("quick", 6), (REFERENCE, RAISES))
    assert isinstance(result.signature, Signature)
    assert result.signature.status == "error"
    assert result.signature.record_type == RAISES.name
    assert "deliberate failure at plan N" in (result.signature.field or "")
    assert result.result.plan == RAISE_AT
    assert result.after[0] == 1


def test_identical_scenarios_are_not_shrunk() -> None:
    scenario = _scenario("quick", 3)
    result = shrink(scenario, (REFERENCE, REFERENCE))
    assert not result.failing
    assert result.shrunk == scenario and result.attempts == 0


def test_signature_is_pluggable() -> None:
    seen: list[str] = []

    def status_only(
        scenario: Scenario, result: ScenarioResult, specs: tuple[ImplSpec, ...]
    ) -> str | None:
        seen.append(result.status)
        return None if result.status == IDENTICAL else result.status

    result = shrink(_scenario("quick", 12), (REFERENCE, SKEWED), signature_fn=status_only)
    assert result.signature == DIVERGED
    assert seen and result.after[0] == 1


def test_the_budget_stops_the_search_the_same_way_every_time() -> None:
    budget = ShrinkOptions(max_evaluations=7)
    first = shrink(_scenario("quick", 12), (REFERENCE, SKEWED), options=budget)
    again = shrink(_scenario("quick", 12), (REFERENCE, SKEWED), options=budget)
    assert first.stopped == BUDGET and not first.complete
    assert first.attempts == 7 and first.evaluations == 7
    assert _bytes(first) == _bytes(again)
    assert "stopped at the evaluation budget (7 candidates)" in first.stop_reason()
    assert size_key(first.shrunk, first.after[1]) <= size_key(first.initial, first.before[1])


def test_the_wall_clock_is_only_a_safety_cap_and_says_so() -> None:
    from tracediff.search.shrink import Shrinker

    ticks = iter(range(1000))  # every clock reading is one "second" later
    stopped = Shrinker(
        _scenario("quick", 12),
        (REFERENCE, SKEWED),
        options=ShrinkOptions(max_seconds=5),
        clock=lambda: next(ticks),
    ).shrink()
    assert stopped.stopped == TIME_CAP and not stopped.complete
    assert stopped.attempts <= 5
    assert "wall-clock safety cap (5 s)" in stopped.stop_reason()
    assert "depends on the machine's speed" in stopped.stop_reason()
    assert size_key(stopped.shrunk, stopped.after[1]) <= size_key(
        stopped.initial, stopped.before[1]
    )


def test_candidates_run_under_the_users_timeout_not_a_measured_one() -> None:
    from tracediff.search.shrink import Shrinker

    limits: list[float | None] = []

    class Recording(Shrinker):
        def _run(self, scenario: Scenario, timeout_s: float | None) -> ScenarioResult:
            limits.append(timeout_s)
            return super()._run(scenario, timeout_s)

    options = ShrinkOptions(max_evaluations=20, run_timeout_s=42.0)
    Recording(_scenario("quick", 12), (REFERENCE, SKEWED), options=options).shrink()
    assert len(limits) == 21 and set(limits) == {42.0}  # the original and 20 candidates


def test_shrink_options_refuse_nonsense() -> None:
    for bad in ({"max_evaluations": 0}, {"run_timeout_s": 0.0}, {"max_seconds": -1.0}):
        with pytest.raises(ValueError, match="must be"):
            ShrinkOptions(**bad)  # type: ignore[arg-type]


def test_cli_budget_and_limits_are_checked() -> None:
    runner = CliRunner()
    for args, words in [
        (["--budget", "0"], "--budget must be at least 1 candidate evaluation, got 0"),
        (["--timeout", "0"], "--timeout must be a positive number of seconds"),
        (["--max-seconds", "nan"], "--max-seconds must be a positive number of seconds"),
    ]:
        for command in ("shrink", "fuzz"):
            seed = ["--seed", "1"] if command == "shrink" else []
            result = runner.invoke(main, [command, *seed, *args])
            assert result.exit_code == 2 and words in result.output, (command, result.output)


def test_the_cli_defaults_are_the_shrinkers() -> None:
    from tracediff.cli import shrink_options as cli
    from tracediff.search import fuzz, shrink

    assert cli.DEFAULT_EVALUATIONS == shrink.DEFAULT_EVALUATIONS
    assert cli.DEFAULT_SHRINK_EVALUATIONS == fuzz.DEFAULT_SHRINK_EVALUATIONS
    assert cli.DEFAULT_RUN_TIMEOUT_S == shrink.DEFAULT_RUN_TIMEOUT_S
    assert cli.DEFAULT_MAX_SECONDS == shrink.DEFAULT_MAX_SECONDS


# -- the same repro on any machine, at any load ------------------------------------------------
# Every broken implementation of tests/impls that diverges (or fails) on a quick seed, with a
# seed where it does: each shrinks to the same bytes on a quiet machine and beside a process
# that burns CPU. (Shrinking all of them twice takes about 1.5 min on two quiet cores.)
BROKEN = [
    ("tests.impls.skewed:SkewedScheduler", 0),
    ("tests.impls.slot_tiebreak:SlotTieBreakScheduler", 11),
    ("tests.impls.eager_prune:EagerPruneScheduler", 0),
    ("tests.impls.tiebreak:TieBreakScheduler", 0),
    ("tests.impls.summation:ReversedSumScheduler", 11),
    ("tests.impls.ulp:OneUlpScheduler", 0),
    ("tests.impls.stale_advance:StaleAdvanceScheduler", 37),
    ("tests.impls.raises:RaisingScheduler", 0),
    ("tests.impls.mutants:SwappedTieBreakScheduler", 78),
    ("tests.impls.mutants:FirstAtBestValueScheduler", 78),
    ("tests.impls.mutants:WidthBeforeDurationScheduler", 78),
    ("tests.impls.mutants:FreshAtPeriodScheduler", 56),
    ("tests.impls.mutants:ProbeTrialsOffByOneScheduler", 6),
    ("tests.impls.mutants:PruneKeepsEqualScheduler", 26),
    ("tests.impls.mutants:TableTruncatesScheduler", 3),
    ("tests.impls.boundaries:UnfundedAtCreditScheduler", 124),
    ("tests.impls.boundaries:StrictToleranceScheduler", 108),
]


def _bytes(result: ShrinkResult) -> bytes:
    return json.dumps(result.shrunk.to_dict(), sort_keys=True).encode()


@contextmanager
def _cpu_hog() -> Iterator[None]:
    """A process spinning on the CPU beside the test, for as long as the block runs."""
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


@pytest.mark.parametrize(("impl", "seed"), BROKEN, ids=[i.split(":")[1] for i, _ in BROKEN])
def test_a_shrink_gives_the_same_repro_quiet_and_loaded(impl: str, seed: int) -> None:
    specs = (REFERENCE, parse_impl(impl))
    scenario = _scenario("quick", seed)
    quiet = shrink(scenario, specs)
    assert quiet.failing, f"{impl} no longer fails on quick seed {seed}: update BROKEN"
    with _cpu_hog():
        loaded = shrink(scenario, specs)
    assert _bytes(loaded) == _bytes(quiet)
    assert (loaded.attempts, loaded.improvements, loaded.stopped) == (
        quiet.attempts,
        quiet.improvements,
        quiet.stopped,
    )
    assert quiet.stopped == MINIMUM
    assert quiet.after[0] <= MAX_REQUESTS, quiet.after


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
    refused = CliRunner().invoke(main, ["shrink", "--scenario", str(saved), "--budget", "50"])
    assert refused.exit_code == 2, refused.output  # a data file does not choose code to import
    assert f"confirm with --impl reference --impl {SKEWED.name}" in refused.stderr
    confirmed = ["--impl", "reference", "--impl", SKEWED.name]
    again = CliRunner().invoke(
        main, ["shrink", "--scenario", str(saved), "--budget", "50", *confirmed]
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
    from tracediff.search.shrink import compare_signature

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
            "--budget",
            "100",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "credit_after" in result.output and "DIVERGED" in result.output


def test_fuzz_of_identical_implementations_finds_nothing() -> None:
    from tracediff.search.fuzz import fuzz

    result = fuzz((REFERENCE, REFERENCE), max_examples=8, seed=1)
    assert result.ok and result.examples == 8
