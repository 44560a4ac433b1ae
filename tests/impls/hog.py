"""A reference that eats memory on one scenario (seed ``HOG_SEED``, plan ``HOG_AT``).

It refuses to start eating unless an address-space limit is in place (``--memory-limit``),
so that running it by mistake cannot exhaust the machine: without one it raises.
"""

from __future__ import annotations

import resource
from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler

HOG_SEED = 2
HOG_AT = 2
CHUNK = 32 * 1024 * 1024


class HogScheduler(ReferenceScheduler):
    name = "hog"

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self._hogs = scenario.seed == HOG_SEED

    def plan(self, now: int) -> dict[str, Any]:
        if self._hogs and self.plan_number + 1 == HOG_AT:
            self.eat()
        return super().plan(now)

    def eat(self) -> None:
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            raise RuntimeError("HogScheduler refuses to eat memory without a --memory-limit")
        chunks = []
        while True:  # until MemoryError: every chunk is touched, so it is really used
            chunks.append(bytearray(CHUNK))
