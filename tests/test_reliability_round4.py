"""Reliability round 4: bad input that was tracediff's own bug (exit 3), loops without end
and full disks, each now exit 2 with one line naming the file or setting and what to do.

Each test asserts the exit code and the one line; nothing here is timed (waits are bounded
safety nets, the oracle is the exit code and the message).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tracediff.cli import main

AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
AZURE_ROW = "2023-11-16 18:17:03.9799600,4808,10\n"
OWN_ROW = '{"arrival_us": 0, "input_tokens": 1, "output_tokens": 1}\n'
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _specdec(monkeypatch: pytest.MonkeyPatch) -> None:
    # --model sets $TRACEDIFF_MODEL for worker processes: restored after each test
    monkeypatch.setenv("TRACEDIFF_MODEL", "specdec")
    monkeypatch.delenv("TRACEDIFF_EXEC_REPLY_S", raising=False)


def one_error(result: Result) -> str:
    """The one line a refusal prints (and that it is one, with no traceback)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), result.output
    assert "internal error" not in lines[0] and "Traceback" not in result.output
    return lines[0]


# -- item 7: bad input that was exit 3 ---------------------------------------------------------
WORKLOADS = {
    "a CSV field over 128 KiB": (
        "big.csv", AZURE_HEADER + "2023-11-16 18:17:03.9799600,4808," + "1" * 140_000 + "\n",
        ":2: damaged azure request: not a CSV line (field larger than field limit",
    ),
    "a first line over 128 KiB": (
        "deep.jsonl", DEEP_ARRAY + "\n", ":1: not a request trace: the first line is not a CSV",
    ),
    "CR-only line ends": (
        "cr.csv", (AZURE_HEADER + AZURE_ROW * 2).replace("\n", "\r"),
        ":1: a carriage return inside a line: lines must end in LF or CRLF",
    ),
    "a first JSON line nested 100,000 deep": (
        "deep.jsonl", DEEP_OBJECT + "\n", ":1: not a request: it nests values deeper",
    ),
    "a later JSON line nested 100,000 deep": (
        "deep.jsonl", OWN_ROW + DEEP_OBJECT + "\n",
        ":2: damaged tracediff request: it nests values deeper",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", WORKLOADS)
def test_a_workload_tracediff_cannot_read_is_exit_2_naming_file_and_line(
    tmp_path: Path, case: str
) -> None:
    name, text, words = WORKLOADS[case]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    result = CliRunner().invoke(main, ["run", "--workload", str(path), "--seeds", "0"])
    assert result.exit_code == 2, result.output
    assert f"{path}{words}" in one_error(result)


def _configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    (tmp_path / "pyproject.toml").write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACEDIFF_NO_CONFIG", raising=False)


@pytest.mark.parametrize("key", ["profiles", "regressions", "golden", "artifacts"])
def test_a_configured_path_that_is_a_symlink_loop_is_exit_2_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    (tmp_path / "loop").symlink_to("loop")
    _configured(tmp_path, monkeypatch, f'[tool.tracediff]\n{key} = "loop/x"\n')
    for args in (["run", "--seeds", "0"], ["golden", "check", "--seeds", "0"]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 2, result.output
        line = one_error(result)
        assert f"pyproject.toml [tool.tracediff] {key} = 'loop/x': cannot be resolved" in line
        assert "fix the path" in line


@pytest.mark.parametrize("key", ["profiles", "regressions", "golden", "artifacts"])
def test_a_configured_path_holding_nul_is_exit_2_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    _configured(tmp_path, monkeypatch, f'[tool.tracediff]\n{key} = "a\\u0000b"\n')
    result = CliRunner().invoke(main, ["run", "--seeds", "0"])
    assert result.exit_code == 2, result.output
    assert f"[tool.tracediff] {key}: 'a\\x00b' holds a NUL character" in one_error(result)


@pytest.mark.parametrize("command", [["run", "--seeds", "0"], ["init"]])
def test_a_deeply_nested_pyproject_is_exit_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    _configured(tmp_path, monkeypatch, f"x = {DEEP_ARRAY}\n")
    result = CliRunner().invoke(main, command)
    assert result.exit_code == 2, result.output
    line = one_error(result)
    assert "pyproject.toml: not readable TOML: it nests values deeper" in line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-3", "1e7", "soon"])
def test_an_exec_reply_time_that_is_no_number_of_seconds_is_exit_2(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from tracediff.process import pipes as external

    monkeypatch.setenv("TRACEDIFF_EXEC_REPLY_S", value)
    assert external._reply_timeout() == external.REPLY_TIMEOUT_S  # what a worker would use
    result = CliRunner().invoke(main, ["run", "--seeds", "0", "--impl", "exec:true"])
    assert result.exit_code == 2, result.output
    line = one_error(result)
    assert f"$TRACEDIFF_EXEC_REPLY_S={value!r}: expected the seconds" in line
    assert "fix or unset it" in line


def test_an_exec_reply_time_in_bounds_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracediff.process import pipes as external
    from tracediff.project.impls import parse_impl

    monkeypatch.setenv("TRACEDIFF_EXEC_REPLY_S", "2.5")
    assert parse_impl("fast=exec:true").target == "exec:true"
    assert external._reply_timeout() == 2.5


# -- item 9: a trace's provenance is bounded wherever it is read or printed --------------------
WAIT_S = 240  # a safety net: each command here takes seconds


def tracediff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="120")
    env.pop("TRACEDIFF_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("provenance") / "small.trace"
    done = tracediff("record", "--seed", "0", "-o", str(path), cwd=path.parent)
    assert done.returncode == 0, done.stderr
    return path


def _with_provenance(small: Path, path: Path, **extra: Any) -> Path:
    from tracediff.trace import TraceReader, trace_bytes

    reader = TraceReader(small)
    payloads = [payload for _index, _offset, payload in reader.records()]
    provenance = {**(reader.provenance or {}), **extra}
    path.write_bytes(trace_bytes(reader.header_payload, payloads, provenance))
    return path


HUGE = {
    "a 50 MB host": {"host": "h" * 50_000_000},
    "a list of 50 MB": {"host": ["h" * 1000] * 50_000},
    "a 50 MB key": {"k" * 50_000_000: "x"},
    "200,000 keys": {f"key{i}": "v" for i in range(200_000)},
}


@pytest.mark.parametrize("case", HUGE)
def test_show_of_a_trace_with_huge_provenance_is_bounded(
    small_trace: Path, tmp_path: Path, case: str
) -> None:
    path = _with_provenance(small_trace, tmp_path / "huge.trace", **HUGE[case])
    done = tracediff("show", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[:2000]
    assert len(done.stdout) < 20_000, len(done.stdout)
    assert "provenance: implementation" in done.stdout
    assert "more characters cut" in done.stdout or "199,957 more keys not shown" in done.stdout


def test_a_huge_model_or_implementation_name_in_provenance_is_bounded(
    small_trace: Path, tmp_path: Path
) -> None:
    model = _with_provenance(small_trace, tmp_path / "model.trace", model="m" * 50_000_000)
    shown = tracediff("show", str(model), cwd=tmp_path)
    assert shown.returncode == 2, shown.stderr[:2000]
    line = one_line(shown.stderr)
    assert len(line) < 2_000 and "provenance: unknown model 'mmm" in line
    assert "more characters cut" in line and "choose one of: kvbatch, specdec" in line
    impl = _with_provenance(small_trace, tmp_path / "impl.trace", implementation="i" * 50_000_000)
    diff = tracediff("diff", str(impl), str(small_trace), cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr[:2000]
    assert len(diff.stdout) < 20_000, len(diff.stdout)


def one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), stderr[:2000]
    return lines[0]


# -- item 6: loops without end -----------------------------------------------------------------
SAFETY = 1_000_000  # proposals a looping pass makes before the test gives up on the stop


def _looping_pass(shrink: Any) -> None:
    """A model's shrink pass that proposes the current best, already tried, without end
    (a bounded count: the test's safety net, far past any stop)."""
    for _ in range(SAFETY):
        shrink.consider(shrink.best)
    pytest.fail("the shrinker never stopped a pass that proposes only candidates already tried")


@pytest.fixture
def looping_kvbatch(monkeypatch: pytest.MonkeyPatch) -> Any:
    from tracediff.models.kvbatch.model import MODEL
    from tracediff.models.kvbatch.search import PASSES

    monkeypatch.setattr(MODEL, "shrink_passes", lambda: (*PASSES, ("loops", _looping_pass)))
    return MODEL


BROKEN_KV = "tests.impls.kvbatch_broken:HitRepeatLeavesFreeTwice"


def test_a_pass_proposing_only_tried_candidates_is_stopped_by_count(looping_kvbatch: Any) -> None:
    from tracediff.project.impls import parse_impl
    from tracediff.search.shrink import REPEATS, Shrinker, ShrinkOptions

    scenario = looping_kvbatch.generate(looping_kvbatch.load_profile("quick"), 9)
    specs = [parse_impl("reference"), parse_impl(BROKEN_KV)]
    options = ShrinkOptions(max_evaluations=200, max_seconds=None)  # no clock at all
    shrinker = Shrinker(scenario, specs, options=options)
    result = shrinker.shrink()
    assert result.stopped == REPEATS and result.failing
    assert result.after[0] < result.before[0]  # the other passes' work is kept
    assert "fix the model's shrink_passes" in result.stop_reason()


def test_a_pass_proposing_only_tried_candidates_stops_at_max_seconds(
    looping_kvbatch: Any,
) -> None:
    from tracediff.project.impls import parse_impl
    from tracediff.search.shrink import TIME_CAP, Shrinker, ShrinkOptions

    ticks = iter(range(10**9))  # a clock that moves a second per reading

    scenario = looping_kvbatch.generate(looping_kvbatch.load_profile("quick"), 9)
    specs = [parse_impl("reference"), parse_impl(BROKEN_KV)]
    options = ShrinkOptions(max_seconds=500.0)
    result = Shrinker(scenario, specs, options=options, clock=lambda: float(next(ticks))).shrink()
    assert result.stopped == TIME_CAP and result.failing


def test_shrink_with_a_looping_pass_ends_with_its_finding(
    looping_kvbatch: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEDIFF_MODEL", "kvbatch")
    args = ["shrink", "--profile", "quick", "--seed", "9", "--impl", "reference",
            "--impl", BROKEN_KV, "--budget", "100"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert "the model's shrink passes proposed 5,000 candidates" in result.output
    assert "shrunk scenario: 2 requests" in result.output


FIFO_COMMANDS = {
    "run": ["run", "--seeds", "0"],
    "record": ["record", "--seed", "0", "-o", "out.trace"],
    "campaign": ["campaign", "--seeds", "0", "--out", "c", "--no-progress"],
}


@pytest.mark.parametrize("command", FIFO_COMMANDS)
def test_a_workload_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path, command: str) -> None:
    fifo = tmp_path / "traffic.csv"
    os.mkfifo(fifo)
    done = tracediff(*FIFO_COMMANDS[command], "--workload", str(fifo), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert f"{fifo}: is a named pipe (FIFO), not a workload file; save the requests" in line


def test_a_workload_that_is_a_device_is_refused() -> None:
    from tracediff.errors import WorkloadError
    from tracediff.workload import open_workload

    with pytest.raises(WorkloadError, match=r"^/dev/zero: is a character device, not a work"):
        open_workload("/dev/zero")


OUTPUTS = {
    "run --json": ["run", "--seeds", "0", "--json"],
    "record -o": ["record", "--seed", "0", "-o"],
}


@pytest.mark.parametrize("output", OUTPUTS)
def test_an_output_fifo_that_no_process_reads_is_refused_not_waited_on(
    tmp_path: Path, output: str
) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    done = tracediff(*OUTPUTS[output], str(fifo), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert f"{fifo}: is a named pipe (FIFO) that no process reads; start its reader" in line


# -- item 5: a full disk is exit 2 naming the file ---------------------------------------------
@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A tmpfs of ``size`` KiB mounted in the test's directory (skipped where mounting is not
    allowed), with all but ``free`` KiB of it taken."""
    mounted: list[Path] = []

    def make(size: int = 64, free: int = 0) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}k", "tmpfs", str(where)],
            capture_output=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode()[:200]}")
        mounted.append(where)
        if size - free > 0:
            with (where / "filler").open("wb") as filler:
                with contextlib.suppress(OSError):
                    filler.write(b"\0" * ((size - free) * 1024))
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


def test_golden_update_on_a_full_disk_is_exit_2_naming_the_file(small_disk: Any) -> None:
    disk = small_disk(size=16, free=0)
    golden = disk / "g"
    golden.mkdir()
    done = tracediff("golden", "update", "--golden-dir", str(golden), cwd=disk)
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_line(done.stderr)
    assert f"{golden}/traces/quick-" in line and ".trace.new: cannot be written: No space" in line
    assert "nothing was made pending" in line
    assert not list(golden.rglob("*.new"))  # no half of an update left pending


def test_a_campaign_store_filling_the_disk_is_exit_2_and_keeps_its_results(
    small_disk: Any,
) -> None:
    disk = small_disk(size=160, free=160)
    out = disk / "c"
    args = ("campaign", "--seeds", "0..1000000", "-j", "1", "--no-progress", "--out", str(out))
    done = tracediff(*args, cwd=disk)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr
    line = one_line(done.stderr)
    assert f"{out}/campaign.sqlite: cannot be written: no space left" in line
    assert "the results committed so far are kept" in line
    kept = disk.parent / "kept"
    shutil.copytree(out, kept)  # its report is written beside it: not on the full disk
    report = tracediff("campaign", "report", str(kept), cwd=disk.parent)
    assert report.returncode == 0, report.stderr
    assert "identical:" in report.stdout and "identical: 0 " not in report.stdout


@pytest.mark.parametrize("command", ["record", "shrink --save"])
def test_record_and_shrink_save_on_a_full_disk_name_the_file(small_disk: Any, command: str) -> None:
    disk = small_disk(size=16, free=0)
    if command == "record":
        target = disk / "x.trace"
        args: tuple[str, ...] = ("record", "--seed", "9", "-o", str(target))
    else:
        target = disk / "quick-9-bookkeeping-plan-free.json"
        args = ("--model", "kvbatch", "shrink", "--profile", "quick", "--seed", "9", "--impl",
                "reference", "--impl", BROKEN_KV, "--save", "--regressions", str(disk))  # fmt: skip
    done = tracediff(*args, cwd=disk)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr
    assert f"{target}: cannot be written: No space left on device" in one_line(done.stderr)
    assert not target.exists() and not list(disk.glob(".*.tmp"))


def test_a_file_size_limit_names_the_file(tmp_path: Path) -> None:
    """``ulimit -f``: a write past it fails with EFBIG (Python ignores SIGXFSZ)."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("TRACEDIFF_MODEL", None)
    for args, target in (
        (["run", "--seeds", "0..20", "--json", "s.json"], "s.json"),
        (["record", "--seed", "9", "-o", "x.trace"], "x.trace"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "tracediff", *args], cwd=tmp_path, env=env,
            preexec_fn=limited, capture_output=True, text=True, timeout=WAIT_S, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr
        assert f"{target}: cannot be written: File too large" in one_line(done.stderr)
        assert not (tmp_path / target).exists()


# -- low items -------------------------------------------------------------------------------
def test_a_profile_path_holding_at_is_a_path_not_a_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "v@2"
    directory.mkdir()
    (directory / "p.toml").write_text('name = "p"\nseeds = 2\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "--profile", "v@2/p.toml", "--no-regressions"])
    assert result.exit_code == 0, result.output
    assert "identical: 2 scenarios" in result.output


def test_a_profile_name_holding_at_slash_is_refused_not_read_as_a_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = CliRunner().invoke(main, ["run", "--profile", "quick@/etc/passwd"])
    assert result.exit_code == 2, result.output
    line = one_error(result)
    assert "'quick@/etc/passwd': a profile name or path may not hold '@/'" in line
    assert "root:" not in result.output
    _configured(tmp_path, monkeypatch, '[tool.tracediff]\nprofile = "quick@/etc/passwd"\n')
    result = CliRunner().invoke(main, ["run", "--seeds", "0"])
    assert result.exit_code == 2, result.output
    line = one_error(result)
    assert "[tool.tracediff] profile: 'quick@/etc/passwd' may not hold '@/'" in line
    assert "root:" not in result.output


@pytest.mark.parametrize("kind", ["a file", "a missing directory"])
def test_tracediff_profiles_that_is_no_directory_is_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    where = tmp_path / "profiles"
    if kind == "a file":
        where.write_text("", encoding="utf-8")
    monkeypatch.setenv("TRACEDIFF_PROFILES", str(where))
    result = CliRunner().invoke(main, ["run", "--seeds", "0"])
    assert result.exit_code == 2, result.output
    what = "is not a directory" if kind == "a file" else "does not exist"
    assert f"$TRACEDIFF_PROFILES={str(where)!r} {what}" in one_error(result)


@pytest.mark.parametrize("head", ["\ufeff", "\n", "\n \r\n\ufeff"], ids=["bom", "blank", "both"])
def test_a_json_lines_workload_with_a_bom_or_leading_blank_lines_is_read(
    tmp_path: Path, head: str
) -> None:
    from tracediff.errors import WorkloadError
    from tracediff.workload import open_workload

    rows = "".join(
        f'{{"arrival_us": {i * 5}, "input_tokens": 10, "output_tokens": 3}}\n' for i in range(3)
    )
    plain = tmp_path / "plain.jsonl"
    plain.write_text(rows, encoding="utf-8")
    path = tmp_path / "head.jsonl"
    path.write_text(head + rows, encoding="utf-8", newline="")
    if head == "\n \r\n\ufeff":  # a BOM is only one at the very start of the file
        with pytest.raises(WorkloadError, match=r"head.jsonl:3: "):
            open_workload(path)
        return
    workload, expected = open_workload(path), open_workload(plain)
    assert workload.format == "tracediff" and workload.count == 3
    same = [dataclasses.replace(r, line=0) for r in workload.read(0, 3)]
    assert same == [dataclasses.replace(r, line=0) for r in expected.read(0, 3)]
    result = CliRunner().invoke(main, ["run", "--workload", str(path), "--seeds", "0"])
    assert result.exit_code == 0, result.output


def test_a_model_entry_point_named_with_dot_dot_keeps_its_data_inside(tmp_path: Path) -> None:
    """A guest model's golden files and corpus are in a subdirectory named after its entry
    point; an entry point named ``../evil`` must not name one outside."""
    site = tmp_path / "site"
    info = site / "evil-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[tracediff.models]\n../evil = tracediff.models.kvbatch.model:MODEL\n"
    )
    project = tmp_path / "p"
    (project / "golden").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "specdec"\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    env.pop("TRACEDIFF_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-m", "tracediff", "--model", "../evil", "golden", "update"],
        cwd=project, env=env, capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.new")}
    assert written and all(p.startswith("p/golden/_evil/") for p in written), written
