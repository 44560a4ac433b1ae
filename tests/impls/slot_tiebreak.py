"""A reference whose free-slot ranking breaks ties towards the *higher* slot.

The reference ranks a free slot (lane, depth) by higher survival, then shallower depth, then
the lower slot. Lanes with the same history have the same survival, so when the verification
budget binds the last tie-break decides which lane gets the draft: here the other one. The
first divergence is a *decision* (a lane's prefix).
"""

from __future__ import annotations

from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.core import Lane
from tracediff.models.specdec.sched.reference import ReferenceScheduler


class SlotTieBreakScheduler(ReferenceScheduler):
    name = "slot-tiebreak"

    def allocate(
        self,
        cohort: list[Lane],
        curves: list[list[float]],
        bound: int,
        budget: int,
        forced: int = -1,
        forced_depth: int = 0,
    ) -> list[int]:
        left = budget - len(cohort)
        prefixes = [0] * len(cohort)
        for position, lane in enumerate(cohort):
            if lane.fixed_width >= 0:
                take = min(lane.fixed_width, lane.cap, bound)
            elif position == forced:
                take = forced_depth
            else:
                continue
            take = min(take, left)
            prefixes[position] = take
            left -= take
        ranking = []
        for position, lane in enumerate(cohort):
            if lane.fixed_width >= 0 or position == forced:
                continue
            for depth in range(1, min(bound, lane.cap) + 1):
                survival, depth_, slot = F.slot_rank(curves[position][depth - 1], depth, lane.slot)
                ranking.append(((survival, depth_, -slot), position))  # the changed tie-break
        ranking.sort()
        for _rank, position in ranking[: max(left, 0)]:
            prefixes[position] += 1
        return prefixes
