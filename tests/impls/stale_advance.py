"""A reference whose pending advance forgets the rounds of one kind (ragged rounds).

A request's remaining budget subtracts what its in-flight rounds will advance it by; this
implementation only counts rect rounds, so near a request's end it offers a larger draft cap
than it may. The first divergence is a *decision* (a lane's cap, then its prefix).
"""

from __future__ import annotations

from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.core import RequestState
from tracediff.models.specdec.sched.reference import ReferenceScheduler


class StaleAdvanceScheduler(ReferenceScheduler):
    name = "stale-advance"

    def pending_advance(self, state: RequestState) -> int:
        total = 0
        for round_ in self.submitted.values():
            if round_.kind == F.RAGGED:
                continue  # the bug: ragged rounds are not counted
            for lane in round_.lanes:
                if lane.request == state.spec.id:
                    total += 1 + lane.prefix
        return total
