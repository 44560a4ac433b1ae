"""Implementations that misbehave against tracediff itself (tests/impls/hostile.py): each is
a finding with exit 1 and the ``--json`` summary written, whatever ``-j`` and ``--timeout``;
nothing is re-run in the tracediff process, nothing an implementation starts outlives it.

Each run is two seeds of the quick profile (``HOSTILE_SEED`` misbehaves, the other does not)
through the command line in this process (CliRunner), which is where an exit, a
KeyboardInterrupt or a re-run without limits would have escaped before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.impls.hostile import (
    COLUMN_GARBAGE,
    HOSTILE_AT,
    HOSTILE_SEED,
    MUTATED_SEED,
    SAME_BYTES,
    spawn_pid_file,
)
from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import parse_impl
from tracediff.running.runner import RunOptions, run_scenario, run_scenarios

HOSTILE = "tests.impls.hostile"
OTHER_SEED = HOSTILE_SEED + 1
SEEDS = f"{HOSTILE_SEED},{OTHER_SEED}"


def run(tmp_path: Path, impl: str, *extra: str, first: str | None = None) -> tuple[int, Any, str]:
    """``tracediff run`` of the reference and ``impl``; (exit code, the --json, output)."""
    summary = tmp_path / "summary.json"
    impls = ["--impl", f"{HOSTILE}:{impl}", "--impl", "reference"]
    if first is None:
        impls = impls[2:] + impls[:2]
    args = ["run", "--seeds", SEEDS, *impls, "--no-progress", "--json", str(summary), *extra]
    result = CliRunner().invoke(main, args)
    data = json.loads(summary.read_text()) if summary.exists() else None
    return result.exit_code, data, result.output


def by_seed(data: Any) -> dict[int, dict[str, Any]]:
    return {r["seed"]: r for r in data["results"]}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


LIMITS = {"no limit": (), "timeout": ("--timeout", "20")}
FINDINGS = {
    "sys.exit(0)": ("ExitZeroScheduler", "sys.exit(0)"),
    "SystemExit(3)": ("SystemExitScheduler", "sys.exit(3)"),
    "os._exit(7)": ("HardExitScheduler", "worker died twice: the worker process exited"),
    "KeyboardInterrupt": ("InterruptScheduler", "raised by the implementation, not by Ctrl-C"),
    "constructor raises": ("BrokenConstructor", "deliberate failure in the constructor"),
}  # fmt: skip


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("behaviour", FINDINGS)
def test_a_misbehaving_implementation_is_an_error_finding(
    tmp_path: Path, behaviour: str, jobs: str, limit: str
) -> None:
    impl, needle = FINDINGS[behaviour]
    code, data, output = run(tmp_path, impl, "-j", jobs, *LIMITS[limit])
    assert code == 1, output
    assert data is not None and not data["ok"] and data["errors"] == 1
    results = by_seed(data)
    assert results[OTHER_SEED]["status"] == "identical"
    bad = results[HOSTILE_SEED]
    assert bad["status"] == "error" and needle in bad["message"]
    assert bad["failed_impl"] == f"{HOSTILE}:{impl}"
    # The explanation ran in a worker too, and never blames nondeterminism.
    assert "not deterministic" not in output


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_3_gb_allocation_is_a_memory_error_under_the_limit_on_the_rerun_too(
    tmp_path: Path, jobs: str, limit: str
) -> None:
    code, data, output = run(
        tmp_path, "AllocateScheduler", "-j", jobs, "--memory-limit", "1024", *LIMITS[limit]
    )
    assert code == 1, output
    bad = by_seed(data)[HOSTILE_SEED]
    assert bad["status"] == "error" and "exceeded the --memory-limit of 1024 MB" in bad["message"]
    # Re-run under the same limit, the explanation finds the MemoryError again.
    assert "not deterministic" not in output and "MemoryError" in output


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_process_left_running_is_a_finding_and_is_killed(
    tmp_path: Path, jobs: str, limit: str
) -> None:
    pids = spawn_pid_file()
    pids.unlink(missing_ok=True)
    code, data, output = run(tmp_path, "SpawnScheduler", "-j", jobs, *LIMITS[limit])
    assert code == 1, output
    bad = by_seed(data)[HOSTILE_SEED]
    assert bad["status"] == "error" and "left processes running" in bad["message"]
    started = [int(line) for line in pids.read_text().split()]
    assert started and not [pid for pid in started if alive(pid)]


@pytest.mark.parametrize("limit", LIMITS)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_implementation_that_mutates_its_scenario_changes_only_its_own_copy(
    tmp_path: Path, jobs: str, limit: str
) -> None:
    # The mutating implementation goes first: before, the reference ran its mutation.
    code, data, output = run(tmp_path, "MutatingScheduler", "-j", jobs, *LIMITS[limit], first="x")
    results = by_seed(data)
    assert set(results) == {HOSTILE_SEED, OTHER_SEED} and MUTATED_SEED not in results
    profile = load_profile("quick")
    reference = parse_impl("reference")
    for seed, result in results.items():
        alone = run_scenario(generate(profile, seed), (reference, reference))
        assert result["impls"][1]["digest"] == alone.impls[0].digest
    assert any(r["status"] == "diverged" for r in results.values())
    assert code == 1, output


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_huge_record_counts_against_the_time_limit(tmp_path: Path, jobs: str) -> None:
    code, data, output = run(tmp_path, "HugeRecordScheduler", "-j", jobs, "--timeout", "2")
    assert code == 1, output
    assert by_seed(data)[HOSTILE_SEED]["status"] in ("diverged", "timeout")
    assert "not deterministic" not in output


@pytest.mark.parametrize("first", [False, True], ids=["second", "first"])
@pytest.mark.parametrize("impl", COLUMN_GARBAGE)
def test_malformed_columns_or_rows_are_an_error_finding_naming_the_plan_and_field(
    impl: str, first: bool
) -> None:
    """Typed tables given as columns or as rows (which the driver packs): whatever is wrong
    is the implementation's finding, first or second (the runner checks a record whose
    bytes differ from the first implementation's, and every record of the first)."""
    specs = [parse_impl("reference"), parse_impl(f"{HOSTILE}:{impl}")]
    options = RunOptions(impls=tuple(specs[::-1] if first else specs), jobs=1)
    (result,) = run_scenarios([generate(load_profile("quick"), HOSTILE_SEED)], options).results
    assert result.status == "error", result.message
    assert (result.failed_impl, result.plan) == (f"{HOSTILE}:{impl}", HOSTILE_AT)
    expected = f"plan {HOSTILE_AT}: malformed plan record: {COLUMN_GARBAGE[impl]}"
    assert expected in result.message, result.message


