"""Reliability round 4, the remaining classes: workload golden manifests named apart (and
every hint about them a command that runs), a trace header's names never a path, and a
served process's stray reply blamed on it, not on the next scenario."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MOONCAKE = ROOT / "workloads" / "mooncake_conversation.jsonl"
WAIT_S = 240  # a safety net: each command here takes seconds


def tracediff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
    for name in ("TRACEDIFF_MODEL", "CI", "GITHUB_ACTIONS"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip


def hinted(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a command tracediff printed, as a user pastes it."""
    words = shlex.split(command)
    assert words[0] == "tracediff", command
    return tracediff(*words[1:], cwd=cwd)


# -- 1. workload golden manifests --------------------------------------------------------------
@pytest.fixture
def two_traffics(tmp_path: Path) -> Path:
    """A project with two workloads of one file name and other content, and a two-seed
    profile (quick's draws) so that each golden command takes seconds."""
    lines = MOONCAKE.read_text().splitlines(keepends=True)
    for folder, part in (("a", lines[:40]), ("b", lines[200:240])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "traffic.jsonl").write_text("".join(part))
    quick = (ROOT / "scenarios" / "quick.toml").read_text()
    tiny = re.sub(r"(?m)^seeds = .*$", 'seeds = "0..1"', quick).replace(
        'name = "quick"', 'name = "tiny"'
    )
    (tmp_path / "tiny.toml").write_text(tiny)
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\ngolden = "golden"\n')
    (tmp_path / "golden").mkdir()
    return tmp_path


def _gate_hint(project: Path, traffic: str) -> str:
    gate = tracediff("gate", "--profile", "tiny.toml", "--workload", traffic, "--no-progress",
                     cwd=project)  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr
    found = re.search(r"golden: not configured: .*?; run (tracediff golden update .*?), review",
                      gate.stdout + gate.stderr)  # fmt: skip
    assert found, gate.stdout
    return found.group(1)


def test_two_workloads_of_one_file_name_keep_apart_golden_manifests(two_traffics: Path) -> None:
    for traffic in ("a/traffic.jsonl", "b/traffic.jsonl"):
        # the gate's hint is a command that runs (it named the manifest, not a profile)
        update = hinted(_gate_hint(two_traffics, traffic), two_traffics)
        assert update.returncode == 0, update.stdout + update.stderr
        accept = tracediff("golden", "accept", cwd=two_traffics)
        assert accept.returncode == 0, accept.stdout + accept.stderr
    manifests = sorted(p.name for p in (two_traffics / "golden").glob("*.json"))
    assert len(manifests) == 2 and all(re.fullmatch(r"tiny\+traffic-[0-9a-f]{8}\.json", m)
                                       for m in manifests), manifests  # fmt: skip
    for traffic in ("a/traffic.jsonl", "b/traffic.jsonl"):
        check = tracediff("golden", "check", "--profile", "tiny.toml", "--workload", traffic,
                          "-j", "1", "--no-progress", cwd=two_traffics)  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
        assert "matches all 2 digests" in check.stdout
        gate = tracediff("gate", "--profile", "tiny.toml", "--workload", traffic,
                         "--no-progress", cwd=two_traffics)  # fmt: skip
        assert gate.returncode == 0 and "golden: passed" in gate.stderr, gate.stderr


def test_a_manifest_named_the_old_way_is_named_in_one_line(two_traffics: Path) -> None:
    hint = _gate_hint(two_traffics, "a/traffic.jsonl")
    (two_traffics / "golden" / "tiny+traffic.json").write_text("{}")  # before the tag
    check = tracediff("golden", "check", "--profile", "tiny.toml", "--workload",
                      "a/traffic.jsonl", "--no-progress", cwd=two_traffics)  # fmt: skip
    assert check.returncode == 2, check.stdout + check.stderr
    (line,) = check.stderr.splitlines()
    assert hint in line and "then delete tiny+traffic.json" in line, line
    # the hint in that line runs too
    assert hinted(hint, two_traffics).returncode == 0


def test_review_of_a_workload_manifest_names_no_command_that_is_refused(
    two_traffics: Path,
) -> None:
    review = tracediff("golden", "review", "--profile", "tiny+traffic-0123abcd", cwd=two_traffics)
    assert review.returncode == 2
    (line,) = review.stderr.splitlines()
    assert "--profile tiny+traffic" not in line and "--workload FILE" in line, line
    plain = tracediff("golden", "review", "--profile", "quick", cwd=two_traffics)
    (line,) = plain.stderr.splitlines()
    command = re.search(r"run (tracediff golden update --profile quick)$", line)
    assert command, line


