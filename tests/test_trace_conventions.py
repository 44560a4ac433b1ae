"""No command writes a trace another refuses, and a bad record is blamed on whoever made it.

- An implementation's record that breaks the trace conventions (what ``show`` checks) is its
  finding, exit 1 naming it, in ``record`` and ``run`` alike; nothing is written.
- A record the model's driver makes that breaks them is the model's fault, exit 2 naming the
  model, ``drive`` and the file and line of its ``yield``: never an implementation's finding
  nor "not deterministic".
- An implementation that replaces ``sys.exit`` is its finding, exit 1 in one line, with no
  traceback (tracediff ends every command through ``sys.exit``).

Each runs the command line in a fresh process, at ``-j 1`` and ``-j 2`` where it runs
scenarios.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.plugins import install, tracediff

ROOT = Path(__file__).resolve().parents[1]

HOSTILE = """
from toy_model import ToyModel


class Injects(ToyModel):
    name = "injects"

    def drive(self, scenario, impl, *, check=True):
        for record in super().drive(scenario, impl, check=check):
            yield record
            if record.get("t") == "arrival":
                yield {"t": "tick", "now": -1}  # the driver's own record: its clock goes back


class MakesUpPlans(ToyModel):
    name = "makesup"

    def drive(self, scenario, impl, *, check=True):
        for record in super().drive(scenario, impl, check=check):
            yield record
            if record.get("t") == "done":
                yield {"t": "plan", "plan": 0}  # a decision no implementation made


INJECTS, MAKESUP = Injects(), MakesUpPlans()
"""


@pytest.fixture(scope="module")
def plugins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = {"injects": "hostile_drivers:INJECTS", "makesup": "hostile_drivers:MAKESUP"}
    modules = {"hostile_drivers.py": HOSTILE}
    return install(tmp_path_factory.mktemp("drivers"), "hostile-drivers", modules, models)


def td(cwd: Path, *args: str, path: tuple[Path, ...] = ()) -> subprocess.CompletedProcess[str]:
    return tracediff(cwd, *args, path=(*path, ROOT))


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "internal error" not in lines[0]
    return lines[0]


BACKCLOCK = "tests.impls.toy_backclock:BackClock"


def test_record_refuses_an_implementations_record_that_show_would_refuse(tmp_path: Path) -> None:
    done = td(tmp_path, "--model", "toy", "record", "--seed", "1", "--impl", BACKCLOCK,
              "-o", "b.trace")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    line = one_line(done)
    assert f"{BACKCLOCK} returned plan 2 that breaks the trace conventions" in line
    assert "plan record at -5 goes back in time (after 5)" in line
    assert "fix the implementation" in line and "nothing written" in line
    assert not (tmp_path / "b.trace").exists()
    # what record writes, show reads: the reference's trace of the same scenario
    good = td(tmp_path, "--model", "toy", "record", "--seed", "1", "-o", "a.trace")
    assert good.returncode == 0, good.stderr
    assert td(tmp_path, "--model", "toy", "show", "a.trace").returncode == 0


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_run_reports_the_same_record_as_the_implementations_finding(
    tmp_path: Path, jobs: str
) -> None:
    # the implementation against itself: byte-identical records, still no trace could hold them
    done = td(tmp_path, "--model", "toy", "run", "--seeds", "1", "-j", jobs,
              "--impl", BACKCLOCK, "--impl", BACKCLOCK)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "breaks the trace conventions" in done.stdout
    assert "plan record at -5 goes back in time" in done.stdout
    assert "not deterministic" not in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize(
    ("model", "words", "line"),
    [
        ("injects", "record 2, which it recorded, breaks the trace conventions: tick record at "
         "-1 goes back in time (after 0)", 12),
        ("makesup", "a decision record it made itself is refused: plan 1: malformed plan "
         "record", 22),
    ],
)  # fmt: skip
def test_a_bad_record_the_models_driver_makes_is_the_models_fault(
    plugins: Path, tmp_path: Path, jobs: str, model: str, words: str, line: int
) -> None:
    runs = ("run", "--seeds", "1", "-j", jobs, "--impl", "reference", "--impl", "fast")
    for args in (runs, ("record", "--seed", "1", "-o", "x.trace")):
        done = td(tmp_path, "--model", model, *args, path=(plugins,))
        assert done.returncode == 2, done.stdout + done.stderr
        message = one_line(done)
        assert f"the model {model!r} failed in drive: {words}" in message
        assert f"(hostile_drivers.py:{line}); fix the model's code" in message
        assert "not deterministic" not in done.stdout and "reference" not in message
        assert not (tmp_path / "x.trace").exists()


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize(
    ("impl", "when"),
    [
        ("tests.impls.patches_exit_on_import:AtImport",
         "in its import (module 'tests.impls.patches_exit_on_import')"),
        ("tests.impls.patches_exit:InInit", "in its constructor"),
    ],
)  # fmt: skip
def test_an_implementation_that_replaces_sys_exit_is_its_finding_without_a_traceback(
    tmp_path: Path, jobs: str, impl: str, when: str
) -> None:
    done = td(tmp_path, "run", "--seeds", "0", "-j", jobs, "--impl", "reference", "--impl", impl)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "internal error" not in done.stdout + done.stderr
    assert f"the implementation {impl} replaced sys.exit {when}" in done.stdout + done.stderr
    recorded = td(tmp_path, "record", "--seed", "0", "--impl", impl, "-o", "x.trace")
    assert recorded.returncode == 1, recorded.stdout + recorded.stderr
    assert f"the implementation {impl} replaced sys.exit {when}" in one_line(recorded)
