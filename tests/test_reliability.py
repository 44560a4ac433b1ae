"""Broken implementations, dying workers, interrupts and resuming: findings, never a hang.

Each test runs a broken implementation (tests/impls/hang.py, hog.py, malformed.py) against the
reference over a few tiny quick-profile seeds, of which exactly one is broken, and checks the
finding (status, implementation, plan, message) *and* that the other scenarios went on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.impls.hang import HANG_AT, HANG_SEED
from tests.impls.hog import HOG_SEED
from tests.impls.malformed import BAD_AT, BAD_SEED
from tracediff.cli import main
from tracediff.errors import JournalError
from tracediff.filenames import scenario_tag
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import ImplSpec, parse_impl
from tracediff.running.journal import JOURNAL_FILE
from tracediff.running.runner import (
    DIVERGED,
    ERROR,
    IDENTICAL,
    TIMEOUT,
    RunOptions,
    RunSummary,
    run_scenario,
    run_scenarios,
)

REFERENCE = parse_impl("reference")


def scenarios(seeds: Sequence[int]) -> list[Scenario]:
    profile = load_profile("quick")
    return [generate(profile, seed) for seed in seeds]


def against(target: str) -> tuple[ImplSpec, ImplSpec]:
    return (REFERENCE, parse_impl(target))


def statuses(summary: RunSummary) -> dict[int, str]:
    return {r.seed: r.status for r in summary.results}


def only_finding(summary: RunSummary, seed: int, status: str) -> None:
    expected = {r.seed: IDENTICAL for r in summary.results} | {seed: status}
    assert statuses(summary) == expected
    assert not summary.interrupted and summary.skipped == 0


# -- hangs -------------------------------------------------------------------------------------


def test_hang_with_timeout_2_over_3_seeds_is_one_timeout_finding(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    seeds = f"{HANG_SEED - 1}..{HANG_SEED + 1}"
    started = time.monotonic()
    result = CliRunner().invoke(
        main,
        ["run", "--seeds", seeds, "--impl", "reference", "--impl",
         "tests.impls.hang:LoopScheduler", "-j", "1", "--timeout", "2", "--no-progress",
         "--json", str(out)],
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert result.exit_code == 1, result.output
    assert 2 <= elapsed < 2 + 4  # the limit, plus starting a worker; never the grace period
    summary = json.loads(out.read_text())
    assert (summary["scenarios"], summary["identical"], summary["timeouts"]) == (3, 2, 1)
    (hung,) = [r for r in summary["results"] if r["status"] == TIMEOUT]
    assert hung["seed"] == HANG_SEED
    assert hung["failed_impl"] == "tests.impls.hang:LoopScheduler"
    assert hung["plan"] == HANG_AT
    assert "exceeded the 2 s scenario time limit at plan 2" in hung["message"]
    assert "hang.py" in hung["message"]  # the traceback shows where it hung


@pytest.mark.parametrize("name", ["SleepScheduler", "LockScheduler", "SwallowingScheduler"])
def test_a_blocking_call_is_stopped_by_the_in_process_alarm(name: str) -> None:
    (scenario,) = scenarios([HANG_SEED])
    started = time.monotonic()
    result = run_scenario(scenario, against(f"tests.impls.hang:{name}"), timeout_s=0.2)
    assert time.monotonic() - started < 2
    assert (result.status, result.plan) == (TIMEOUT, HANG_AT)
    assert result.failed_impl == f"tests.impls.hang:{name}"


@pytest.mark.parametrize(("name", "jobs"), [("SpinScheduler", 1), ("MutexScheduler", 2)])
def test_a_hang_in_c_code_is_killed_by_the_watchdog(name: str, jobs: int) -> None:
    # Neither a C loop holding the GIL nor a deadlocked pthread mutex ever returns to Python,
    # so SIGALRM cannot stop them: the parent kills the worker at timeout + grace.
    options = RunOptions(
        impls=against(f"tests.impls.hang:{name}"), jobs=jobs, timeout_s=0.3, grace_s=0.3
    )
    started = time.monotonic()
    summary = run_scenarios(scenarios([HANG_SEED - 1, HANG_SEED, HANG_SEED + 1]), options)
    assert time.monotonic() - started < 5
    only_finding(summary, HANG_SEED, TIMEOUT)
    (hung,) = [r for r in summary.results if r.status == TIMEOUT]
    assert (hung.failed_impl, hung.plan) == (f"tests.impls.hang:{name}", HANG_AT)
    assert "did not stop" in hung.message and "killed" in hung.message
    assert "hang.py" in hung.message  # faulthandler's stack of the hung worker


# -- crashes, memory, malformed output ------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "jobs", "timeout_s", "death"),
    [
        ("HardExitScheduler", 2, None, "exited with status 7"),
        ("SegfaultScheduler", 2, None, "killed by SIGSEGV"),
        ("SegfaultScheduler", 1, 30.0, "killed by SIGSEGV"),
    ],
)
def test_a_worker_that_dies_is_an_error_finding_and_the_run_goes_on(
    name: str, jobs: int, timeout_s: float | None, death: str
) -> None:
    options = RunOptions(
        impls=against(f"tests.impls.malformed:{name}"), jobs=jobs, timeout_s=timeout_s
    )
    seeds = [BAD_SEED - 1, BAD_SEED, BAD_SEED + 1, BAD_SEED + 2]
    summary = run_scenarios(scenarios(seeds), options)
    only_finding(summary, BAD_SEED, ERROR)
    (dead,) = [r for r in summary.results if r.status == ERROR]
    assert (dead.failed_impl, dead.plan) == (f"tests.impls.malformed:{name}", BAD_AT)
    assert death in dead.message and "worker died twice" in dead.message
    if "SIGSEGV" in death:
        assert "Segmentation fault" in dead.message and "malformed.py" in dead.message


def test_memory_limit_turns_a_hog_into_a_memory_error_finding(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(
        main,
        ["run", "--seeds", f"{HOG_SEED - 1}..{HOG_SEED + 1}", "--impl", "reference",
         "--impl", "tests.impls.hog:HogScheduler", "-j", "1", "--memory-limit", "100",
         "--no-progress", "--json", str(out)],
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    summary = json.loads(out.read_text())
    assert [r["status"] for r in summary["results"]] == [IDENTICAL, ERROR, IDENTICAL]
    hog = summary["results"][1]
    assert hog["failed_impl"] == "tests.impls.hog:HogScheduler"
    assert hog["message"].splitlines()[-1] == (
        "MemoryError: tests.impls.hog:HogScheduler exceeded the --memory-limit of 100 MB"
    )


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("RaiseScheduler", "ValueError: deliberate failure at plan 2"),
        ("WrongKeysScheduler", "plan 2: malformed plan record: keys"),
        ("NotADictScheduler", "plan 2: malformed plan record: keys list"),
        ("BadRoundScheduler", "plan 2: malformed round"),
        ("UnencodableScheduler", "plan 2: malformed plan record: credit_after is object"),
        ("ExitScheduler", "called sys.exit(3)"),
    ],
)
def test_a_malformed_or_raising_implementation_is_an_error_finding(name: str, needle: str) -> None:
    options = RunOptions(impls=against(f"tests.impls.malformed:{name}"), jobs=1)
    summary = run_scenarios(scenarios([BAD_SEED - 1, BAD_SEED, BAD_SEED + 1]), options)
    only_finding(summary, BAD_SEED, ERROR)
    (bad,) = [r for r in summary.results if r.status == ERROR]
    assert (bad.failed_impl, bad.plan) == (f"tests.impls.malformed:{name}", BAD_AT)
    assert needle in bad.message


def test_a_diverged_scenario_keeps_its_traces_in_a_worker_too(tmp_path: Path) -> None:
    options = RunOptions(
        impls=against("tests.impls.skewed:SkewedScheduler"),
        jobs=1,
        timeout_s=30,
        artifacts=str(tmp_path),
    )
    summary = run_scenarios(scenarios([12]), options)
    (result,) = summary.results
    assert result.status == DIVERGED
    tag = scenario_tag(scenarios([12])[0])
    assert sorted(Path(path).name for path in result.artifacts) == [
        f"quick-12-{tag}-reference.trace",
        f"quick-12-{tag}-tests.impls.skewed_SkewedScheduler.trace",
    ]


def test_two_findings_of_one_profile_and_seed_keep_traces_of_their_own(tmp_path: Path) -> None:
    """Two scenarios labelled quick:12 (two shrunk repros of one seed in a corpus, two
    scenario files): each finding's traces are named for its content, none overwritten."""
    whole = scenarios([12])[0]
    fewer = dataclasses.replace(whole, requests=whole.requests[:1])
    options = RunOptions(
        impls=against("tests.impls.skewed:SkewedScheduler"), jobs=1, artifacts=str(tmp_path)
    )
    summary = run_scenarios([whole, fewer], options)
    assert [r.status for r in summary.results] == [DIVERGED, DIVERGED]
    kept = [Path(path) for r in summary.results for path in r.artifacts]
    assert len({p.name for p in kept}) == 4 and all(p.is_file() for p in kept)
    assert scenario_tag(whole) != scenario_tag(fewer)


