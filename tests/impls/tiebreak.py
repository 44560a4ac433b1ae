"""A reference whose winner rule prefers the larger duration among equal values.

Only a tie-break changes, so most plans agree and the first divergence is a decision.
"""

from __future__ import annotations

from tracediff.sched import reference
from tracediff.sched.reference import Candidate, ReferenceScheduler


class _LateCandidate(Candidate):
    def key(self) -> tuple[float, int, int, int, int, int, bool, int]:
        value, duration, cohort, b_pad, width, kind, prefill, cid = super().key()
        return (value, -duration, cohort, b_pad, width, kind, prefill, -cid)


class TieBreakScheduler(ReferenceScheduler):
    name = "tiebreak"

    def evaluate(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        candidate = super().evaluate(*args, **kwargs)
        candidate.__class__ = _LateCandidate
        return candidate


assert reference.Candidate is Candidate
