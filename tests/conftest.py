from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _tests_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let ``--impl tests.impls.x:Y`` import the deliberately broken implementations."""
    monkeypatch.syspath_prepend(str(ROOT))


@pytest.fixture(autouse=True)
def _empty_regression_corpus(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run` and `gate` replay scenarios/regressions first; tests count their own scenarios.

    Tests about the corpus itself pass ``--regressions DIR`` (or set the variable) explicitly.
    """
    empty = tmp_path_factory.mktemp("no-regressions")
    monkeypatch.setenv("TRACEDIFF_REGRESSIONS", str(empty))


@pytest.fixture(autouse=True)
def _not_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite runs the same on a laptop and under CI: commands that refuse to write the
    golden directory or the corpus in CI (``CI=true``) would otherwise behave differently
    there. Tests about CI behaviour set the variables themselves."""
    for name in ("CI", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["PYTHONHASHSEED"] = "random"
    return env


@pytest.fixture
def python() -> str:
    return sys.executable
