"""Bad command lines, command by command: exit 2 and exactly one line on stderr, at once.

Each row is a command line that cannot work and words its one line must hold. Rows name
files through placeholders filled in per test: ``{trace}`` a valid trace, ``{text}`` a file
that is not a trace, ``{empty}`` an empty file, ``{dir}`` a directory, ``{missing}`` a path
that does not exist, ``{json}`` JSON that is no scenario or report, ``{toml}`` a profile of
the wrong types, ``{foreign}`` a scenario file naming a non-built-in implementation. Every
row fails before any scenario runs, so the whole table takes seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import parse_impl
from tracediff.running.runner import write_trace

HUGE = "99999999999999999999999999"
PAIR = ["--impl", "reference", "--impl", "reference"]
TIMES = [("-1", "got -1.0"), ("0", "got 0.0"), ("nan", "got nan"), ("inf", "got inf")]

ROWS: list[tuple[str, list[str], str]] = [
    # run
    *[("run", ["run", "--timeout", v, *PAIR], w) for v, w in TIMES],
    ("live", ["live", "--device", "tpu"], "is not one of 'cpu', 'cuda'"),
    ("live", ["live", "--requests", "-1"], "--requests must be at least 1"),
    ("init", ["init", "--bogus"], "No such option '--bogus'"),
    ("impls", ["impls", "--bogus"], "No such option '--bogus'"),
    ("models", ["models", "--bogus"], "No such option '--bogus'"),
    ("run", ["run", "--timeout", "1e300"], "at most a week"),
    ("run", ["run", "--seeds", HUGE], "is too large"),
    ("run", ["run", "--seeds", "0..9999999,10000000..19999999"], "is too large"),
    ("run", ["run", "--seeds", "0..100000"], "tracediff campaign streams up to 10,000,000"),
    ("run", ["run", "--seeds", "1e5"], "bad seed set"),
    ("run", ["run", "--memory-limit", "99999999999999999999"], "at most 1073741824 MB"),
    ("run", ["run", "--memory-limit", "-1"], "positive number of megabytes"),
    ("run", ["run", "-j", "100000", *PAIR], "-j/--jobs must be at most 1024"),
    ("run", ["run", "--context", "-1"], "--context must be 0 or more"),
    ("run", ["run", "--explain", "-1"], "--explain must be 0 or more"),
    ("run", ["run", "--explain", HUGE], "--explain must be at most"),
    ("run", ["run", "--profile", ""], "the profile name is empty"),
    ("run", ["run", "--profile", "{toml}"], "requests[0] is str 'a'"),
    ("run", ["run", "--json", ""], "--json: the path is empty"),
    ("run", ["run", "--json", "{dir}"], "is a directory"),
    ("run", ["run", "--artifacts", ""], "--artifacts: the path is empty"),
    ("run", ["run", "--resume", "{trace}"], "is a file"),
    ("run", ["run", "--regressions", "{missing}", "--seeds", "0"], "does not exist"),
    # record
    ("record", ["record", "--seed", HUGE, "-o", "x.trace"], "is not in the range"),
    ("record", ["record", "--seed", "-1", "-o", "x.trace"], "is not in the range"),
    ("record", ["record", "--seed", "1", "-o", ""], "-o/--output: the path is empty"),
    ("record", ["record", "--seed", "1", "-o", "{dir}"], "is a directory"),
    ("record", ["record", "--seed", "1", "-o", "{missing}/x.trace"], "does not exist"),
    (
        "record",
        ["record", "--seed", "1", "--profile", "", "-o", "x.trace"],
        "profile name is empty",
    ),
    ("record", ["record", "--seed", "1", "--impl", "bogus", "-o", "x"], "unknown implementation"),
    # show
    ("show", ["show", "/dev/zero"], "not a tracediff trace (bad magic)"),
    ("show", ["show", "{text}"], "not a tracediff trace (bad magic)"),
    ("show", ["show", "{empty}"], "truncated: empty file"),
    ("show", ["show", "{dir}"], "is a directory"),
    ("show", ["show", "{missing}"], "the file does not exist"),
    ("show", ["show", "--plan", "99999", "{trace}"], "has no plan 99999"),
    ("show", ["show", "--jsonl", "/dev/zero"], "bad magic"),
    # diff
    ("diff", ["diff", "/dev/zero", "{trace}"], "/dev/zero at byte 0: not a tracediff trace"),
    ("diff", ["diff", "{trace}", "{missing}"], "the file does not exist"),
    ("diff", ["diff", "{trace}", "{dir}"], "is a directory"),
    ("diff", ["diff", "{trace}"], "diff needs two trace files"),
    ("diff", ["diff", "--context", "-1", "{trace}", "{trace}"], "--context must be 0 or more"),
    ("diff", ["diff", "--context", HUGE, "{trace}", "{trace}"], "--context must be at most"),
    ("diff", ["diff", "-o", "", "{trace}", "{trace}"], "the path is empty"),
    ("diff", ["diff", "--format", "pdf", "{trace}", "{trace}"], "'pdf' is not one of"),
    ("diff", ["diff", "--load", "{json}"], "not a tracediff report"),
    ("diff", ["diff", "--load", "{text}"], "not a JSON report"),
    # replay
    ("replay", ["replay", "/dev/zero"], "bad magic"),
    ("replay", ["replay", "{missing}"], "the file does not exist"),
    ("replay", ["replay", "{trace}", "--until", "0"], "--until must be a plan number"),
    ("replay", ["replay", "{trace}", "--until", "99999"], "has no plan 99999"),
    ("replay", ["replay", "{trace}", "--impl", "bogus"], "unknown implementation 'bogus'"),
    # shrink
    *[("shrink", ["shrink", "--seed", "1", "--timeout-s", v], w) for v, w in TIMES],
    ("shrink", ["shrink", "--seed", HUGE], "is not in the range"),
    ("shrink", ["shrink"], "give exactly one of --seed N"),
    ("shrink", ["shrink", "--scenario", "{missing}"], "does not exist"),
    ("shrink", ["shrink", "--scenario", "{json}"], "malformed scenario"),
    ("shrink", ["shrink", "--scenario", "{text}"], "not a scenario JSON file"),
    ("shrink", ["shrink", "--scenario", "{foreign}"], "confirm with --impl reference --impl"),
    ("shrink", ["shrink", "--seed", "1", "--json", ""], "--json: the path is empty"),
    ("shrink", ["shrink", "--seed", "1", "--profile", ""], "the profile name is empty"),
    # fuzz
    *[("fuzz", ["fuzz", "--timeout-s", v], w) for v, w in TIMES],
    ("fuzz", ["fuzz", "--max-examples", "0"], "must be at least 1"),
    ("fuzz", ["fuzz", "--max-requests", "1000"], "--max-requests must be at most 64"),
    # gate
    *[("gate", ["gate", "--timeout", v], w) for v, w in TIMES],
    ("gate", ["gate", "--context", "-1"], "--context must be 0 or more"),
    ("gate", ["gate", "--seeds", HUGE], "is too large"),
    ("gate", ["gate", "-j", "0"], "-j/--jobs must be at least 1"),
    ("gate", ["gate", "--profile", ""], "the profile name is empty"),
    ("gate", ["gate", "--json", ""], "--json: the path is empty"),
    ("gate", ["gate", "--artifacts", "{trace}"], "is a file"),
    ("gate", ["gate", "--regressions", "{trace}"], "is a file"),
    # golden
    *[("golden check", ["golden", "check", "--timeout", v], w) for v, w in TIMES],
    ("golden check", ["golden", "check", "--profile", ""], "the profile name is empty"),
    ("golden check", ["golden", "check", "--json", ""], "--json: the path is empty"),
    ("golden check", ["golden", "check", "--impl", "bogus"], "unknown implementation"),
    ("golden check", ["golden", "check", "--golden-dir", "{dir}"], "no manifest"),
    ("golden update", ["golden", "update", "--profile", ""], "the profile name is empty"),
    ("golden update", ["golden", "update", "-j", "0"], "-j/--jobs must be at least 1"),
    ("golden update", ["golden", "update", "--profile", "{toml}"], "requests[0]"),
    ("golden review", ["golden", "review", "--profile", "nope"], "no pending golden update"),
    ("golden accept", ["golden", "accept", "--golden-dir", "{dir}"], "no pending golden"),
    (
        "golden reject",
        ["golden", "reject", "--golden-dir", "{dir}", "--profile", "q"],
        "no pending",
    ),
    # selfcheck
    *[("selfcheck", ["selfcheck", "--timeout", v], w) for v, w in TIMES],
    ("selfcheck", ["selfcheck", "--seeds", HUGE], "is too large"),
    ("selfcheck", ["selfcheck", "--json", ""], "--json: the path is empty"),
    ("selfcheck", ["selfcheck", "--profile", ""], "the profile name is empty"),
    # serve (refused before it takes stdout)
    ("new-model", ["new-model", "Bad-Name"], "use lower-case letters"),
    ("new-model", ["new-model"], "Missing argument 'NAME'"),
    ("serve", ["serve", "no-such-impl"], "unknown implementation 'no-such-impl'"),
    ("serve", ["serve", "exec:true"], "serves Python implementations, not exec: ones"),
    # coverage
    ("coverage", ["coverage", "--seeds", HUGE], "is too large"),
    ("coverage", ["coverage", "-j", "0"], "-j/--jobs must be at least 1"),
    ("coverage", ["coverage", "--json", ""], "--json: the path is empty"),
    ("coverage", ["coverage", "--profile", ""], "the profile name is empty"),
    # campaign
    *[("campaign", ["campaign", "--out", "c", "--timeout", v], w) for v, w in TIMES],
    ("campaign", ["campaign"], "campaign needs --out DIR"),
    ("campaign", ["campaign", "--out", ""], "--out: the path is empty"),
    ("campaign", ["campaign", "--out", "c", "--seeds", HUGE], "is too large"),
    ("campaign", ["campaign", "--out", "c", "--seeds", "0..99999999"], "over 10,000,000 seeds"),
    ("campaign", ["campaign", "--out", "c", "--memory-limit", HUGE], "at most 1073741824 MB"),
    ("campaign", ["campaign", "--out", "c", "--context", HUGE], "--context must be at most"),
    ("campaign", ["campaign", "--out", "c", "--max-failures", "0"], "must be at least 1"),
    ("campaign", ["campaign", "--out", "c", "--profile", ""], "the profile name is empty"),
    ("campaign report", ["campaign", "report"], "Missing argument 'DIRECTORY'"),
    ("campaign report", ["campaign", "report", "{dir}"], "no campaign here"),
    ("campaign report", ["campaign", "report", "{trace}"], "is a file"),
    ("campaign report", ["campaign", "report", "{dir}", "--json", ""], "the path is empty"),
    # upgrade
    ("upgrade", ["upgrade"], "Missing argument 'TRACES...'"),
    ("upgrade", ["upgrade", "/dev/zero"], "/dev/zero at byte 0: not a tracediff trace"),
    ("upgrade", ["upgrade", "{text}"], "not a tracediff trace (bad magic"),
    ("upgrade", ["upgrade", "{missing}"], "missing: cannot be read"),
    ("upgrade", ["upgrade", "{dir}"], "is a directory"),
    ("upgrade", ["upgrade", "-o", "", "{trace}"], "-o/--output: the path is empty"),
    ("upgrade", ["upgrade", "-o", "x.trace", "{trace}", "{trace}"], "-o/--output takes one TRACE"),
    # bench
    ("bench", ["bench", "--repeats", "0"], "repeats must be at least 1"),
    ("bench", ["bench", "--requests", "x"], "give counts like"),
    ("bench", ["bench", "--requests", "0..99999"], "request counts must lie in 1..64"),
    ("bench", ["bench", "--json", ""], "--json: the path is empty"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bad-cli")
    trace = write_trace(
        generate(load_profile("quick"), 3), parse_impl("reference"), str(root), str(root / "t")
    )
    (root / "text").write_text("hello\n")
    (root / "empty").write_bytes(b"")
    (root / "dir").mkdir()
    (root / "data.json").write_text("{}")
    (root / "p.toml").write_text('seeds = 2\n[matrix]\nrequests = ["a"]\n')
    foreign = generate(load_profile("quick"), 3).to_dict()
    foreign["impls"] = ["reference", "somewhere.else:Scheduler"]
    (root / "foreign.json").write_text(json.dumps(foreign))
    return {
        "trace": trace,
        "text": str(root / "text"),
        "empty": str(root / "empty"),
        "dir": str(root / "dir"),
        "missing": str(root / "missing"),
        "json": str(root / "data.json"),
        "toml": str(root / "p.toml"),
        "foreign": str(root / "foreign.json"),
    }


def test_every_command_is_covered() -> None:
    names = set()
    ctx = click.Context(main)
    for name in main.list_commands(ctx):  # the model's own commands too (lazy)
        command = main.get_command(ctx, name)
        subcommands = getattr(command, "commands", None) or {}
        names.update(f"{name} {sub}" for sub in subcommands)
        if not subcommands or getattr(command, "invoke_without_command", False):
            names.add(name)  # a command, or a group that runs on its own too
    assert names == {command for command, _, _ in ROWS}


@pytest.mark.parametrize(
    ("command", "args", "needle"), ROWS, ids=[" ".join(row[1]) or "-" for row in ROWS]
)
def test_a_bad_command_line_is_exit_2_and_one_line(
    files: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    command: str,
    args: list[str],
    needle: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    filled = [arg.format(**files) for arg in args]
    result = CliRunner().invoke(main, filled)
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), result.stderr
    assert "Traceback" not in result.output
    assert needle.format(**files) in lines[0], lines[0]
    assert not list(tmp_path.iterdir()), "a refused command wrote something"


# (profile TOML, words the one line must hold, after "p.toml:LINE")
PROFILES: list[tuple[str, str]] = [
    ('seeds = 2\n[matrix]\nrequests = ["a"]\n', ":3 [matrix] requests: requests[0] is str 'a'"),
    ('seeds = 2\nparams = "x"\n', " [params]: must be a table"),
    ("seeds = 2\n[generator]\nmax_new = [1]\n", ":3 [generator] max_new: max_new is [1]"),
    ('[params]\nverify_budget = "abc"\n', ":2 [params] verify_budget: verify_budget is str"),
    ("[generator]\nmax_new = [200, 10]\n", ":2 [generator] max_new: [200, 10] is a range"),
    ("[generator]\np_copy = -5.0\n", ":2 [generator] p_copy: -5.0 must be from 0.0 to 1.0"),
    ("[generator]\np_stop = 1.5\n", ":2 [generator] p_stop: 1.5 must be from 0.0 to 1.0"),
    ("[generator]\naccept_base = [0.5, 2.0]\n", ":2 [generator] accept_base: 2.0 must be from"),
    ("[generator]\narrival_window_us = -3\n", ":2 [generator] arrival_window_us: -3 must be"),
    ("[generator]\nmax_new_decay = nan\n", ":2 [generator] max_new_decay: max_new_decay is float"),
    ("[generator]\nprompt_len = [0, 5]\n", ":2 [generator] prompt_len: 0 must be at least 1"),
    ("[matrix]\nrequests = [0]\n", ":2 [matrix] requests: 0 is outside 1..64"),
    ("[matrix]\nqueue_depth = []\n", ":2 [matrix] queue_depth: must not be empty"),
    ('[matrix]\ngraphs = ["round"]\n', ":2 [matrix] graphs: 'round' is not one of"),
    ("[params]\nprefill_chunk = -1\n", ":2 [params] prefill_chunk: must not be negative"),
    ("[params]\nmax_lanes = 0\n", ":1 [params]: max_lanes 0 outside the batch buckets"),
    ('[params]\nallocation = "host"\n', ":2 [params] allocation: the matrix cell sets"),
    ("[params]\nbatch_buckets = [4, 2]\n", ":1 [params]: max_lanes 64 outside the batch buckets;"),
    ('name = "../../x"\n', ":1 name: '../../x' is not a plain name"),
    ("seeds = 99999999999\n", ":1 seeds: 99999999999 must be a seed count from 0 to 100,000"),
    ("seeds = [1]\n", ":1 seeds: must be a seed count or a seed-set string"),
    ('seeds = "0..9999999,10000000..19999999"\n', ":1 seeds: seed set"),
    ("bogus = 1\n", ": unknown keys ['bogus']"),
]


@pytest.mark.parametrize(("text", "needle"), PROFILES, ids=[p[1][:40] for p in PROFILES])
def test_a_bad_profile_is_exit_2_naming_file_line_and_key(
    tmp_path: Path, text: str, needle: str
) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text(text)
    result = CliRunner().invoke(main, ["run", "--profile", str(profile)])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tracediff: error: {profile}"), lines
    assert f"{profile}{needle}" in lines[0], lines[0]