def test_artifacts_that_cannot_be_written_are_noted_not_raised(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    (scenario,) = scenarios([12])
    result = run_scenario(
        scenario, against("tests.impls.skewed:SkewedScheduler"), artifacts=str(blocked)
    )
    assert result.status == DIVERGED
    assert result.artifacts == ()
    assert f"could not keep the traces in {blocked}" in result.message


# -- interrupts and --resume ---------------------------------------------------------------------


def journal_lines(directory: Path) -> list[dict[str, Any]]:
    path = directory / JOURNAL_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]


def run_cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tracediff.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize(("signum", "jobs"), [(signal.SIGINT, "1"), (signal.SIGTERM, "2")])
def test_a_signal_keeps_finished_results_and_resume_finishes_the_run(
    tmp_path: Path, subprocess_env: dict[str, str], signum: int, jobs: str
) -> None:
    resume = tmp_path / "resume"
    args = ["run", "--seeds", "0..3", "--impl", "reference", "--impl",
            "tests.impls.hang:SlowScheduler", "-j", jobs, "--no-progress",
            "--resume", str(resume)]  # fmt: skip
    process = run_cli(args, subprocess_env)
    give_up = time.monotonic() + 20
    while len(journal_lines(resume)) < 2 and time.monotonic() < give_up:  # header + one
        time.sleep(0.02)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=20)
    assert process.returncode == 128 + signum, stderr
    assert "interrupted:" in stdout  # the partial summary
    name = signal.Signals(signum).name
    assert f"stopped by {name}; rerun with --resume {resume} to finish" in stderr
    assert "Traceback" not in stderr
    finished = {line["key"]["seed"] for line in journal_lines(resume)[1:]}
    assert 1 <= len(finished) < 4
    if signum == signal.SIGTERM:
        return  # resuming is the same whichever signal stopped the run: once is enough

    out = tmp_path / "summary.json"
    done = run_cli([*args, "--json", str(out)], subprocess_env)
    _, stderr = done.communicate(timeout=30)
    assert done.returncode == 0, stderr
    summary = json.loads(out.read_text())
    assert summary["resumed"] == len(finished)
    assert [r["seed"] for r in summary["results"]] == [0, 1, 2, 3]
    assert {r["seed"] for r in summary["results"] if r["resumed"]} == finished
    assert summary["identical"] == 4
    assert f"{len(finished)} finished scenarios on record" in stderr


