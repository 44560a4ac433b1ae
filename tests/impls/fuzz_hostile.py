"""References that turn on tracediff's own process on any scenario of two or more requests,
at their second plan (what a fuzz search finds at once): tests/test_reliability_round4.py
checks that fuzz explains what it found in isolated workers under its time limit."""

from __future__ import annotations

import os
import signal
from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler


class _OnTwoRequests(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self._armed = len(scenario.requests) >= 2

    def plan(self, now: int) -> Any:
        record = super().plan(now)
        if self._armed and record["plan"] == 2:
            self.misbehave()
        return record

    def misbehave(self) -> None:
        raise NotImplementedError


class KillsItsProcess(_OnTwoRequests):
    """SIGKILL to the process it runs in: in tracediff's own, the end of tracediff."""

    def misbehave(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class Hangs(_OnTwoRequests):
    """Loops forever (Python bytecode: a time limit stops it)."""

    def misbehave(self) -> None:
        while True:
            pass
