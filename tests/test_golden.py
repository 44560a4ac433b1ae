"""Golden digests: manifests, the update/review/accept/reject cycle, check, CI behaviour."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracediff import golden
from tracediff.cli import main
from tracediff.errors import TraceFormatError, UsageError
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import ImplSpec, parse_impl
from tracediff.running.runner import run_scenario
from tracediff.trace import TraceReader

ROOT = Path(__file__).resolve().parents[1]
SKEWED = "tests.impls.skewed:SkewedScheduler"

TINY = """
name = "tiny"
description = "golden tests: four short scenarios"
seeds = 4

[matrix]
requests = [1, 2]
allocation = ["host", "mixed"]
graphs = ["rect", "mixed"]
queue_depth = [0, 1]

[generator]
max_new = [6, 14]
prompt_len = [16, 300]
arrival_window_us = 20000
"""


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary working directory with a four-scenario profile and no CI variable."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(golden.ARTIFACTS_ENV, raising=False)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "tiny.toml").write_text(TINY)
    (tmp_path / "golden").mkdir()
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracediff]\nprofiles = "scenarios"\ngolden = "golden"\n'
    )
    return tmp_path


def _invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _accepted(tiny: Path) -> Path:
    code, output = _invoke("golden", "update", "--profile", "tiny", "-j", "1")
    assert code == 0, output
    code, output = _invoke("golden", "accept")
    assert code == 0, output
    return tiny / "golden" / "tiny.json"


# -- the manifest format ------------------------------------------------------------------
def test_manifest_round_trip_and_versioning(tmp_path: Path) -> None:
    entries = (
        golden.Entry(0, "ab" * 32, 3, 9, 1234, "0123456789abcdef"),
        golden.Entry(5, "cd" * 32, 4, 11, 999, "fedcba9876543210"),
    )
    manifest = golden.Manifest("p", "reference", "0.1.0", entries, (5,))
    path = tmp_path / "p.json"
    path.write_text(manifest.dumps())
    assert golden.read_manifest(path) == manifest
    data = json.loads(manifest.dumps())
    assert data["format"] == "tracediff-golden" and data["version"] == 1
    assert data["scenarios"][1] == {
        "seed": 5,
        "digest": "cd" * 32,
        "plans": 4,
        "records": 11,
        "bytes": 999,
        "scenario": "fedcba9876543210",
    }
    assert manifest.dumps().count("\n") == len(entries) + 10  # one scenario per line
    for broken, needle in [
        ({**data, "version": 2}, "version 2"),
        ({**data, "format": "x"}, "not a golden manifest"),
        ({**data, "scenarios": [{"seed": 1}]}, "malformed"),
        ({**data, "scenarios": [data["scenarios"][0]] * 2}, "twice"),
    ]:
        with pytest.raises(TraceFormatError, match=needle):
            golden.parse_manifest(broken, "m.json")


def test_digest_of_one_implementation_equals_the_runners() -> None:
    scenario = generate(load_profile("quick"), 12)
    spec = parse_impl("reference")
    alone = golden.digest_scenario(scenario, spec)
    stats = run_scenario(scenario, (spec,)).impls[0]
    assert (alone.digest, alone.plans, alone.records) == (stats.digest, stats.plans, stats.records)
    assert alone.status == "ok" and alone.bytes > 0


def test_a_reproduced_golden_digest_skips_the_schema_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the manifest's digest, plan records are checked only when the body turns out
    different: the same digest means the golden trace, checked when it was recorded."""
    import tracediff.models.specdec.engine.driver as driver

    checked = []
    real = driver.check_plan
    monkeypatch.setattr(driver, "check_plan", lambda r, n: (checked.append(n), real(r, n)))
    scenario = generate(load_profile("quick"), 12)
    spec = parse_impl("optimized")
    full = golden.digest_scenario(scenario, spec)
    assert len(checked) == full.plans > 0
    checked.clear()
    fast = golden.digest_scenario(scenario, spec, expected=full.digest)
    timings = {"seconds": fast.seconds, "plan_seconds": fast.plan_seconds}
    assert fast == dataclasses.replace(full, **timings) and not checked
    assert 0 < fast.plan_seconds < fast.seconds
    # another digest: digested again, every plan checked, the same result
    again = golden.digest_scenario(scenario, spec, expected="0" * 64)
    assert again.digest == full.digest and len(checked) == full.plans