# -- 2. a trace header's names never name a file -----------------------------------------------
HOSTILE = "../../escaped"


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def hostile_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real trace whose header's profile and provenance's implementation are
    ``../../escaped``: frames and content check out, only the names are hostile."""
    from tracediff.trace import TraceReader, encode, trace_bytes

    folder = tmp_path_factory.mktemp("hostile")
    plain = folder / "plain.trace"
    done = tracediff("record", "--seed", "3", "-o", str(plain), cwd=folder)
    assert done.returncode == 0, done.stderr
    reader = TraceReader(plain)
    header = dict(reader.header)
    header["scenario"] = {**header["scenario"], "profile": HOSTILE}
    payloads = [payload for _index, _offset, payload in reader.records()]
    provenance = {**(reader.provenance or {}), "implementation": HOSTILE}
    path = folder / "hostile.trace"
    path.write_bytes(trace_bytes(encode(header), payloads, provenance))
    plain.unlink()
    return path


# Every command that reads a trace, with every output it can write (named by the user).
READERS = {
    "show": (["show", "{t}"], 0, []),
    "show --jsonl": (["show", "{t}", "--jsonl"], 0, []),
    "show --plan": (["show", "{t}", "--plan", "2"], 0, []),
    "diff": (["diff", "{t}", "{t}", "--format", "html", "-o", "d.html"], 0, ["d.html"]),
    "diff --all": (["diff", "{t}", "{t}", "--all", "--format", "json", "-o", "all.json"], 0,
                   ["all.json"]),
    "replay": (["replay", "{t}", "--json", "r.json"], 0, ["r.json"]),
    "replay a diverging implementation": (
        ["replay", "{t}", "--impl", "tests.impls.skewed:SkewedScheduler", "--state", "--json",
         "s.json"], 1, ["s.json"]),
    "replay two states": (["replay", "{t}", "--impl", "reference", "--impl", "optimized",
                           "--until", "2", "--state", "--json", "p.json"], 0, ["p.json"]),
    "upgrade": (["upgrade", "{t}", "-o", "up.trace"], 0, []),  # current: left as it is
}  # fmt: skip


@pytest.mark.parametrize("case", READERS)
def test_a_trace_header_naming_a_path_writes_nothing_outside(
    hostile_trace: Path, tmp_path: Path, case: str
) -> None:
    """docs/trace-format.md, "Names in a header": accepted, and never a file's name."""
    args, code, outputs = READERS[case]
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    trace = work / "t.trace"
    trace.write_bytes(hostile_trace.read_bytes())
    done = tracediff(*[a.format(t=trace) for a in args], cwd=work)
    assert done.returncode == code, (done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    made = {p.relative_to(work).as_posix() for p in _files(tmp_path)} - {"t.trace"}
    assert made == set(outputs), made


# -- 3. a served process's reply too many, read by the next scenario's reset --------------------
def _misbehave(mode: str) -> str:
    return f"bad=exec:{sys.executable} {ROOT / 'tests' / 'impls' / 'misbehave.py'} {mode}"


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("mode", ["late", "late-ok"])
def test_a_reply_too_many_read_by_the_next_reset_names_both_scenarios(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: str, mode: str
) -> None:
    """The server holds a reply too many after scenario quick:0's last plan and sends it
    first when the next scenario's reset arrives (``late``: the plan's reply again; ``late-ok``:
    an ``ok``, so two answer the reset). It was blamed on the next scenario alone ("answered
    the 'reset' request with a 'plan' message"), explained as a nondeterministic
    implementation, or (``late-ok``) met by the next scenario's first request."""
    monkeypatch.setenv("MISBEHAVE_SEED", "0")
    report = tmp_path / "run.json"
    done = tracediff("run", "--seeds", "0..7", "-j", jobs, "--impl", "reference", "--impl",
                     _misbehave(mode), "--no-progress", "--no-regressions", "--json",
                     str(report), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text())
    (failed,) = [r for r in data["results"] if r["status"] != "identical"]
    seed = failed["seed"]
    assert failed["status"] == "error" and failed["failed_impl"] == "bad" and seed != 0
    message = failed["message"]
    assert message.startswith(f"bad answered the 'reset' of scenario quick:{seed} with a ") or (
        message.startswith(
            f"bad sent a 'ok' message with its 'ok' to the 'reset' of scenario quick:{seed}"
        )  # fmt: skip
    ), message
    cause = "most likely to the last request of scenario quick:0, which this process served before"
    assert cause in message and f"not anything of scenario quick:{seed}'s" in message
    if jobs == "1":
        assert seed == 1  # the scenario right after, on the same process
    assert "not deterministic" not in done.stdout
    assert "not re-run: the served process's reply too many" in done.stdout.replace("\n", " ")
