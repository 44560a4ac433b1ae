"""Bad input of every kind: exit code 2 and exactly one line on stderr, before any work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tracediff.cli import main

PAIR = ["--impl", "reference", "--impl", "reference"]


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def assert_one_line_exit_2(result: Result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("tracediff: error: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output
    assert needle in result.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # seed sets
        (["--seeds", "5..2"], "bad seed range '5..2': 2 < 5"),
        (["--seeds", "x"], "bad seed set 'x'"),
        (["--seeds", ""], "bad seed set ''"),
        (["--seeds", "-1"], "bad seed set '-1'"),
        (["--seeds", "0..99999999"], "too large"),
        # profiles
        (["--profile", "nope"], "unknown profile 'nope'"),
        (["--profile", "missing.toml"], "profile file missing.toml does not exist"),
        (["--profile", "../x"], "does not exist"),
        # implementations
        (["--impl", "bogus", "--impl", "reference"], "unknown implementation 'bogus'"),
        (["--impl", "nosuchmod:X", "--impl", "reference"], "cannot import module 'nosuchmod'"),
        (["--impl", "tests.impls.hang:Nope", "--impl", "reference"], "has no attribute 'Nope'"),
        (["--impl", "tests.impls.hang:HANG_AT", "--impl", "reference"], "is not callable"),
        (["--impl", "reference"], "at least two implementations"),
        # numbers
        (["-j", "0", *PAIR], "-j/--jobs must be at least 1, got 0"),
        (["-j", "-3", *PAIR], "at least 1, got -3"),
        (["-j", "x"], "'x' is not a valid integer"),
        (["--timeout", "0", *PAIR], "--timeout must be a positive number of seconds, got 0.0"),
        (["--timeout", "-1"], "--timeout must be a positive number"),
        (["--timeout", "nan"], "got nan"),
        (["--timeout", "inf"], "got inf"),
        (["--memory-limit", "0"], "--memory-limit must be a positive number of megabytes"),
        (["--memory-limit", "-5"], "got -5"),
        # flags that cannot work together, or at all
        (["--check", *PAIR], "--check changes nothing here"),
        (["--bogus"], "No such option '--bogus'"),
        (["--seeds"], "'--seeds' requires an argument"),
    ],
)
def test_bad_run_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    assert_one_line_exit_2(invoke(["run", *args]), needle)


def test_unknown_option_of_the_group_is_one_line_too() -> None:
    assert_one_line_exit_2(invoke(["--bogus"]), "No such option '--bogus'")


def test_outputs_that_cannot_be_written_fail_before_the_run(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        (["--json", str(tmp_path)], "is a directory"),
        (["--json", str(tmp_path / "missing" / "s.json")], "does not exist; create it first"),
        (["--json", str(a_file / "s.json")], "is not a directory"),
        (["--artifacts", str(a_file)], f"Directory '{a_file}' is a file"),
        (["--resume", str(a_file)], f"--resume {a_file}: is a file, not a directory"),
        (
            ["--resume", str(tmp_path / "r"), "--json", str(tmp_path / "r" / "journal.jsonl")],
            "is the --resume journal",
        ),
    ]
    if Path("/sys").is_dir():  # sysfs refuses new files even to root
        cases += [
            (["--json", "/sys/s.json"], "--json /sys/s.json: cannot write in /sys"),
            (["--artifacts", "/sys/kept"], "--artifacts /sys/kept: cannot create the directory"),
        ]
    for args, needle in cases:
        # the default profile would take minutes: failing fast proves nothing ran
        assert_one_line_exit_2(invoke(["run", "--profile", "default", *args]), needle)


def test_a_toml_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text('name = "broken"\nseeds = 4\n[matrix\nrequests = [1]\n')
    result = invoke(["run", "--profile", str(bad)])
    assert_one_line_exit_2(result, str(bad))
    assert "line 3" in result.stderr


def test_a_profile_with_unknown_keys_names_them(tmp_path: Path) -> None:
    bad = tmp_path / "odd.toml"
    bad.write_text('name = "odd"\nseeds = 4\n[matrix]\nrequest = [1]\n')
    assert_one_line_exit_2(
        invoke(["run", "--profile", str(bad)]),
        f"{bad}:4 [matrix] request: unknown keys ['request']",
    )


def test_a_memory_limit_below_what_a_worker_needs_is_refused() -> None:
    result = invoke(["run", "--seeds", "0", *PAIR, "--memory-limit", "5", "--no-progress"])
    assert_one_line_exit_2(result, "--memory-limit 5 MB is below what a worker needs to start")


def test_an_internal_error_is_one_line_and_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracediff.cli.run as run_module

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(run_module, "_run_with_progress", broken)
    result = invoke(["run", "--seeds", "0", *PAIR])
    assert result.exit_code == 3
    assert result.stderr.count("\n") == 1
    assert "internal error: RuntimeError: boom (a bug in tracediff" in result.stderr


def test_ctrl_c_before_the_run_starts_is_exit_130(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracediff.cli.run as run_module

    def interrupted(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "resolve_scenarios", interrupted)
    result = invoke(["run", "--seeds", "0", *PAIR])
    assert result.exit_code == 130
    assert result.stderr == "tracediff: error: interrupted\n"


def test_a_real_process_prints_exactly_one_line_on_stderr(
    python: str, subprocess_env: dict[str, str]
) -> None:
    completed = subprocess.run(
        [python, "-m", "tracediff.cli", "run", "--seeds", "9..1"],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr == ("tracediff: error: bad seed range '9..1': 1 < 9\n")
