"""A reference whose process is killed (SIGKILL) the first time it starts seed ``DIE_SEED``
of a profile, as if a machine were lost: the scenario must run again on a fresh worker and
count once. A marker file remembers the first time (:func:`reset` removes them)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler

DIE_SEED = 2


def marker_dir() -> Path:
    """A fixed place (a worker's environment is its fork server's: a test cannot pass one),
    one per pytest-xdist worker: the tests of two workers reset their markers at their own
    times, and one removing the other's mid-run would kill a scenario's worker twice. The
    worker's id is in the environment its fork server and Dask cluster inherit."""
    session = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return Path(tempfile.gettempdir()) / f"tracediff-dies-once-{os.getuid()}-{session}"


def reset() -> None:
    shutil.rmtree(marker_dir(), ignore_errors=True)


class DiesOnceScheduler(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        if scenario.seed != DIE_SEED:
            return
        marker_dir().mkdir(exist_ok=True)
        try:
            os.close(os.open(marker_dir() / scenario.profile, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return  # killed once already: decide as the reference
        os.kill(os.getpid(), signal.SIGKILL)
