"""The executor every command runs scenarios on: the local pool and Dask give the same
results; a worker that dies costs a re-run, never a result; golden, coverage and selfcheck
go through it; Dask is an optional extra with a clear error when missing.

The Dask tests share one LocalCluster of two worker processes on loopback (starting one
takes seconds). They compare against the local pool on a subset of the quick profile
(seeds 0..11, 363 plans), not all 108 scenarios: on two shared cores the whole profile
takes minutes under Dask and the pool each; `tracediff run --profile quick --executor
dask-local:2` is the full check (docs/campaigns.md has its figures).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.impls import dies_once
from tracediff.campaign.clauses import coverage
from tracediff.campaign.run import CampaignOptions, run_campaign
from tracediff.cli import main
from tracediff.errors import UsageError
from tracediff.executor import DIED, DONE, KILLED, Executor, open_executor, parse_executor
from tracediff.executor.local import LocalPool
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import parse_impl
from tracediff.running.runner import IDENTICAL, RunOptions, run_scenarios
from tracediff.running.selfcheck import DETERMINISTIC, self_check

SUBSET = range(12)
DIES = "tests.impls.dies_once:DiesOnceScheduler"
SPECS = (parse_impl("reference"), parse_impl("optimized"))


def quick(seeds: Any) -> list[Any]:
    profile = load_profile("quick")
    return [generate(profile, seed) for seed in seeds]


def digests(summary: Any) -> dict[int, tuple[str, tuple[str, ...]]]:
    return {r.seed: (r.status, tuple(s.digest for s in r.impls)) for r in summary.results}


@pytest.fixture(autouse=True)
def _fresh_markers() -> Iterator[None]:
    dies_once.reset()
    yield
    dies_once.reset()


@pytest.fixture(scope="module")
def dask_cluster() -> Iterator[Executor]:
    pytest.importorskip("distributed")
    executor = open_executor("dask-local:2")
    try:
        yield executor
    finally:
        executor.close()


# -- the interface -----------------------------------------------------------------------------
def _double(payload: int, _progress: Any, _notify: Any) -> int:
    return payload * 2


def _die_on_three(payload: int, _progress: Any, _notify: Any) -> int:
    if payload == 3:
        os._exit(9)
    return payload


def test_map_keeps_input_order_and_a_task_that_kills_two_workers_is_died() -> None:
    with LocalPool(2) as pool:
        assert [o.value for o in pool.map(_double, [5, 1, 4], order=[2, 0, 1])] == [10, 2, 8]
        outcomes = pool.map(_die_on_three, [1, 3, 2])
    assert [o.kind for o in outcomes] == [DONE, DIED, DONE]
    assert outcomes[1].attempts == 2 and "status 9" in outcomes[1].death()


def _where(_payload: Any, _progress: Any, _notify: Any) -> tuple[str, str | None]:
    return os.getcwd(), os.environ.get("TRACEDIFF_TEST_WHERE")


def test_a_worker_works_where_and_with_the_environment_its_pool_was_opened_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fork server forks every worker from what it had when it started (once per
    # process): a program that changes directory or $TRACEDIFF_MODEL between runs must
    # not get workers of the old one (a worker looked `reference` up in another model)
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        monkeypatch.chdir(tmp_path / name)
        monkeypatch.setenv("TRACEDIFF_TEST_WHERE", name)
        with LocalPool(2) as pool:
            seen = {o.value for o in pool.map(_where, [0, 1, 2, 3])}
        assert seen == {(str(tmp_path / name), name)}
    monkeypatch.delenv("TRACEDIFF_TEST_WHERE")
    with LocalPool(1) as pool:
        assert pool.map(_where, [0])[0].value == (str(tmp_path / "second"), None)


STOPPED_WHILE_STARTING = """
import multiprocessing as mp, os, signal, sys
from tracediff.executor import local

