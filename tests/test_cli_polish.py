"""Command-line polish: help everywhere, closed pipes, labelled plans, wide logs, progress."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.cli.heartbeat import Counter, heartbeat


def _commands(command: click.Command, path: list[str]) -> list[tuple[str, click.Command]]:
    found = [(" ".join(path), command)]
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):  # the model's own commands too (lazy)
            sub = command.get_command(ctx, name)
            assert sub is not None
            found += _commands(sub, [*path, name])
    return found


def test_every_option_of_every_command_has_help_text() -> None:
    missing = [
        f"{name} {'/'.join(param.opts)}"
        for name, command in _commands(main, ["tracediff"])
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not param.help
    ]
    assert missing == []


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "GITHUB_ACTIONS")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return env


@pytest.fixture(scope="module")
def big_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # a directory name long enough that an 80-column layout would have to cut it
    folder = tmp_path_factory.mktemp("a-directory-with-a-rather-long-name-" + "x" * 40)
    path = folder / "t.trace"
    result = CliRunner().invoke(main, ["record", "--seed", "100", "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


def test_show_jsonl_into_a_closed_pipe_ends_quietly(big_trace: Path, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "tracediff", "show", str(big_trace), "--jsonl"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path)
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()  # then go away, as `head -1` does
    process.stdout.close()
    error = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=120) == 0, error
    assert json.loads(first)["t"] == "header"
    assert error == ""


def test_gate_into_a_closed_pipe_still_writes_its_reports(tmp_path: Path) -> None:
    junit = tmp_path / "j.xml"
    command = [sys.executable, "-m", "tracediff", "gate", "--seeds", "0", "-j", "1"]
    command += ["--junit", str(junit), "--artifacts", str(tmp_path / "art")]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(tmp_path)
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # nobody reads the report
    error = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=300) == 0, error
    assert "Broken pipe" not in error and "Traceback" not in error
    assert junit.read_text().startswith("<?xml")


def test_show_plan_names_every_field(big_trace: Path) -> None:
    lines = CliRunner().invoke(main, ["show", str(big_trace), "--jsonl"]).output.splitlines()
    busy = next(
        r for r in map(json.loads, lines) if r["t"] == "plan" and r["eligible"] and r["round"]
    )
    result = CliRunner().invoke(main, ["show", str(big_trace), "--plan", str(busy["plan"])])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["t"] == "plan" and plan["plan"] == busy["plan"]
    columns = json.loads(lines[0])["columns"]
    assert list(plan["eligible"][0]) == columns["eligible"]
    assert all(list(c) == columns["candidates"] for c in plan["candidates"])
    assert list(plan["round"]) == columns["round"]
    assert all(list(lane) == columns["lanes"] for lane in plan["round"]["lanes"])
    assert plan == busy  # --jsonl labels every record the same way


def test_output_that_is_not_a_terminal_keeps_whole_lines(big_trace: Path, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracediff", "show", str(big_trace)],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert str(big_trace) in done.stdout  # the title, not cut at 80 columns


def test_a_log_gets_a_periodic_progress_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRACEDIFF_PROGRESS_INTERVAL", "0.05")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with heartbeat(Counter("run", total=108)) as counter:
        counter.done, counter.findings = 1, 1
        for _ in range(400):  # until the first beat, whenever it comes
            if "run: " in sys.stderr.getvalue():  # type: ignore[attr-defined]
                break
            time.sleep(0.05)
    assert "run: 1 of 108 scenarios, 1 finding, " in sys.stderr.getvalue()  # type: ignore[attr-defined]
    quiet = io.StringIO()
    monkeypatch.setattr(sys, "stderr", quiet)
    with heartbeat(Counter("run", total=1), enabled=False):
        time.sleep(0.2)
    assert quiet.getvalue() == ""  # --no-progress


def test_a_progress_line_has_done_total_rate_and_eta() -> None:
    counter = Counter("run", total=20, done=5, findings=2)
    counter.started = time.monotonic() - 10.0  # five scenarios in ten seconds
    line = counter.line()
    assert line.startswith("run: 5 of 20 scenarios, 2 findings, 0.5/s, 10 s, ETA 30 s"), line
    explaining = Counter("run: explaining", total=3, noun="finding", counts_findings=False)
    assert explaining.line().startswith("run: explaining: 0 of 3 findings, 0.0/s,")
    assert "ETA unknown" in explaining.line()


def test_the_run_summary_reports_what_simulation_costs_beside_plan(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    result = CliRunner().invoke(main, ["run", "--seeds", "0..1", "-j", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "simulation and driver (share of plan() time)" in result.output
    share = json.loads(out.read_text())["simulation_share"]
    assert isinstance(share, float) and share >= 0.0  # driving includes plan(), never less


def test_the_command_line_imports_only_the_command_it_runs() -> None:
    # Worker processes started from the console script import the command line again: a
    # command's module (and what it needs, Hypothesis for fuzz) loads only when it runs.
    script = (
        "import sys\n"
        "from tracediff.cli import main\n"
        "from tracediff.cli.app import COMMANDS\n"
        "loaded = lambda: {m for m in sys.modules if m.startswith('tracediff.cli.')}\n"
        "assert loaded() == {'tracediff.cli.app'}, loaded()\n"
        "try:\n"
        "    main(['impls'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "assert 'tracediff.cli.impls' in loaded(), loaded()\n"
        "assert not {'tracediff.cli.fuzz', 'tracediff.cli.campaign'} & loaded(), loaded()\n"
        "assert 'hypothesis' not in sys.modules\n"
        "print(len(COMMANDS))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) >= 16
    # every listed name is a command its module defines, and every command is listed
    ctx = click.Context(main)
    for name in main.list_commands(ctx):
        assert main.get_command(ctx, name) is not None, name
    assert set(main.commands) <= set(main.list_commands(ctx))