def test_a_malformed_record_is_named_even_with_an_expected_digest() -> None:
    scenario = generate(load_profile("quick"), 3)
    bad = ImplSpec("bad", "tests.test_harness_cost:InfiniteDuration")
    found = golden.digest_scenario(scenario, bad, expected="0" * 64)
    assert found.status == "error"
    assert "candidates.expected holds float inf" in found.message


# -- update, review, accept, reject ----------------------------------------------------------
def test_update_review_accept_reject_cycle(tiny: Path) -> None:
    code, output = _invoke("golden", "update", "--profile", "tiny", "-j", "1")
    assert code == 0, output
    assert "pending" in output
    files = _files(tiny / "golden")
    assert "tiny.json.new" in files and "tiny.json" not in files
    assert all(f.endswith(".new") for f in files)

    code, output = _invoke("golden", "review")
    assert code == 0 and "new manifest" in output and "4 seeds" in output

    code, output = _invoke("golden", "accept")
    assert code == 0, output
    files = _files(tiny / "golden")
    assert "tiny.json" in files and not any(f.endswith(".new") for f in files)
    manifest = golden.read_manifest(tiny / "golden" / "tiny.json")
    assert [e.seed for e in manifest.scenarios] == [0, 1, 2, 3]
    assert manifest.traces
    for seed in manifest.traces:
        trace = golden.trace_path(tiny / "golden", "tiny", seed)
        entry = manifest.entry(seed)
        assert entry is not None and TraceReader(trace).verify() == entry.digest

    code, output = _invoke("golden", "update", "--profile", "tiny", "-j", "1")
    assert code == 0 and "up to date" in output
    assert not any(f.endswith(".new") for f in _files(tiny / "golden"))

    # The accepted manifest drifts from what the reference does: one digest, one seed.
    data = json.loads(manifest.dumps())
    data["scenarios"][1]["digest"] = "0" * 64
    del data["scenarios"][3]
    before = json.dumps(data)
    (tiny / "golden" / "tiny.json").write_text(before)
    code, output = _invoke("golden", "update", "--profile", "tiny", "-j", "1")
    assert code == 0, output
    code, output = _invoke("golden", "review", "--json")
    change = json.loads(output)[0]
    assert change["added"] == [3] and [c["seed"] for c in change["changed"]] == [1]
    assert change["scenario_changed"] == []  # the same scenario, other decisions
    code, output = _invoke("golden", "reject", "--profile", "tiny")
    assert code == 0 and "rejected" in output
    assert (tiny / "golden" / "tiny.json").read_text() == before  # never overwritten
    assert not any(f.endswith(".new") for f in _files(tiny / "golden"))


def test_accept_and_reject_without_pending_files_exit_2(tiny: Path) -> None:
    for command in ("accept", "reject"):
        code, output = _invoke("golden", command)
        assert code == 2 and "no pending golden updates" in output


def test_accept_removes_traces_the_new_manifest_drops(tiny: Path) -> None:
    path = _accepted(tiny)
    manifest = golden.read_manifest(path)
    stale = golden.trace_path(tiny / "golden", "tiny", 99)
    stale.write_bytes(b"old")
    data = json.loads(manifest.dumps())
    data["traces"] = [*manifest.traces, 99]
    path.write_text(json.dumps(data))
    assert _invoke("golden", "update", "--profile", "tiny", "-j", "1")[0] == 0
    code, output = _invoke("golden", "accept", "--profile", "tiny")
    assert code == 0 and "1 old traces removed" in output
    assert not stale.exists()


# -- check ------------------------------------------------------------------------------------
def test_check_passes_for_the_reference(tiny: Path) -> None:
    _accepted(tiny)
    code, output = _invoke("golden", "check", "--profile", "tiny", "-j", "1")
    assert code == 0, output
    assert "matches all 4 digests" in output