# the pool's stop arrives while the worker is still setting up (right after its handler)
local._die_with_parent = lambda: os.kill(os.getpid(), signal.SIGTERM)
context = mp.get_context("fork")
parent, child = context.Pipe()
process = context.Process(
    target=local._worker_main, args=(child, context.RawArray("q", 4), sys.argv[1], None)
)
process.start()
process.join(30)
print(process.exitcode)
"""


def test_a_worker_stopped_while_it_starts_ends_without_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STOPPED_WHILE_STARTING, str(tmp_path / "stack")],
        capture_output=True, text=True, timeout=60, check=False,
        cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "0", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "WorkerStop" not in done.stderr


def _sleep_on_zero(payload: int, _progress: Any, _notify: Any) -> int:
    if payload == 0:
        import time

        time.sleep(20)
    return payload


def test_a_task_sent_ahead_of_one_that_kills_its_worker_runs_once_and_is_done() -> None:
    # one worker and more tasks than workers: each next task waits in the worker's pipe
    # while the current one runs; the one behind the task that kills the worker never
    # started, so it is neither lost nor counted as an attempt
    payloads = [1, 3, 2, 4, 5, 6, 7]
    with LocalPool(1) as pool:
        outcomes = pool.map(_die_on_three, payloads)
    assert [o.kind for o in outcomes] == [DONE, DIED, DONE, DONE, DONE, DONE, DONE]
    assert [o.value for o in outcomes if o.kind == DONE] == [1, 2, 4, 5, 6, 7]
    assert outcomes[1].attempts == 2
    assert all(o.attempts == 1 for o in outcomes if o.kind == DONE)


def test_tasks_sent_ahead_keep_their_own_deadlines() -> None:
    # 0 waits ahead behind 1 and hangs once it runs: its deadline counts from its start
    # (it is killed, not left running); 2, sent ahead behind it, runs on a fresh worker
    with LocalPool(1) as pool:
        pool.map(_double, [1])  # the worker started (and its fork server) before any clock
        outcomes = pool.map(_sleep_on_zero, [1, 0, 2, 3, 4], deadline_s=2.0)
    assert [o.kind for o in outcomes] == [DONE, KILLED, DONE, DONE, DONE]
    assert [o.value for o in outcomes if o.kind == DONE] == [1, 2, 3, 4]
    assert 2.0 <= outcomes[1].seconds < 20
    assert all(o.seconds < 2.0 and o.attempts == 1 for o in outcomes if o.kind == DONE)


def test_workers_of_the_console_script_load_no_command_line(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    script = Path(sys.executable).with_name("tracediff")
    if not script.is_file():
        pytest.skip("no console script beside this interpreter (not an installed venv)")
    impl = "tests.impls.no_cli:NoCommandLineScheduler"
    args = ["run", "--seeds", "0..3", "-j", "2", "--impl", "reference", "--impl", impl]
    done = subprocess.run(
        [str(script), *args], cwd=tmp_path, env=subprocess_env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: 4 scenarios" in done.stdout, done.stdout


@pytest.mark.parametrize(
    "text", ["dask://nohost", "dask-local:0", "kubernetes", "dask-local:x", "dask://h:p"]
)
def test_a_malformed_executor_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--executor"):
        parse_executor(text)


def test_without_dask_the_flag_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed fails
    for args in (["run", "--seeds", "0"], ["campaign", "--seeds", "0", "--out", "x"]):
        result = CliRunner().invoke(main, [*args, "--executor", "dask-local:2"])
        assert result.exit_code == 2, result.output
        assert "tracediff-harness[dask]" in result.output and len(result.output.splitlines()) == 1


# -- a worker that dies costs a re-run ---------------------------------------------------------
def test_a_killed_worker_loses_no_result_in_run(tmp_path: Path) -> None:
    options = RunOptions(impls=(SPECS[0], parse_impl(DIES)), jobs=2, executor="local")
    summary = run_scenarios(quick(range(4)), options)
    assert {r.seed: r.status for r in summary.results} == dict.fromkeys(range(4), IDENTICAL)


def test_golden_check_survives_a_killed_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_hostile_impls import TINY

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "tiny.toml").write_text(TINY)
    (tmp_path / "golden").mkdir()  # the project's own profiles and golden digests
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracediff]\nprofiles = "scenarios"\ngolden = "golden"\n'
    )
    for args in (["golden", "update", "--profile", "tiny", "-j", "2"], ["golden", "accept"]):
        done = CliRunner().invoke(main, args)
        assert done.exit_code == 0, done.output
    check = ["golden", "check", "--profile", "tiny", "-j", "2", "--impl", DIES]
    result = CliRunner().invoke(main, check)
    assert result.exit_code == 0, result.output
    assert "matches all 4 digests" in result.output
    assert (dies_once.marker_dir() / "tiny").exists()  # the worker really was killed once


def test_coverage_survives_a_killed_worker() -> None:
    profile = load_profile("quick")
    seeds = (1, 2, 3)
    with LocalPool(2) as pool:
        killed = coverage(profile, seeds, impl=DIES, executor=pool)
    assert (dies_once.marker_dir() / "quick").exists()
    assert not killed.failures and killed.seeds == seeds
    assert killed.features == coverage(profile, seeds).features


def test_selfcheck_survives_a_killed_worker() -> None:
    with LocalPool(2) as pool:
        summary = self_check(quick((1, 2)), (parse_impl(DIES),), executor=pool)
    assert (dies_once.marker_dir() / "quick").exists()
    assert [r.status for r in summary.results] == [DETERMINISTIC, DETERMINISTIC]


# -- Dask ----------------------------------------------------------------------------------------
def test_dask_gives_the_local_pools_verdict_and_digests(dask_cluster: Executor) -> None:
    scenarios = quick(SUBSET)
    options = RunOptions(impls=SPECS, jobs=2, executor="local")
    local = run_scenarios(scenarios, options)
    on_dask = run_scenarios(scenarios, options, executor=dask_cluster)
    assert local.ok and on_dask.ok
    assert digests(on_dask) == digests(local)
    assert len(on_dask.results) == len(SUBSET)


def test_dask_isolates_a_worker_killing_implementation(dask_cluster: Executor) -> None:
    options = RunOptions(impls=(SPECS[0], parse_impl(DIES)), executor="local")
    summary = run_scenarios(quick(range(4)), options, executor=dask_cluster)
    assert [r.status for r in summary.results] == [IDENTICAL] * 4
    hard = RunOptions(impls=(SPECS[0], parse_impl("tests.impls.hostile:HardExitScheduler")))
    (result,) = run_scenarios(quick([3]), hard, executor=dask_cluster).results
    assert result.status == "error" and "worker died twice" in result.message


def test_a_campaign_survives_a_dask_worker_killed_mid_way(
    dask_cluster: Executor, tmp_path: Path
) -> None:
    pids = list(dask_cluster.worker_pids().values())  # type: ignore[attr-defined]
    slow = parse_impl("tests.impls.hang:SlowScheduler")  # long enough to kill in flight
    options = CampaignOptions(
        profile=load_profile("quick"),
        seeds=tuple(SUBSET),
        impls=(SPECS[0], slow),
        out=str(tmp_path / "campaign"),
    )
    killed: list[int] = []

    def kill_one(totals: Any, _row: Any) -> None:
        if not killed and totals.scenarios >= 2:
            killed.append(pids[0])
            os.kill(pids[0], signal.SIGKILL)

    result = run_campaign(options, dask_cluster, kill_one)
    assert killed and result.remaining == 0 and result.stopped is None
    assert result.totals.statuses == {IDENTICAL: len(SUBSET)}
    local = run_scenarios(quick(SUBSET), RunOptions(impls=(SPECS[0], slow), jobs=2))
    from tracediff.campaign.store import CampaignStore

    with CampaignStore.open(options.out) as store:
        stored = {row.seed: tuple(i[3] for i in row.impls) for row in store.rows()}
    assert stored == {seed: pair for seed, (_s, pair) in digests(local).items()}


def test_campaign_cli_on_dask_resumes_and_reports(dask_cluster: Executor, tmp_path: Path) -> None:
    out = tmp_path / "c"
    skewed = "tests.impls.skewed:SkewedScheduler"
    args = ["campaign", "--seeds", "0..5", "--impl", "reference", "--impl", skewed]
    first = CliRunner().invoke(main, [*args, "--out", str(out), "--max-failures", "2"])
    assert first.exit_code == 1, first.output
    assert "stopped (--max-failures 2)" in first.output
    again = CliRunner().invoke(main, [*args, "--out", str(out), "--executor", "dask-local:1"])
    assert again.exit_code == 1, again.output
    written = tmp_path / "r.json"
    report = CliRunner().invoke(main, ["campaign", "report", str(out), "--json", str(written)])
    assert report.exit_code == 1 and "FINDINGS: 6 of 6 scenarios" in report.output
    assert len(json.loads(written.read_text())["outcomes"]) == 6


def test_a_coverage_campaign_adds_up_as_coverage_does_and_resumes(tmp_path: Path) -> None:
    from dataclasses import replace

    from tracediff.campaign.coverage import CoverageCampaignOptions, run_coverage_campaign

    profile = load_profile("quick")
    seeds = (1, 2, 3, 4)
    options = CoverageCampaignOptions(profile, seeds[:2], DIES, str(tmp_path / "cov"))
    with LocalPool(2) as pool:
        first = run_coverage_campaign(options, pool)
        second = run_coverage_campaign(replace(options, seeds=seeds), pool)
    assert (first.ran, second.ran, second.remaining) == (2, 2, 0)  # the killed seed counted once
    assert second.report.seeds == seeds and not second.report.failures
    assert second.report.features == coverage(profile, seeds).features


def test_run_on_a_running_scheduler_by_address(dask_cluster: Executor, tmp_path: Path) -> None:
    address = dask_cluster._cluster.scheduler_address  # type: ignore[attr-defined]
    host_port = address.removeprefix("tcp://")
    summary = tmp_path / "s.json"
    args = ["run", "--seeds", "0..3", "--executor", f"dask://{host_port}", "--json", str(summary)]
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert json.loads(summary.read_text())["identical"] == 4
