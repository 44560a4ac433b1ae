"""Workflows across commands, in a project of the user's own: what one command writes or
changes, the next one checks (no false greens).

Each row is a sequence of commands run as a user runs them: a fresh ``tracediff`` (or
``pytest``) process per step, in a temporary project with its own ``pyproject.toml`` and
implementation package (``mypkg``, not installed: found through the configuration's
directory, from any subdirectory). The last step's exit code is the assertion; the steps
before it must succeed as stated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.test_config import USER_SCHEDULER

BIN = Path(sys.executable).parent
TRACEDIFF = str(BIN / "tracediff")

BUGGY = USER_SCHEDULER  # the reference with a planted bug in its pending advance

FIXED = '''
"""A user's scheduler: decides as the reference (the bug is fixed)."""
from tracediff.models.specdec.sched.optimized import OptimizedScheduler


class FastScheduler(OptimizedScheduler):
    name = "fast"
'''

MINI_PROFILE = """
name = "mini"
description = "three small scenarios"
seeds = 3

[matrix]
requests = [1, 3]

[generator]
max_new = [16, 48]
"""

BUGGY_SEED = 37  # the planted bug diverges on quick:37 (and not on 40 or 41)


def _project(root: Path, code: str) -> Path:
    project = root / "userproject"
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "sched.py").write_text(code)
    (project / "tests" / "unit").mkdir(parents=True)
    (project / "profiles").mkdir()
    (project / "pyproject.toml").write_text(
        textwrap.dedent(
            """\
            [project]
            name = "userproject"
            version = "0.1"

            [tool.tracediff]
            impls = ["reference", "mypkg.sched:FastScheduler"]
            profiles = "profiles"
            """
        )
    )
    return project


def _run(
    project: Path,
    argv: Sequence[str],
    cwd: str = ".",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """One command as a user runs it: a fresh process, no tracediff or GitHub variables
    unless ``env`` sets them, no PYTHONPATH (mypkg is found through the configuration)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEDIFF_", "GITHUB_"))}
    clean.pop("PYTHONPATH", None)
    clean["CI"] = ""
    return subprocess.run(
        list(argv),
        cwd=project / cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**clean, **(env or {})},
        stdin=subprocess.DEVNULL,
    )


@dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    expect: int  # exit code
    cwd: str = "."
    code: str | None = None  # replace mypkg/sched.py before this step
    says: tuple[str, ...] = ()  # substrings of the output
    edit_manifest: bool = False  # corrupt one digest of golden/mini.json first


def td(*argv: str) -> tuple[str, ...]:
    return (TRACEDIFF, *argv)


def pytest_cmd(*argv: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", *argv)


PLUGIN = ("--tracediff-profile", "quick", "--tracediff-seeds", "37,40")

WORKFLOWS: dict[str, tuple[str, list[Step]]] = {
    "shrink --save, then gate replays the saved repro": (
        BUGGY,
        [
            Step(
                td("shrink", "--seed", str(BUGGY_SEED), "--save", "--timeout", "60"),
                1,
                says=("saved scenarios/regressions/quick-37",),
            ),
            Step(
                td("gate", "--seeds", "40", "-j", "1"),
                1,
                says=("regressions: failed", "scenarios/regressions"),
            ),
        ],
    ),
    "golden update + accept, then gate checks the new manifest": (
        FIXED,
        [
            Step(
                td("golden", "update", "--profile", "mini", "-j", "1"), 0, says=("FastScheduler",)
            ),
            Step(td("golden", "accept", "--profile", "mini"), 0),
            Step(
                td("gate", "--profile", "mini", "-j", "1"),
                0,
                says=("mini.json in golden", "golden: passed"),
            ),
            Step(td("gate", "--profile", "mini", "-j", "1"), 1, edit_manifest=True),
        ],
    ),
    "golden check without --impl checks the configured candidate": (
        BUGGY,
        [
            Step(
                td("golden", "check", "--seeds", str(BUGGY_SEED), "-j", "1"),
                1,
                says=("mypkg.sched:FastScheduler", "configured candidate", "built-in manifests"),
            )
        ],
    ),
    "run --resume after a fix never reports the old finding": (
        BUGGY,
        [
            Step(td("run", "--seeds", "37,40", "--resume", "journal", "-j", "1"), 1),
            Step(
                td("run", "--seeds", "37,40", "--resume", "journal", "-j", "1"),
                2,
                code=FIXED,
                says=("code of mypkg.sched:FastScheduler changed", "--fresh"),
            ),
            Step(td("run", "--seeds", "37,40", "--resume", "journal", "--fresh", "-j", "1"), 0),
        ],
    ),
    "run --resume after a new bug never reuses an old identical": (
        FIXED,
        [
            Step(td("run", "--seeds", "37,40", "--resume", "journal", "-j", "1"), 0),
            Step(
                td("run", "--seeds", "37,40", "--resume", "journal", "-j", "1"),
                2,
                code=BUGGY,
                says=("changed",),
            ),
            Step(td("run", "--seeds", "37,40", "--resume", "journal", "--fresh", "-j", "1"), 1),
        ],
    ),
    "run from a subdirectory finds the configured implementation": (
        BUGGY,
        [Step(td("run", "--seeds", "37", "-j", "1"), 1, cwd="tests/unit", says=("decision",))],
    ),
    "the plugin's node id reruns one scenario": (
        BUGGY,
        [
            Step(pytest_cmd("--co", *PLUGIN), 0, says=("2 tests collected",)),
            Step(pytest_cmd(*PLUGIN), 1, says=("1 failed, 1 passed",)),
            Step(
                pytest_cmd("pyproject.toml::quick::37", *PLUGIN),
                1,
                says=("1 failed in",),
            ),
            Step(pytest_cmd("pyproject.toml::quick::40", *PLUGIN), 0, says=("1 passed",)),
        ],
    ),
    "the plugin's scenarios spread over pytest-xdist workers": (
        BUGGY,
        [Step(pytest_cmd("-n", "2", *PLUGIN), 1, says=("1 failed, 1 passed",))],
    ),
    "the plugin collects the project's saved regressions": (
        BUGGY,
        [
            Step(
                td("shrink", "--seed", str(BUGGY_SEED), "--save", "--timeout", "60"),
                1,
            ),
            Step(
                pytest_cmd("--co", *PLUGIN),
                0,
                says=("pyproject.toml::regressions::quick-37", "3 tests collected"),
            ),
            Step(pytest_cmd("-k", "regressions", *PLUGIN), 1, says=("1 failed, 2 deselected",)),
        ],
    ),
    "the plugin's --lf reruns only the failed scenario": (
        BUGGY,
        [
            Step(pytest_cmd(*PLUGIN), 1),
            Step(pytest_cmd("--lf", *PLUGIN), 1, says=("1 failed", "1 deselected")),
        ],
    ),
}


def _corrupt_manifest(project: Path) -> None:
    path = project / "golden" / "mini.json"
    data = json.loads(path.read_text())
    entries = data["scenarios"]
    first = entries[0]
    first["digest"] = ("0" if first["digest"][0] != "0" else "1") + first["digest"][1:]
    path.write_text(json.dumps(data, indent=1) + "\n")


@pytest.mark.parametrize("name", list(WORKFLOWS))
def test_workflow_last_step_exit_code(tmp_path: Path, name: str) -> None:
    code, steps = WORKFLOWS[name]
    project = _project(tmp_path, code)
    (project / "profiles" / "mini.toml").write_text(MINI_PROFILE)
    for number, step in enumerate(steps, start=1):
        if step.code is not None:
            (project / "mypkg" / "sched.py").write_text(step.code)
            for cached in (project / "mypkg").rglob("__pycache__"):
                for file in cached.iterdir():
                    file.unlink()
        if step.edit_manifest:
            _corrupt_manifest(project)
        done = _run(project, step.argv, step.cwd)
        output = done.stdout + done.stderr
        where = f"{name}: step {number} {' '.join(step.argv[1:])}\n{output}"
        assert done.returncode == step.expect, where
        assert "Traceback" not in output, where
        assert "No module named" not in output, where
        for text in step.says:
            assert text in output, (text, where)


def _gate_in_ci(project: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return _run(project, td("gate", "-j", "1", *argv), env={"GITHUB_ACTIONS": "true"})


def test_ci_annotations_point_at_the_project_files_and_junit_validates(tmp_path: Path) -> None:
    """Under GitHub Actions each finding is an ``::error file=...,title=...::`` command
    anchored to a file of the project (the saved regression, the implementation's source),
    relative to its root; the JUnit XML validates against the JUnit schema CI servers use,
    and a failed gate step is a failing test case of its own."""
    import xmlschema

    from tracediff.models.specdec.scenario.generator import generate
    from tracediff.models.specdec.scenario.profiles import load_profile
    from tracediff.project.corpus import save_scenario

    project = _project(tmp_path, BUGGY)
    save_scenario(generate(load_profile("quick"), BUGGY_SEED), project / "scenarios/regressions")
    (saved,) = (project / "scenarios" / "regressions").glob("*.json")
    done = _gate_in_ci(project, "--seeds", f"{BUGGY_SEED},40", "--junit", "j.xml")
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    errors = [line for line in done.stdout.splitlines() if line.startswith("::error ")]
    assert f"::error file=scenarios/regressions/{saved.name},title=" in output, errors
    assert any(line.startswith("::error file=mypkg/sched.py,title=") for line in errors), errors
    assert all("::" in line[len("::error ") :] for line in errors)
    assert str(tmp_path) not in "\n".join(errors)  # every reproduce command is relative
    schema = xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit.xsd"))
    schema.validate(str(project / "j.xml"))
    import xml.etree.ElementTree as ET

    root = ET.parse(project / "j.xml").getroot()
    steps = {case.get("name"): case for case in root.iter("testcase")}
    assert steps["regressions"].find("failure") is not None  # the failed step itself
    failures = sum(1 for _ in root.iter("failure"))
    assert root.get("failures") == str(failures)


def test_junit_of_a_gate_with_skipped_steps_validates(tmp_path: Path) -> None:
    import xmlschema

    project = _project(tmp_path, FIXED)
    (project / "profiles" / "mini.toml").write_text(MINI_PROFILE)
    done = _gate_in_ci(project, "--profile", "mini", "--junit", "j.xml")
    assert done.returncode == 0, done.stdout + done.stderr
    text = (project / "j.xml").read_text()
    assert "<skipped" in text  # no corpus, no manifest for mini: skipped steps
    xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit.xsd")).validate(
        str(project / "j.xml")
    )


def test_a_built_in_corpus_file_is_named_builtin_never_by_its_installed_path() -> None:
    from tracediff.gate import GateOptions
    from tracediff.project.corpus import corpus_files, load_scenario
    from tracediff.resources import builtin_dir

    builtin = builtin_dir("regressions")
    assert builtin is not None
    first = corpus_files(builtin)[0]
    options = GateOptions(profile="quick", scenarios=(), impls=())
    assert options.scenario_arg(first) == f"builtin:{first.name}"
    assert load_scenario(f"builtin:{first.name}") == load_scenario(first)
    done = subprocess.run(
        [TRACEDIFF, "run", "--scenario", f"builtin:{first.name}", "-j", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    bad = subprocess.run(
        [TRACEDIFF, "run", "--scenario", "builtin:../pyproject.toml"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2 and "no such scenario in the built-in corpus" in bad.stderr


def test_a_campaigns_last_line_is_its_summary(tmp_path: Path) -> None:
    """With findings, the explained findings come first; the last line is the campaign's
    verdict over every scenario it ran (not the findings report's count of its findings)."""
    project = _project(tmp_path, BUGGY)
    done = _run(project, td("campaign", "--seeds", "36..38", "-j", "1", "--out", "c1"))
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("FINDINGS: 1 of 3 scenarios"), done.stdout
