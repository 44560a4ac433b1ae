"""A reference that sums a round's expected tokens E over the cohort in reverse order.

Same decisions, different float grouping: E (and what is computed from it) moves by a few
ULPs, so the first divergence is a *value* divergence.
"""

from __future__ import annotations

from typing import Any

from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler


class ReversedSumScheduler(ReferenceScheduler):
    name = "reversed-sum"

    def evaluate(self, *args: Any, **kwargs: Any) -> Candidate:
        candidate = super().evaluate(*args, **kwargs)
        prefill = kwargs.get("prefill", args[5] if len(args) > 5 else None)
        now = kwargs.get("now", args[6] if len(args) > 6 else 0)
        values = [row[1] for row in candidate.lane_values]
        expected = F.expected_tokens(list(reversed(values)))
        bonus = F.prefill_bonus(self.params, now - prefill.spec.arrival_us) if prefill else 0.0
        candidate.expected = expected
        candidate.value = F.candidate_value(expected, bonus, candidate.duration)
        return candidate