def test_in_process_sigterm_stops_the_run_with_what_finished() -> None:
    before = signal.getsignal(signal.SIGTERM)
    seen = []

    def on_result(result: object) -> None:
        seen.append(result)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    options = RunOptions(impls=against("reference"), jobs=1)
    summary = run_scenarios(scenarios(range(5)), options, on_result)
    assert summary.interrupted and summary.interrupt_signal == signal.SIGTERM
    assert (summary.scenarios, summary.skipped) == (2, 3)
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers are given back


def test_torn_last_journal_line_is_ignored_with_a_note(tmp_path: Path) -> None:
    options = RunOptions(impls=against("reference"), jobs=1, resume=str(tmp_path))
    first = run_scenarios(scenarios([0, 1, 2]), options)
    assert first.resumed == 0
    journal = tmp_path / JOURNAL_FILE
    lines = journal.read_bytes().splitlines(keepends=True)
    assert len(lines) == 4
    journal.write_bytes(b"".join(lines[:3]) + lines[3][: len(lines[3]) // 2])  # a crash

    again = run_scenarios(scenarios([0, 1, 2]), options)
    assert again.resumed == 2
    assert [r.resumed for r in again.results] == [True, True, False]
    assert any("ignored a torn last line" in note for note in again.notes)
    assert len(journal.read_bytes().splitlines()) == 4  # cut back, then appended whole
    assert [r.impls[0].digest for r in again.results] == [r.impls[0].digest for r in first.results]


def test_a_damaged_journal_line_before_the_last_is_refused(tmp_path: Path) -> None:
    options = RunOptions(impls=against("reference"), jobs=1, resume=str(tmp_path))
    run_scenarios(scenarios([0, 1]), options)
    journal = tmp_path / JOURNAL_FILE
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text(lines[0] + "{garbage\n" + lines[2])
    with pytest.raises(JournalError, match="line 2 is damaged"):
        run_scenarios(scenarios([0, 1]), options)


def test_resume_with_other_implementations_is_refused_with_exit_2(tmp_path: Path) -> None:
    run_scenarios(
        scenarios([0]), RunOptions(impls=against("reference"), jobs=1, resume=str(tmp_path))
    )
    result = CliRunner().invoke(
        main,
        ["run", "--seeds", "0", "--impl", "reference", "--impl",
         "tests.impls.skewed:SkewedScheduler", "--resume", str(tmp_path), "--no-progress"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "the journal is of a run of reference vs reference over quick" in result.stderr
    assert "use another --resume directory" in result.stderr


def test_a_journal_entry_of_an_edited_scenario_is_not_reused(tmp_path: Path) -> None:
    options = RunOptions(impls=against("reference"), jobs=1, resume=str(tmp_path))
    run_scenarios(scenarios([0]), options)
    journal = tmp_path / JOURNAL_FILE
    journal.write_text(journal.read_text().replace('"digest":"', '"digest":"0', 1))
    again = run_scenarios(scenarios([0]), options)
    assert again.resumed == 0
    assert any("no longer match their scenarios" in note for note in again.notes)


def test_a_journal_in_use_by_another_run_is_refused(tmp_path: Path) -> None:
    from tracediff.running.journal import Journal, identity_for

    identity = identity_for(["reference", "reference"], ["t", "t"], scenarios([0]))
    with Journal.open(tmp_path, identity), pytest.raises(JournalError, match="in use"):
        Journal.open(tmp_path, identity)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc and pdeathsig")
def test_workers_hung_in_c_code_die_with_a_killed_tracediff(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    # Output to /dev/null: an orphaned worker holding a pipe must not hang this test. TMPDIR:
    # a killed tracediff cannot remove its workers' scratch directory.
    process = subprocess.Popen(
        [sys.executable, "-m", "tracediff.cli", "run", "--seeds", "0..3", "--impl",
         "reference", "--impl", "tests.impls.hang:SpinScheduler", "-j", "2", "--no-progress"],
        env={**subprocess_env, "TMPDIR": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        give_up = time.monotonic() + 20
        family: set[int] = set()
        while len(family) < 4 and time.monotonic() < give_up:  # tracker, server, 2 workers
            time.sleep(0.05)
            family = descendants(process.pid)
        time.sleep(0.3)  # let seed 1 reach its hang
        family |= descendants(process.pid)
    finally:
        process.kill()
        process.wait(timeout=10)
    give_up = time.monotonic() + 10
    while any(alive(pid) for pid in family) and time.monotonic() < give_up:
        time.sleep(0.05)
    survivors = [pid for pid in family if alive(pid)]
    for pid in survivors:  # this test started them: do not leave them spinning
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert len(family) >= 4
    assert not survivors, "workers outlived tracediff"


def test_the_comparison_imports_deepdiff_without_numpy() -> None:
    """deepdiff imports numpy when installed (1.2 GB of address space, and under a worker's
    --memory-limit an import that never returns): the comparison loads it without, and numpy
    still imports afterwards for whatever needs it."""
    code = (
        "import sys, importlib.util\n"
        "import tracediff.compare.fields\n"
        "assert 'numpy' not in sys.modules, 'deepdiff pulled numpy in'\n"
        "if importlib.util.find_spec('numpy') is not None:\n"
        "    import numpy\n"
        "    assert numpy.zeros(2).sum() == 0\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
