"""The reference, refusing to run in a process that imported the command line: a worker
started from tracediff's console script must not load click, rich or the commands (they
cost each worker, or the fork server they are forked from, their import time)."""

from __future__ import annotations

import sys

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler

COMMAND_LINE = ("click", "rich", "tracediff.cli.app")


class NoCommandLineScheduler(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        loaded = [name for name in COMMAND_LINE if name in sys.modules]
        if loaded:
            raise RuntimeError(f"this worker imported the command line: {loaded}")
        super().__init__(scenario)
