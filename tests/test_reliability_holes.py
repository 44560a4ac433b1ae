"""The holes an independent prober found in tracediff's reliability (issue "Reliability
holes"), one test (or parametrized family) per class of case: hostile implementations
(tests/impls/holes.py), hostile files and servers built in the test, a real Dask scheduler.

Each asserts the exit code, the one line, and for run/campaign the --json or store content.
Nothing here is timed: waits are bounded and generous.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.impls.holes import HOSTILE_SEED, RAISERS
from tracediff.cli import main

HOLES = "tests.impls.holes"
OTHER_SEED = HOSTILE_SEED + 1
SEEDS = f"{HOSTILE_SEED},{OTHER_SEED}"
WAIT_S = 240  # a generous bound on any one command here


def tracediff(env: dict[str, str], *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """The real command line in its own process: its own stdout, its own fork server."""
    done = subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=WAIT_S,
    )
    return done.returncode, done.stdout, done.stderr


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tracediff: error:")]


# -- 1: tracediff's own plumbing breaking is never success ------------------------------------
JOBS = {"-j 1 --timeout": ("-j", "1", "--timeout", "60"), "-j 2": ("-j", "2")}


@pytest.mark.parametrize("jobs", JOBS)
def test_an_implementation_that_kills_the_fork_server_is_its_scenarios_finding(
    tmp_path: Path, subprocess_env: dict[str, str], jobs: str
) -> None:
    summary = tmp_path / "summary.json"
    code, out, err = tracediff(
        subprocess_env,
        "run", "--seeds", SEEDS, "--impl", "reference", "--impl", f"{HOLES}:KillParentScheduler",
        "--no-progress", "--json", str(summary), *JOBS[jobs],
    )  # fmt: skip
    assert code == 1, (out, err)
    results = {r["seed"]: r for r in json.loads(summary.read_text())["results"]}
    assert results[OTHER_SEED]["status"] == "identical"  # the run went on, on new workers
    bad = results[HOSTILE_SEED]
    assert bad["status"] == "error" and "the fork server, was killed" in bad["message"]


def test_gate_reports_the_fork_server_killed_as_a_finding(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    report = tmp_path / "gate.json"
    code, out, err = tracediff(
        subprocess_env,
        "gate", "--seeds", SEEDS, "--impl", "reference", "--impl", f"{HOLES}:KillParentScheduler",
        "-j", "2", "--json", str(report), "--artifacts", str(tmp_path / "artifacts"),
        cwd=tmp_path,
    )  # fmt: skip
    assert code == 1, (out, err)
    outcomes = {o["seed"]: o["status"] for o in json.loads(report.read_text())["outcomes"]}
    assert outcomes == {HOSTILE_SEED: "error", OTHER_SEED: "identical"}


def test_a_local_campaign_survives_the_fork_server_killed(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    out = tmp_path / "campaign"
    code, stdout, err = tracediff(
        subprocess_env,
        "campaign", "--seeds", f"{HOSTILE_SEED}..{HOSTILE_SEED + 3}", "--impl", "reference",
        "--impl", f"{HOLES}:KillParentScheduler", "-j", "2", "--out", str(out), "--no-progress",
    )  # fmt: skip
    assert code == 1, (stdout, err)
    with sqlite3.connect(out / "campaign.sqlite") as db:
        rows = dict(db.execute("SELECT seed, status FROM results").fetchall())
    assert rows == {HOSTILE_SEED: "error"} | dict.fromkeys(
        range(OTHER_SEED, HOSTILE_SEED + 4), "identical"
    )


PLUMBING = ("BrokenPipeScheduler", "EOFScheduler", "ConnectionScheduler")


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("impl", PLUMBING)
def test_a_broken_pipe_or_connection_from_the_implementation_is_a_finding_not_exit_0(
    tmp_path: Path, subprocess_env: dict[str, str], impl: str, jobs: str
) -> None:
    summary = tmp_path / "summary.json"
    code, out, err = tracediff(
        subprocess_env,
        "run", "--seeds", SEEDS, "--impl", "reference", "--impl", f"{HOLES}:{impl}", "-j", jobs,
        "--no-progress", "--json", str(summary),
    )  # fmt: skip
    assert code == 1, (out, err)
    results = {r["seed"]: r for r in json.loads(summary.read_text())["results"]}
    assert results[HOSTILE_SEED]["status"] == "error"
    assert "raised by the implementation" in results[HOSTILE_SEED]["message"]
    assert results[OTHER_SEED]["status"] == "identical"


def test_a_closed_stdout_is_still_a_quiet_exit(subprocess_env: dict[str, str]) -> None:
    # the one broken pipe that means "stop writing": tracediff's own stdout
    command = [sys.executable, "-m", "tracediff", "run", "--seeds", "1..40", "--no-progress"]
    with subprocess.Popen(
        command, env=subprocess_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader goes away at once
        err = proc.stderr.read()
        code = proc.wait(WAIT_S)
    assert code == 0 and b"error" not in err, err


# -- 2: one place calls implementation code in this process ----------------------------------
@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "quick-3.trace"
    result = CliRunner().invoke(main, ["record", "--seed", "3", "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


def one_failure_line(output: str, impl: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith("tracediff: error: the implementation ") and impl in lines[0]
    return lines[0]


@pytest.mark.parametrize("where", ["Raise", "Plan"])
@pytest.mark.parametrize("name", RAISERS)
def test_record_blames_the_implementation_whatever_it_raises(
    tmp_path: Path, name: str, where: str
) -> None:
    impl = f"{HOLES}:{where}{name}"
    output = tmp_path / "out.trace"
    result = CliRunner().invoke(main, ["record", "--seed", "3", "--impl", impl, "-o", str(output)])
    assert result.exit_code == 1, result.output
    line = one_failure_line(result.output, impl)
    assert ("its constructor" if where == "Raise" else "plan()") in line
    assert "nothing written" in line and not output.exists()


@pytest.mark.parametrize("name", RAISERS)
def test_replay_reports_an_implementation_error_whatever_it_raises(
    recorded: Path, name: str
) -> None:
    impl = f"{HOLES}:Plan{name}"
    result = CliRunner().invoke(main, ["replay", str(recorded), "--impl", impl])
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"ERROR: {impl} raised at record"), result.output


@pytest.mark.parametrize("name", RAISERS)
def test_replay_and_bench_blame_a_constructor_whatever_it_raises(recorded: Path, name: str) -> None:
    impl = f"{HOLES}:Raise{name}"
    for args in (
        ["replay", str(recorded), "--impl", impl],
        ["bench", "--impl", "reference", "--impl", impl, "--requests", "8,16", "--repeats", "2"],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 1, (args, result.output)
        assert "its constructor raised" in one_failure_line(result.output, impl)


def test_bench_blames_a_plan_that_exits(tmp_path: Path) -> None:
    impl = f"{HOLES}:PlanSystemExit0"
    args = ["bench", "--impl", "reference", "--impl", impl, "--requests", "8,16", "--repeats", "2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "plan() raised SystemExit" in one_failure_line(result.output, impl)


# -- 3: writes never replace what is not a regular file --------------------------------------
def run_json(target: Path | str) -> Any:
    return CliRunner().invoke(main, ["run", "--seeds", "1", "--no-progress", "--json", str(target)])


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_a_full_device_is_written_through_and_named(tmp_path: Path) -> None:
    result = run_json("/dev/full")
    assert result.exit_code == 2
    assert error_lines(result.output) == [
        "tracediff: error: /dev/full: cannot be written: No space left on device"
    ]
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # still the device
    written = CliRunner().invoke(main, ["record", "--seed", "1", "-o", "/dev/null"])
    assert written.exit_code == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("command", ["record", "diff", "gate --junit", "gate --markdown"])
def test_every_output_flag_writes_through_a_device(
    tmp_path: Path, recorded: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.chdir(tmp_path)
    args = {
        "record": ["record", "--seed", "1", "-o", "/dev/full"],
        "diff": ["diff", str(recorded), str(recorded), "-o", "/dev/full"],
        "gate --junit": ["gate", "--seeds", "1", "-j", "1", "--junit", "/dev/full"],
        "gate --markdown": ["gate", "--seeds", "1", "-j", "1", "--markdown", "/dev/full"],
    }[command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert error_lines(result.output) == [
        "tracediff: error: /dev/full: cannot be written: No space left on device"
    ]
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_fifo_is_written_through(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    result = run_json(fifo)
    reader.join(WAIT_S)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert json.loads(got[0])["ok"] is True


def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "kept" / "summary.json"
    target.parent.mkdir()
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = run_json(link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and json.loads(target.read_text())["ok"] is True
    assert sorted(p.name for p in target.parent.iterdir()) == ["summary.json"]


def test_a_socket_is_refused_before_any_work(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        result = run_json(path)
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"tracediff: error: --json {path}: is a socket, which tracediff does not write to; "
        "give a file name (or a character device, a FIFO, /dev/stdout)"
    )
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


def test_dev_stdout_is_this_process_s_stdout(subprocess_env: dict[str, str]) -> None:
    code, out, err = tracediff(
        subprocess_env, "run", "--seeds", "1", "--no-progress", "--json", "/dev/stdout"
    )
    assert code == 0, err
    assert '"format": "tracediff-run"' in out or '"ok": true' in out


# -- 4: losing the Dask scheduler is an interruption, not findings ---------------------------
def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class Cluster:
    """A real ``dask scheduler`` and ``dask worker`` on 127.0.0.1."""

    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.directory = directory
        self.env = env
        self.procs: list[subprocess.Popen[bytes]] = []
        self.address = ""

    def start(self) -> Cluster:
        dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
        info = self.directory / f"scheduler-{time.monotonic_ns()}.json"
        self.scheduler = self._spawn(
            [
                *dask,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(info),
            ]
        )
        give_up = time.monotonic() + WAIT_S
        while not (info.exists() and info.stat().st_size) and time.monotonic() < give_up:
            time.sleep(0.1)
        self.address = json.loads(info.read_text())["address"].removeprefix("tcp://")
        worker = [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            "--scheduler-file",
            str(info),
        ]
        self._spawn([*worker, "--nthreads", "2", "--no-dashboard", "--no-nanny"])
        return self

    def _spawn(self, argv: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(WAIT_S)


@pytest.fixture
def clusters(tmp_path: Path, subprocess_env: dict[str, str]) -> Iterator[list[Cluster]]:
    pytest.importorskip("distributed", reason="Dask distributed (the dask extra) is not installed")
    made: list[Cluster] = []
    yield made
    for cluster in made:
        cluster.stop()


def stored(out: Path) -> dict[int, str]:
    try:
        with sqlite3.connect(out / "campaign.sqlite") as db:
            return dict(db.execute("SELECT seed, status FROM results").fetchall())
    except sqlite3.Error:
        return {}


def test_losing_the_dask_scheduler_stores_nothing_of_the_seeds_in_flight_and_resume_runs_them(
    tmp_path: Path, subprocess_env: dict[str, str], clusters: list[Cluster]
) -> None:
    first = Cluster(tmp_path, subprocess_env).start()
    clusters.append(first)
    out = tmp_path / "campaign"
    seeds = "1..40"
    args = ["campaign", "--seeds", seeds, "--impl", "reference", "--impl", f"{HOLES}:SlowScheduler"]
    command = [sys.executable, "-m", "tracediff", *args, "--out", str(out), "--no-progress"]
    with subprocess.Popen(
        [*command, "--executor", f"dask://{first.address}"],
        env=subprocess_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    ) as proc:  # fmt: skip
        give_up = time.monotonic() + WAIT_S
        while not stored(out) and proc.poll() is None and time.monotonic() < give_up:
            time.sleep(0.05)
        first.scheduler.kill()  # mid-campaign: seeds are in flight
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    kept = stored(out)
    if proc.returncode == 0:  # pragma: no cover - the machine finished all 40 first
        pytest.skip("the campaign finished before the scheduler was killed")
    assert proc.returncode == 3, (stdout, stderr)
    assert (
        error_lines(stderr)
        == [line for line in error_lines(stderr) if "lost the Dask scheduler mid-run" in line]
        and len(error_lines(stderr)) == 1
    ), stderr
    assert "Traceback" not in stderr
    assert set(kept.values()) <= {"identical"} and len(kept) < 40  # no seed blamed
    second = Cluster(tmp_path, subprocess_env).start()
    clusters.append(second)
    code, resumed_out, err = tracediff(
        subprocess_env, *command[3:], "--executor", f"dask://{second.address}"
    )
    assert code == 0, (resumed_out, err)
    assert stored(out) == dict.fromkeys(range(1, 41), "identical")


# -- 7: --debug, malformed executors, a port where nothing listens --------------------------
def test_debug_shows_the_traceback(subprocess_env: dict[str, str]) -> None:
    code, _out, err = tracediff(
        subprocess_env, "--debug", "run", "--seeds", "1", "--impl", "no.such:Thing"
    )
    assert code != 0 and "Traceback (most recent call last)" in err


@pytest.mark.parametrize("text", ["dask://[::1", "dask://[::1]:99999", "dask://h:0", "dask://:80"])
def test_a_malformed_executor_is_exit_2(text: str) -> None:
    result = CliRunner().invoke(main, ["run", "--seeds", "1", "--executor", text])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"tracediff: error: --executor {text}: give the scheduler as")
    assert len(result.output.splitlines()) == 1


def test_a_port_where_nothing_listens_is_one_line(subprocess_env: dict[str, str]) -> None:
    pytest.importorskip("distributed", reason="Dask distributed (the dask extra) is not installed")
    port = _free_port()
    code, _out, err = tracediff(
        subprocess_env, "run", "--seeds", "1", "--executor", f"dask://127.0.0.1:{port}"
    )
    assert code == 2
    assert error_lines(err) == [
        f"tracediff: error: --executor dask://127.0.0.1:{port}: cannot reach a Dask scheduler at "
        f"tcp://127.0.0.1:{port} (Connection refused); start one (dask scheduler) or check the "
        "address"
    ]


def test_an_exec_hello_whose_capabilities_is_not_a_list_is_exit_2() -> None:
    result = CliRunner().invoke(
        main, ["run", "--seeds", "1", "--impl", "reference", "--impl", f"odd={SERVER} caps"]
    )
    assert result.exit_code == 2, result.output
    assert error_lines(result.output) == [
        "tracediff: error: odd sent a hello whose 'capabilities' is 'state', expected a list "
        "of names (docs/protocol.md)"
    ]


# -- 5: bounded costs of hostile text and sizes -----------------------------------------------
SERVER = f"exec:{sys.executable} {Path(__file__).parent / 'impls' / 'holes_server.py'}"
SERVER_BAD_SEED = 1


def run_exec(tmp_path: Path, mode: str, *extra: str) -> tuple[int, dict[int, Any], str]:
    summary = tmp_path / "summary.json"
    args = ["run", "--seeds", "0..2", "--explain", "0", "--no-progress", "--json", str(summary)]
    impls = ["--impl", "reference", "--impl", f"bad={SERVER} {mode}"]
    result = CliRunner().invoke(main, [*args, *impls, *extra])
    data = json.loads(summary.read_text())
    return result.exit_code, {r["seed"]: r for r in data["results"]}, result.output


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_20_mb_error_reply_is_kept_bounded(tmp_path: Path, jobs: str) -> None:
    code, results, output = run_exec(tmp_path, "hugeerror", "-j", jobs)
    assert code == 1, output
    bad = results.pop(SERVER_BAD_SEED)
    assert bad["status"] == "error" and "reported an error on the 'plan' request" in bad["message"]
    assert "more characters cut" in bad["message"] and len(bad["message"]) < 40_000
    assert len(output) < 100_000
    assert {r["status"] for r in results.values()} == {"identical"}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_exec_server_that_exits_leaving_a_child_on_its_stdout_is_reported_as_exited(
    tmp_path: Path, jobs: str
) -> None:
    code, results, output = run_exec(tmp_path, "forkexit", "-j", jobs)
    assert code == 1, output
    bad = results[SERVER_BAD_SEED]
    assert bad["status"] == "error"
    assert "bad exited with status 4 before answering the 'plan' request" in bad["message"]


def test_a_huge_exception_message_is_one_short_line() -> None:
    impl = f"{HOLES}:HugeMessageScheduler"
    result = CliRunner().invoke(
        main, ["record", "--seed", str(HOSTILE_SEED), "--impl", impl, "-o", "/dev/null"]
    )
    assert result.exit_code == 1
    line = one_failure_line(result.output, impl)
    assert len(line) < 1_000 and "more characters cut" in line


def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: Any) -> Path:
    directory = tmp_path / "corpus"
    directory.mkdir()
    path = directory / "bad.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    monkeypatch.setenv("TRACEDIFF_REGRESSIONS", str(directory))
    return path


def quick_scenario(seed: int = 1) -> dict[str, Any]:
    from tracediff.models.specdec.scenario.generator import generate
    from tracediff.models.specdec.scenario.profiles import load_profile

    return generate(load_profile("quick"), seed).to_dict()


SCENARIO_BOUNDS = {
    "100,000 requests": (
        lambda s: s | {"requests": [dict(s["requests"][0], id=i) for i in range(100_000)]},
        "requests holds 100,000, more than the 64 a scenario may have",
    ),
    "max_new 10**9": (
        lambda s: s | {"requests": [dict(s["requests"][0], max_new=10**9)]},
        "max_new and prompt_len must be at most 1,000,000",
    ),
    "nested 100,000 deep": (
        lambda s: '{"a":' * 100_000 + "1" + "}" * 100_000,
        "not a scenario file: it nests values deeper than any tracediff file does",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", SCENARIO_BOUNDS)
def test_a_scenario_file_past_the_model_s_bounds_is_exit_2_before_any_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    build, needle = SCENARIO_BOUNDS[case]
    path = corpus(tmp_path, monkeypatch, build(quick_scenario()))
    result = CliRunner().invoke(main, ["run", "--seeds", "1", "--no-progress"])
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert line.startswith(f"tracediff: error: {path}: ") and needle in line, line


def test_a_trace_header_of_200_000_requests_is_refused_at_once(tmp_path: Path) -> None:
    from tracediff.trace import TraceReader, TraceWriter

    real = tmp_path / "real.trace"
    assert CliRunner().invoke(main, ["record", "--seed", "1", "-o", str(real)]).exit_code == 0
    header = dict(TraceReader(str(real)).header)
    scenario = dict(header["scenario"])
    scenario["requests"] = [dict(scenario["requests"][0], id=i) for i in range(200_000)]
    forged = tmp_path / "forged.trace"
    with TraceWriter(str(forged), header | {"scenario": scenario}):
        pass
    for args in (["show", str(forged)], ["replay", str(forged)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        (line,) = error_lines(result.output)
        assert str(forged) in line and "more than the 64 a scenario may have" in line


# -- 6: nesting and damaged stores ----------------------------------------------------------
DEEP_JSON = '{"a":' * 100_000 + "1" + "}" * 100_000


def test_deep_json_and_toml_are_exit_2_naming_the_file(tmp_path: Path) -> None:
    report = tmp_path / "deep.json"
    report.write_text(DEEP_JSON)
    profile = tmp_path / "deep.toml"
    profile.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    for args, path in (
        (["diff", "--load", str(report)], report),
        (["run", "--profile", str(profile)], profile),
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        (line,) = error_lines(result.output)
        assert str(path) in line and "nests values deeper than any tracediff file does" in line


@pytest.fixture(scope="module")
def campaign_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("campaign") / "c"
    args = ["campaign", "--seeds", "0..2", "--impl", "reference", "--impl", "reference"]
    result = CliRunner().invoke(main, [*args, "-j", "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    return out


def damage(campaign_dir: Path, tmp_path: Path, sql: str | None, raw: bytes | None = None) -> Path:
    out = tmp_path / "c"
    shutil.copytree(campaign_dir, out)
    store = out / "campaign.sqlite"
    if raw is not None:
        data = bytearray(store.read_bytes())
        data[4096:] = raw * ((len(data) - 4096) // len(raw) + 1)
        store.write_bytes(bytes(data[: len(store.read_bytes())]))
    if sql is not None:
        with sqlite3.connect(store) as db:
            db.execute(sql)
    return out


STORES = {
    "garbage pages": (None, b"\xde\xad\xbe\xef"),
    "bad JSON in a row": ("UPDATE results SET impls = '[[' WHERE seed = 1", None),
    "text in a number column": ("UPDATE results SET seconds = 'fast' WHERE seed = 1", None),
    "an unknown status": ("UPDATE results SET status = 'fine' WHERE seed = 1", None),
    "no results table": ("DROP TABLE results", None),
}


@pytest.mark.parametrize("case", STORES)
def test_a_damaged_campaign_store_is_exit_2_naming_it(
    campaign_dir: Path, tmp_path: Path, case: str
) -> None:
    out = damage(campaign_dir, tmp_path, *STORES[case])
    for args in (
        ["campaign", "report", str(out)],
        [
            "campaign",
            "--seeds",
            "0..3",
            "--impl",
            "reference",
            "--impl",
            "reference",
            "-j",
            "1",
            "--out",
            str(out),
            "--no-progress",
        ],
    ):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, (case, args, result.output)
        (line,) = error_lines(result.output)
        assert f"{out / 'campaign.sqlite'}" in line, line


def test_a_symlinked_store_is_refused_and_its_target_untouched(
    campaign_dir: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.sqlite"
    shutil.copy(campaign_dir / "campaign.sqlite", elsewhere)
    before = elsewhere.read_bytes()
    out = tmp_path / "c"
    out.mkdir()
    (out / "campaign.sqlite").symlink_to(elsewhere)
    args = ["campaign", "--seeds", "0..5", "--impl", "reference", "--impl", "reference", "-j", "1"]
    result = CliRunner().invoke(main, [*args, "--out", str(out), "--no-progress"])
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert "is a symbolic link or not a regular file" in line
    assert elsewhere.read_bytes() == before


# -- 8: the resume journal, and directories created only at the last component ---------------
def resume_run(directory: Path) -> Any:
    args = ["run", "--seeds", "1,2", "--impl", "reference", "--impl", "reference", "-j", "1"]
    return CliRunner().invoke(main, [*args, "--no-progress", "--resume", str(directory)])


def test_a_symlinked_journal_is_refused_and_nothing_written_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    resume = tmp_path / "r"
    resume.mkdir()
    (resume / "journal.jsonl").symlink_to(outside)
    result = resume_run(resume)
    assert result.exit_code == 2
    (line,) = error_lines(result.output)
    assert "journal.jsonl is a symbolic link" in line and outside.read_text() == ""


def _status(entry: Any) -> Any:
    return entry | {"result": entry["result"] | {"status": "fine"}}


def _seed(seed: Any) -> Any:
    return lambda entry: entry | {"key": entry["key"] | {"seed": seed}}


JOURNAL_DAMAGE = {
    "an unknown status": (_status, "status 'fine' is none of"),
    "a seed that is a string": (_seed("1"), "seed '1' is not an integer"),
    "a seed that is a float": (_seed(1.5), "seed '1.5' is not an integer"),
    "deep nesting": (lambda _entry: DEEP_JSON, "is damaged (not JSON)"),
}


@pytest.mark.parametrize("case", JOURNAL_DAMAGE)
def test_a_journal_entry_that_cannot_be_a_result_is_refused(tmp_path: Path, case: str) -> None:
    assert resume_run(tmp_path).exit_code == 0
    journal = tmp_path / "journal.jsonl"
    header, first, *rest = journal.read_text().splitlines()
    change, needle = JOURNAL_DAMAGE[case]
    changed = change(json.loads(first))
    line = changed if isinstance(changed, str) else json.dumps(changed)
    journal.write_text("\n".join([header, line, *rest]) + "\n")
    result = resume_run(tmp_path)
    assert result.exit_code == 2, result.output
    (error,) = error_lines(result.output)
    assert f"{journal} line 2" in error and needle in error, error


@pytest.mark.parametrize("flag", ["--resume", "--artifacts"])
def test_only_the_last_directory_of_an_output_path_is_created(tmp_path: Path, flag: str) -> None:
    target = tmp_path / "no" / "such" / "dir"
    args = ["run", "--seeds", "1", "--impl", "reference", "--impl", "reference", "-j", "1"]
    result = CliRunner().invoke(main, [*args, "--no-progress", flag, str(target)])
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert f"directory {target.parent} does not exist; create it first" in line
    assert not (tmp_path / "no").exists()


def test_campaign_out_creates_only_its_last_directory(tmp_path: Path) -> None:
    target = tmp_path / "no" / "such"
    args = ["campaign", "--seeds", "0..1", "--impl", "reference", "--impl", "reference"]
    result = CliRunner().invoke(main, [*args, "-j", "1", "--out", str(target), "--no-progress"])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "no").exists()


# -- 9: bounds of numeric options, forged worker messages -------------------------------------
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["bench", "--requests", "1"], "request counts must be at least 8"),
        (["bench", "--repeats", "1000000000"], "repeats must be at least 1 and at most 100,000"),
        (["fuzz", "--max-examples", "1000000000"], "--max-examples must be at most 1,000,000"),
    ],
)
def test_numeric_options_have_upper_bounds(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert needle in line


@pytest.mark.parametrize("jobs", JOBS)
def test_an_implementation_cannot_forge_the_worker_s_messages(tmp_path: Path, jobs: str) -> None:
    summary = tmp_path / "summary.json"
    args = ["run", "--seeds", SEEDS, "--impl", "reference", "--impl", f"{HOLES}:ForgeScheduler"]
    result = CliRunner().invoke(main, [*args, *JOBS[jobs], "--no-progress", "--json", str(summary)])
    assert result.exit_code == 1, result.output
    results = {r["seed"]: r for r in json.loads(summary.read_text())["results"]}
    bad = results[HOSTILE_SEED]
    assert bad["status"] == "error" and "wrote to tracediff's worker channel" in bad["message"]
    assert results[OTHER_SEED]["status"] == "identical"
    assert "forged by the implementation" not in result.output


# -- 9: data files checked as strictly as profiles ---------------------------------------------
def forged_trace(tmp_path: Path, change: Any) -> Path:
    """quick:1 recorded, its records passed through ``change(records)`` and written again."""
    from tracediff.trace import TraceReader, TraceWriter, encode

    real = tmp_path / "real.trace"
    assert CliRunner().invoke(main, ["record", "--seed", "1", "-o", str(real)]).exit_code == 0
    reader = TraceReader(str(real))
    records = change(list(reader.decoded_records()))
    forged = tmp_path / "forged.trace"
    with TraceWriter(str(forged), reader.header) as writer:
        for record in records:
            writer.write_record(encode(record))
    return forged


def _retire_unarrived(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    retire = next(i for i, r in enumerate(records) if r["t"] == "retire")
    return [*records[:retire], records[retire] | {"requests": [999]}]  # never arrived


def _retire_twice(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    retire = next(i for i, r in enumerate(records) if r["t"] == "retire")
    return [*records[: retire + 1], records[retire]]


def _round_prefix_200(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    at = next(i for i, r in enumerate(records) if r["t"] == "plan" and r["round"] and r["round"][6])
    row = list(records[at]["round"])
    row[6] = [[lane[0], lane[1], 200, *lane[3:]] for lane in row[6]]  # prefix: at most 7
    return [*records[:at], records[at] | {"round": row}, *records[at + 1 :]]


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (_retire_unarrived, "which has not arrived"),
        (_retire_twice, "which was retired before"),
        (_round_prefix_200, "a prefix of 200, outside 0..7"),
    ],
)
def test_an_impossible_trace_is_the_file_s_fault_in_replay(
    tmp_path: Path, change: Any, needle: str
) -> None:
    forged = forged_trace(tmp_path, change)
    result = CliRunner().invoke(main, ["replay", str(forged)])
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert str(forged) in line and needle in line and "re-record the trace" in line


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda s: s | {"seed": -1}, "seed -1 must be from 0 to 9007199254740991"),
        (lambda s: s | {"format": "x", "version": 1}, "is not 'tracediff-regression'"),
        (lambda s: s | {"format": "tracediff-regression", "version": 9}, "file version 9;"),
    ],
)  # fmt: skip
def test_a_scenario_file_s_seed_format_and_version_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: Any, needle: str
) -> None:
    path = corpus(tmp_path, monkeypatch, change(quick_scenario()))
    result = CliRunner().invoke(main, ["run", "--seeds", "1", "--no-progress"])
    assert result.exit_code == 2, result.output
    (line,) = error_lines(result.output)
    assert str(path) in line and needle in line, line


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("seed", "0", "seed '0' is not an integer"),
        ("seed", 0.5, "seed '0.5' is not an integer"),
        ("digest", "not hex", "digest 'not hex' is not 64 hex digits"),
        ("plans", -1, "plans '-1' is not an integer"),
    ],
)
def test_a_malformed_golden_manifest_is_exit_2_not_a_mismatch(
    tmp_path: Path, field: str, value: Any, needle: str
) -> None:
    from tracediff.golden import read_manifest

    source = Path(__file__).resolve().parents[1] / "golden" / "quick.json"
    data = json.loads(source.read_text())
    data["scenarios"][0][field] = value
    path = tmp_path / "quick.json"
    path.write_text(json.dumps(data))
    from tracediff.errors import TraceFormatError

    with pytest.raises(TraceFormatError, match="malformed golden manifest") as caught:
        read_manifest(path)
    assert needle in str(caught.value) and str(path) in str(caught.value)


def test_describing_a_huge_table_builds_no_more_text_than_it_shows() -> None:
    from tracediff.report.describe import TEXT_BUDGET, full_text, short

    rows = [[i, 0.5, True] for i in range(300_000)]
    assert len(full_text(rows)) == TEXT_BUDGET + 1 and full_text(rows).endswith("…")
    assert short(rows) == "[[0, 0.5, True], [1, 0.5, True], [2, 0.5, True]…"
    assert full_text([[1, 2], {"a": 0.1}]) == "[[1, 2], {a: 0.1}]"  # small values whole


def test_comparing_a_table_of_300_000_extra_rows_stops_at_max_diffs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tracediff.compare.fields import MAX_DIFFS, record_changes

    a = {"t": "x", "rows": [[0, 1]]}
    b = {"t": "x", "rows": [[0, 1]] + [[i, i] for i in range(300_000)]}
    changes = record_changes(a, b, {})
    assert 0 < len(changes) <= MAX_DIFFS
    assert "max number of diffs" not in caplog.text