def test_check_explains_a_broken_implementation(tiny: Path) -> None:
    _accepted(tiny)
    code, output = _invoke(
        "golden", "check", "--profile", "tiny", "--impl", SKEWED, "--artifacts", "art",
        "--json", "check.json",
    )  # fmt: skip
    assert code == 1, output
    assert "MISMATCH" in output
    report = json.loads((tiny / "check.json").read_text())
    assert report["status"] == "mismatch" and report["checked"] == 4
    first = report["mismatches"][0]
    assert first["kind"] == "digest"
    assert first["reference_changed"] is False
    assert first["plan"] == 3 and first["record_type"] == "plan"
    assert "diverges from reference" in first["explanation"]
    assert "credit_after" in first["explanation"]
    assert first["artifacts"] and all(Path(a).exists() for a in first["artifacts"])


def test_check_reports_a_change_of_the_reference_itself(tiny: Path) -> None:
    path = _accepted(tiny)
    manifest = golden.read_manifest(path)
    traced = manifest.traces[0]
    data = json.loads(manifest.dumps())
    for row in data["scenarios"]:
        if row["seed"] == traced:
            row["digest"] = "f" * 64
    path.write_text(json.dumps(data))
    outcome = golden.check("tiny", parse_impl("reference"), golden_dir=tiny / "golden")
    assert not outcome.ok
    (mismatch,) = outcome.mismatches
    assert mismatch.seed == traced and mismatch.reference_changed
    assert "no longer produces the golden trace" in mismatch.explanation


def test_check_tells_a_changed_scenario_from_changed_decisions(tiny: Path) -> None:
    _accepted(tiny)
    profile = tiny / "scenarios" / "tiny.toml"
    profile.write_text(profile.read_text().replace("max_new = [6, 14]", "max_new = [6, 15]"))
    outcome = golden.check("tiny", parse_impl("reference"), golden_dir=tiny / "golden")
    changed = [m for m in outcome.mismatches if "scenario itself changed" in m.explanation]
    assert changed and all(m.reference_changed for m in changed)
    outcome = golden.check("tiny", parse_impl(SKEWED), golden_dir=tiny / "golden")
    assert all("scenario itself changed" in m.explanation for m in outcome.mismatches)


def test_check_without_a_manifest(tiny: Path) -> None:
    code, output = _invoke("golden", "check", "--profile", "tiny")
    assert code == 2 and "no manifest" in output and "golden update" in output
    outcome = golden.gate_step("tiny", parse_impl("reference"), 1, str(tiny / "art"))
    assert outcome.skipped and not outcome.ok


def test_gate_step_writes_its_report_on_a_mismatch(tiny: Path) -> None:
    _accepted(tiny)
    outcome = golden.gate_step("tiny", parse_impl(SKEWED), 1, str(tiny / "art"))
    assert outcome.status == golden.MISMATCH
    report = tiny / "art" / f"golden-tiny-{SKEWED.replace(':', '_')}.json"
    assert str(report) in outcome.artifacts
    assert json.loads(report.read_text())["format"] == "tracediff-golden-check"
    assert golden.gate_step("tiny", parse_impl("reference"), 1, str(tiny / "art")).ok