@pytest.mark.parametrize("impl", SAME_BYTES)
def test_bytes_like_columns_that_pack_as_the_same_bins_are_accepted(impl: str) -> None:
    specs = (parse_impl(f"{HOSTILE}:{impl}"), parse_impl("reference"))
    (result,) = run_scenarios(
        [generate(load_profile("quick"), HOSTILE_SEED)], RunOptions(impls=specs, jobs=1)
    ).results
    assert result.status == "identical", result.message


@pytest.mark.parametrize("command", ["record", "replay"])
def test_a_constructor_that_raises_is_a_finding_for_record_and_replay(
    tmp_path: Path, command: str
) -> None:
    trace = tmp_path / "t.trace"
    broken = f"{HOSTILE}:BrokenConstructor"
    if command == "record":
        args = ["record", "--seed", str(HOSTILE_SEED), "--impl", broken, "-o", str(trace)]
    else:
        recorded = ["record", "--seed", str(HOSTILE_SEED), "-o", str(trace)]
        done = CliRunner().invoke(main, recorded)
        assert done.exit_code == 0, done.output
        args = ["replay", str(trace), "--impl", broken]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "deliberate failure in the constructor" in result.output
    assert "internal error" not in result.output and "Traceback" not in result.output


def test_an_import_that_exits_is_one_line_and_exit_2(tmp_path: Path) -> None:
    args = ["run", "--seeds", "1", "--impl", "reference", "--impl", "tests.impls.exit_on_import:X"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "sys.exit(5)" in lines[0]


TINY = """
name = "tiny"
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


def test_golden_check_with_an_implementation_that_kills_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "tiny.toml").write_text(TINY)
    (tmp_path / "golden").mkdir()  # the project's own profiles and golden digests
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracediff]\nprofiles = "scenarios"\ngolden = "golden"\n'
    )
    for args in (["golden", "update", "--profile", "tiny", "-j", "1"], ["golden", "accept"]):
        done = CliRunner().invoke(main, args)
        assert done.exit_code == 0, done.output
    check = ["golden", "check", "--profile", "tiny", "-j", "2", "--json", "check.json"]
    result = CliRunner().invoke(main, [*check, "--impl", f"{HOSTILE}:HardExitScheduler"])
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "check.json").read_text())
    (mismatch,) = report["mismatches"]
    assert mismatch["seed"] == HOSTILE_SEED and mismatch["kind"] == "failed"
    assert "worker died twice" in mismatch["actual"]["message"]


def test_selfcheck_that_finds_errors_exits_1(tmp_path: Path) -> None:
    args = ["selfcheck", "--seeds", SEEDS, "--impl", f"{HOSTILE}:ExitZeroScheduler"]
    result = CliRunner().invoke(main, [*args, "-j", "2", "--json", str(tmp_path / "s.json")])
    assert result.exit_code == 1, result.output
    report = json.loads((tmp_path / "s.json").read_text())
    assert report["errors"] == 1 and report["nondeterministic"] == 0 and not report["ok"]
