"""A reference whose winner rule prefers the *longer* duration among equal values.

The [fixed] rule breaks a value tie by the shorter duration first. Only the tie-break
changes, so every plan without an exact value tie agrees and the first divergence is a
decision: the recorded winner. Quick seeds with exact acceptance and a cost proportional to
the padded tokens make such ties (whole expected tokens over whole durations).
"""

from __future__ import annotations

from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler


class TieBreakScheduler(ReferenceScheduler):
    name = "tiebreak"

    def best(self, candidates: list[Candidate]) -> Candidate:
        def key(c: Candidate) -> tuple[object, ...]:
            return (-c.value, -c.duration, -c.cohort, c.b_pad, c.width, c.kind, c.prefill, c.id)

        return min(candidates, key=key)
