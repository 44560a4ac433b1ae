"""Blame the right party: a model's own code failing is the model's (exit 2, naming the
model, the member tracediff called and the file and line), never tracediff's bug (exit 3)
nor an exit status (a model's ``sys.exit(0)``); an implementation's exception is named by
the method that raised, wherever the model's driver lives."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.plugins import install, tracediff

HOSTILE = """
import sys
from toy_model import ToyModel


class BadProfile(ToyModel):
    name = "badprofile"

    def load_profile(self, name):
        settings = {"window": 3}
        return settings.window  # the model's bug


class Exits(ToyModel):
    name = "exits"

    def generate(self, profile, seed):
        sys.exit(0)


class Interrupts(ToyModel):
    name = "interrupts"

    def generate(self, profile, seed):
        raise KeyboardInterrupt


class DriverBug(ToyModel):
    name = "driverbug"

    def drive(self, scenario, impl, *, check=True):
        for number, record in enumerate(super().drive(scenario, impl, check=check)):
            if number == 3:
                raise ValueError("the driver's own bug")
            yield record


class BrokenWorker(ToyModel):
    name = "brokenworker"
    worker_modules = ("worker_raises",)


class ExitingWorker(ToyModel):
    name = "exitingworker"
    worker_modules = ("exits_on_import",)


class MissingWorker(ToyModel):
    name = "missingworker"
    worker_modules = ("no_module_of_that_name",)


BADPROFILE, EXITS, INTERRUPTS, DRIVERBUG = BadProfile(), Exits(), Interrupts(), DriverBug()
BROKENWORKER, EXITINGWORKER, MISSINGWORKER = BrokenWorker(), ExitingWorker(), MissingWorker()
"""

# a driver whose drive lives in an engine module of its own
ENGINE = """
def run(model, scenario, impl, check):
    yield from type(model).__mro__[1].drive(model, scenario, impl, check=check)
"""
ELSEWHERE = """
import toy_engine
from toy_model import ToyModel


class Elsewhere(ToyModel):
    name = "elsewhere"

    def drive(self, scenario, impl, *, check=True):
        return toy_engine.run(self, scenario, impl, check)


ELSEWHERE = Elsewhere()
"""
RAISER = """
from toy_model import Reference


class Raiser(Reference):
    def plan(self, now):
        if now > 3:
            return {}["missing"]
        return super().plan(now)
"""
MODELS = {
    "badprofile": "hostile_models:BADPROFILE",
    "exits": "hostile_models:EXITS",
    "interrupts": "hostile_models:INTERRUPTS",
    "driverbug": "hostile_models:DRIVERBUG",
    "onimport": "exits_on_import:MODEL",
    "elsewhere": "elsewhere_model:ELSEWHERE",
    "brokenworker": "hostile_models:BROKENWORKER",
    "exitingworker": "hostile_models:EXITINGWORKER",
    "missingworker": "hostile_models:MISSINGWORKER",
}


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    modules = {
        "hostile_models.py": HOSTILE,
        "exits_on_import.py": "import sys\nsys.exit(0)\n",
        "toy_engine.py": ENGINE,
        "elsewhere_model.py": ELSEWHERE,
        "raiser.py": RAISER,
        "worker_raises.py": "\n\nraise RuntimeError('a worker module that cannot be imported')\n",
    }
    return install(tmp_path_factory.mktemp("plugins"), "hostile-plugins", modules, MODELS)


def td(plugins: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tracediff(cwd, *args, path=(plugins,))


@pytest.mark.parametrize(
    ("model", "member", "error", "line"),
    [
        ("badprofile", "load_profile", "AttributeError: 'dict' object has no attribute", 11),
        ("exits", "generate", "SystemExit(0) (a model must not exit the process)", 18),
        ("interrupts", "generate", "KeyboardInterrupt", 25),
    ],
)
def test_a_models_own_failure_is_exit_2_naming_it(
    plugins: Path, tmp_path: Path, model: str, member: str, error: str, line: int
) -> None:
    for args in (("record", "--seed", "1", "-o", "x.trace"), ("gate", "--junit", "j.xml")):
        done = td(plugins, tmp_path, "--model", model, *args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"the model {model!r} failed in {member}: {error}" in done.stderr
        assert f"(hostile_models.py:{line})" in done.stderr
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr
        assert not (tmp_path / "x.trace").exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_driver_that_raises_is_the_models_fault_in_every_command(
    plugins: Path, tmp_path: Path, jobs: str
) -> None:
    # the scenario's error is neither an implementation's finding nor tracediff's bug
    expected = "the model 'driverbug' failed in drive: ValueError: the driver's own bug"
    for args in (
        ("run", "-j", jobs),
        ("gate", "-j", jobs, "--junit", "j.xml"),
        ("record", "--seed", "1", "-o", "x.trace"),
    ):
        done = td(plugins, tmp_path, "--model", "driverbug", *args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert expected in done.stderr and "(hostile_models.py:34)" in done.stderr
        assert "Traceback" not in done.stderr + done.stdout
        assert not (tmp_path / "x.trace").exists()


def test_a_plugin_that_exits_on_import_is_refused_not_obeyed(plugins: Path, tmp_path: Path) -> None:
    done = td(plugins, tmp_path, "--model", "onimport", "gate", "--junit", "j.xml")
    assert done.returncode == 2
    assert "cannot load exits_on_import:MODEL: SystemExit(0)" in done.stderr
    listed = td(plugins, tmp_path, "models")
    assert listed.returncode == 0 and "onimport" in listed.stdout
    assert "toy" in listed.stdout  # the others are still listed


def test_an_implementations_exception_names_its_method_wherever_the_driver_lives(
    plugins: Path, tmp_path: Path
) -> None:
    done = td(plugins, tmp_path, "--model", "elsewhere", "run", "--seeds", "3",
              "--impl", "reference", "--impl", "raiser:Raiser")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error · plan(): raised KeyError" in done.stdout
    assert "encode()" not in done.stdout and "error · encode" not in done.stdout


@pytest.mark.parametrize(
    ("model", "error", "where"),
    [
        (
            "brokenworker",
            "cannot import 'worker_raises': RuntimeError: a worker module that cannot be imported",
            "worker_raises.py:3)",
        ),
        (
            "exitingworker",
            "cannot import 'exits_on_import': SystemExit: 0",
            "exits_on_import.py:2)",
        ),
        (
            "missingworker",
            "cannot import 'no_module_of_that_name': ModuleNotFoundError: No module named",
            "(named in its worker_modules)",
        ),
    ],
)
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_worker_module_that_fails_to_import_is_the_models_fault(
    plugins: Path, tmp_path: Path, model: str, error: str, where: str, jobs: str
) -> None:
    # the fork server imports a model's worker_modules: a failure there was a dead server,
    # its tracebacks on stderr and exit 3 ("check ulimit -u/-n")
    done = td(plugins, tmp_path, "--model", model, "run", "-j", jobs)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"the model {model!r} failed in worker_modules: {error}" in done.stderr
    assert where in done.stderr
    assert "Traceback" not in done.stderr and "ulimit" not in done.stderr
    assert done.stderr.count("\n") == 1