# -- CI ---------------------------------------------------------------------------------------
def test_ci_writes_nothing_into_the_golden_directory(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    code, output = _invoke("golden", "update", "--profile", "tiny", "--artifacts", "art")
    assert code == 0, output
    assert not any((tiny / "golden").iterdir())
    assert (tiny / "art" / "golden" / "tiny.json.new").is_file()
    code, output = _invoke("golden", "review", "--artifacts", "art")
    assert code == 0 and "new manifest" in output
    code, output = _invoke("golden", "accept")
    assert code == 2 and "CI=true" in output
    assert not any((tiny / "golden").iterdir())
    code, output = _invoke("golden", "reject", "--artifacts", "art")
    assert code == 0
    assert not (tiny / "art" / "golden" / "tiny.json.new").exists()


def test_ci_artifacts_default_from_the_environment(
    tiny: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv(golden.ARTIFACTS_ENV, str(tiny / "from-env"))
    assert golden.pending_dir("golden") == tiny / "from-env" / "golden"
    with pytest.raises(UsageError, match="CI=true"):
        golden.accept("tiny")


# -- the repository's own golden files --------------------------------------------------------
@pytest.mark.parametrize("profile", ["quick", "default"])
def test_repository_manifests_are_valid_and_their_traces_match(profile: str) -> None:
    path = ROOT / "golden" / f"{profile}.json"
    manifest = golden.read_manifest(path)
    assert manifest.profile == profile and manifest.impl == "reference"
    assert [e.seed for e in manifest.scenarios] == list(load_profile(profile).seeds)
    for seed in manifest.traces:
        trace = golden.trace_path(ROOT / "golden", profile, seed)
        entry = manifest.entry(seed)
        assert entry is not None and TraceReader(trace).verify() == entry.digest


def test_repository_golden_digests_of_small_scenarios_still_hold() -> None:
    manifest = golden.read_manifest(ROOT / "golden" / "quick.json")
    profile = load_profile("quick")
    smallest = sorted(manifest.scenarios, key=lambda e: e.bytes)[:4]
    for entry in smallest:
        now = golden.digest_scenario(generate(profile, entry.seed), parse_impl("reference"))
        assert now.entry() == entry, f"reference changed on quick:{entry.seed}"


def test_repository_golden_files_stay_small() -> None:
    total = sum(p.stat().st_size for p in (ROOT / "golden").rglob("*") if p.is_file())
    assert total < 2_500_000


def test_the_summary_says_what_driving_cost_beside_the_decisions() -> None:
    """golden check reports the simulated engine, driver and harness as a share of the
    implementation's own decision time, measured in the same workers."""
    outcome = golden.GoldenOutcome(
        "quick", "optimized", "golden/quick.json", golden.OK, checked=3, plans=30,
        driving_seconds=1.25, plan_seconds=1.0,
    )  # fmt: skip
    assert outcome.simulation_share == pytest.approx(0.25)
    assert "simulation and harness +25% of plan()" in outcome.summary()
    assert outcome.to_dict()["simulation_share"] == 0.25
    untimed = dataclasses.replace(outcome, plan_seconds=0.0)
    assert untimed.simulation_share is None and "simulation" not in untimed.summary()


def test_review_shows_a_changed_seeds_first_difference_and_accept_takes_one_seed(
    tiny: Path,
) -> None:
    """As snapshot tools do: each changed scenario's difference, accepted one at a time."""
    from tracediff.project import current_model
    from tracediff.project.profiles import load_profile as load_any_profile
    from tracediff.running.runner import write_trace

    path = _accepted(tiny)
    manifest = golden.read_manifest(path)
    profile = load_any_profile(current_model(), "tiny")
    wrong = parse_impl("tests.impls.kinds:ClampScheduler")
    # the accepted files hold another implementation's behaviour for two kept seeds
    drifted = []
    data = json.loads(manifest.dumps())
    for seed in manifest.traces:
        trace = golden.trace_path(tiny / "golden", "tiny", seed)
        write_trace(generate(profile, seed), wrong, str(trace.parent), str(trace))
        digest = TraceReader(trace).verify()
        row = next(r for r in data["scenarios"] if r["seed"] == seed)
        if digest != row["digest"]:
            row["digest"] = digest
            drifted.append(seed)
    assert len(drifted) >= 2, "ClampScheduler decides as the reference on the tiny profile"
    path.write_text(json.dumps(data))
    code, output = _invoke("golden", "update", "--profile", "tiny", "-j", "1")
    assert code == 0, output
    code, output = _invoke("golden", "review", "--json")
    change = json.loads(output)[0]
    assert sorted(int(s) for s in change["first_differences"]) == sorted(drifted)
    assert all("plan" in text for text in change["first_differences"].values())
    code, output = _invoke("golden", "review")
    assert code == 0 and "first difference" in output

    first, *rest = sorted(drifted)
    code, output = _invoke("golden", "accept", "--seed", str(first))
    assert code == 0, output
    accepted = golden.read_manifest(path)
    reference = golden.read_manifest(path.with_name(path.name + ".new"))
    assert accepted.entry(first) == reference.entry(first)  # that seed only
    assert all(accepted.entry(s) != reference.entry(s) for s in rest)
    code, output = _invoke("golden", "review", "--json")
    assert [c["seed"] for c in json.loads(output)[0]["changed"]] == rest
    code, output = _invoke("golden", "accept", "--seed", "99999")
    assert code == 2 and "seed 99999 is in neither" in output
    for seed in rest:
        assert _invoke("golden", "accept", "--seed", str(seed))[0] == 0
    assert not path.with_name(path.name + ".new").exists()  # nothing left pending
    assert _invoke("golden", "check", "--profile", "tiny", "--impl", "reference")[0] == 0
