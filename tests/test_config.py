"""[tool.tracediff] configuration, tracediff init, the public API and the pytest plugin."""

from __future__ import annotations

import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import tracediff
from tracediff.cli import main
from tracediff.errors import ConfigError
from tracediff.project.config import find_pyproject, load_config

ROOT = Path(__file__).resolve().parents[1]


def test_the_nearest_table_wins_and_paths_are_relative_to_its_file(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\nprofile = "outer"\n')
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a" / "pyproject.toml").write_text("[project]\nname = 'no-table'\n")
    assert find_pyproject(inner) == (tmp_path / "pyproject.toml").resolve()
    (tmp_path / "a" / "pyproject.toml").write_text(
        '[tool.tracediff]\nimpls = ["reference", "x.y:Z"]\ngolden = "g"\ntimeout = 5\n'
    )
    config = load_config(inner)
    assert config.path == (tmp_path / "a" / "pyproject.toml").resolve()
    assert config.impls == ("reference", "x.y:Z") and config.timeout == 5.0
    assert config.golden == (tmp_path / "a" / "g").resolve()
    with pytest.raises(ConfigError, match=r"\[tool.tracediff\] golden = .*does not exist"):
        config.existing_dir("golden")
    assert load_config(tmp_path).profile == "outer"  # from the outer directory, the outer file


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        ("colour = 1", "unknown keys ['colour']"),
        ('impls = "reference"', "impls: expected a list"),
        ("timeout = -1", "timeout: expected a positive number"),
        ("jobs = 0", "jobs: expected a whole number"),
        ("golden = 3", "golden: expected a path"),
    ],
)
def test_a_bad_table_is_exit_2_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, needle: str
) -> None:
    (tmp_path / "pyproject.toml").write_text(f"[tool.tracediff]\n{table}\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "--seeds", "0"])
    assert result.exit_code == 2, result.output
    assert needle in result.output and "pyproject.toml" in result.output


def test_init_writes_a_starter_table_and_never_replaces_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mine"\n')
    first = CliRunner().invoke(main, ["init"])
    assert first.exit_code == 0, first.output
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith('[project]\nname = "mine"\n') and "[tool.tracediff]" in text
    config = load_config(tmp_path)
    assert config.impls == ("reference", "optimized") and config.profile == "quick"
    again = CliRunner().invoke(main, ["init"])
    assert again.exit_code == 2 and "already has a [tool.tracediff] table" in again.output
    assert (tmp_path / "pyproject.toml").read_text() == text


def test_init_writes_the_model_in_effect_with_its_implementations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # --model sets $TRACEDIFF_MODEL in this process: restored (unset) after the test
    monkeypatch.setenv("TRACEDIFF_MODEL", "")
    done = CliRunner().invoke(main, ["--model", "kvbatch", "init"])
    assert done.exit_code == 0, done.output
    text = (tmp_path / "pyproject.toml").read_text()
    assert 'model = "kvbatch"' in text
    monkeypatch.setenv("TRACEDIFF_MODEL", "")
    config = load_config(tmp_path)
    assert config.model == "kvbatch" and config.impls == ("reference", "optimized")
    # and the project's commands then run that model without --model
    assert tracediff.load_project(tmp_path).model == "kvbatch"


def test_run_from_a_subdirectory_replays_the_configured_corpus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS")
    monkeypatch.chdir(ROOT / "docs")  # the repository's own [tool.tracediff] table
    result = CliRunner().invoke(main, ["run", "--seeds", "0", "-j", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    corpus = len(list((ROOT / "scenarios" / "regressions").glob("*.json")))
    assert f"identical: {corpus + 1} scenarios" in result.output


def test_the_public_api_compares_and_explains() -> None:
    stale = "tests.impls.stale_advance:StaleAdvanceScheduler"
    result = tracediff.compare_implementations("quick", ["reference", stale], seeds=[37, 40])
    assert [c.status for c in result.comparisons] == ["diverged", "identical"]
    (finding,) = result.findings
    assert finding.label == "quick:37" and finding.divergence is not None
    assert "decision · plan: round.lanes[*].prefix" in finding.explanation
    # the cause, plans before the symptom, as every report gives it
    assert "state:     after plan 3: request 0 pending_advance 8 vs 0" in finding.explanation
    assert finding.reproduce == (
        f"tracediff run --profile quick --seeds 37 --impl reference --impl {stale}"
    )
    assert "quick:37: decision" in result.explain()
    same = tracediff.compare_implementations(tracediff.scenarios_of("quick", "3")[0])
    assert same.ok and same.explain() == ""


def test_the_public_apis_reproduce_command_for_a_workload_profile_runs() -> None:
    skewed = "tests.impls.skewed:SkewedScheduler"
    named = f"quick@{Path(__file__).resolve().parents[1] / 'workloads/azure_code.csv'}"
    (finding,) = tracediff.compare_implementations(named, ["reference", skewed], seeds=[2]).findings
    # the profile as given (its workload file named again), not its PROFILE+FILE-TAG name
    assert "--workload" in finding.reproduce and "+" not in finding.reproduce
    args = shlex.split(finding.reproduce)
    assert args[:2] == ["tracediff", "run"]
    rerun = CliRunner().invoke(main, args[1:])
    assert rerun.exit_code == 1 and "1 diverged of 1 scenario" in rerun.output, rerun.output
    # a scenario handed over alone: its workload is not a command line's, so saved first
    alone = tracediff.compare_implementations(finding.scenario, ["reference", skewed])
    assert alone.findings[0].reproduce.startswith("tracediff shrink --scenario <scenario.json>")


USER_SCHEDULER = '''
"""A user's own scheduler: the reference with a planted bug in its pending advance."""
from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.reference import ReferenceScheduler


class FastScheduler(ReferenceScheduler):
    name = "fast"

    def pending_advance(self, state):
        total = 0
        for round_ in self.submitted.values():
            if round_.kind == F.RAGGED:
                continue  # the planted bug
            for lane in round_.lanes:
                if lane.request == state.spec.id:
                    total += 1 + lane.prefix
        return total
'''

USER_TEST = """
import pytest


@pytest.mark.tracediff(profile="quick", seeds="40")
def test_marked(tracediff_scenario, tracediff_compare):
    tracediff_compare(tracediff_scenario)
"""


def test_the_pytest_plugin_finds_a_planted_bug_in_a_user_project(tmp_path: Path) -> None:
    project = tmp_path / "userproject"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "sched.py").write_text(USER_SCHEDULER)
    (project / "tests").mkdir()
    (project / "tests" / "test_mine.py").write_text(USER_TEST)
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [project]
            name = "userproject"

            [tool.tracediff]
            impls = ["reference", "mypkg.sched:FastScheduler"]

            [tool.pytest.ini_options]
            pythonpath = ["."]
            """
        )
    )
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
    command += ["--tracediff-profile", "quick", "--tracediff-seeds", "37,40", "-rN"]
    done = subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    print(output)  # the report shows what a user sees
    assert done.returncode == 1, output
    assert "1 failed, 2 passed" in output
    assert "tracediff[quick:37]" in output
    assert "decision · plan: round.lanes[*].prefix" in output  # the explanation, in the failure
    assert "state:     after plan 3: request 0 pending_advance" in output  # with its cause
    assert "reproduce: tracediff run --profile quick --seeds 37" in output
    assert "Traceback" not in output


def test_the_plugin_is_inert_without_its_options(pytestconfig: pytest.Config) -> None:
    assert pytestconfig.getoption("tracediff_profile") is None
    assert pytestconfig.pluginmanager.has_plugin("tracediff")
