"""Realistic one-line bugs in the rules that a green run must not let through.

Each is the reference with one clause changed, the way an optimisation gets it wrong: a
tie-break reordered or dropped, an inequality off by one. ``tests/test_rule_coverage.py``
checks that the quick profile catches every one of them.
"""

from __future__ import annotations

from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler


class SwappedTieBreakScheduler(ReferenceScheduler):
    """Winner ties broken by the larger cohort before the shorter duration."""

    name = "swapped-tiebreak"

    def best(self, candidates: list[Candidate]) -> Candidate:
        def key(c: Candidate) -> tuple[object, ...]:
            return (-c.value, -c.cohort, c.duration, c.b_pad, c.width, c.kind, c.prefill, c.id)

        return min(candidates, key=key)


class FirstAtBestValueScheduler(ReferenceScheduler):
    """No tie-breaks at all: the first candidate at the best value wins."""

    name = "first-at-best"

    def best(self, candidates: list[Candidate]) -> Candidate:
        return min(candidates, key=lambda c: (-c.value, c.id))


class WidthBeforeDurationScheduler(ReferenceScheduler):
    """The narrower shape wins a value tie before the shorter one."""

    name = "width-first"

    def best(self, candidates: list[Candidate]) -> Candidate:
        return min(
            candidates,
            key=lambda c: (-c.value, c.width, c.duration, -c.cohort, c.kind, c.prefill, c.id),
        )


class FreshAtPeriodScheduler(ReferenceScheduler):
    """A shape observed exactly ``refresh_period`` ago counts as fresh (``<=`` for ``<``)."""

    name = "fresh-at-period"

    def is_fresh(self, candidate: Candidate, now: int) -> bool:
        observed = self.table_observed(candidate.kind, candidate.b_pad, candidate.width)
        return observed >= 0 and now - observed <= self.params.refresh_period_us


class ProbeTrialsOffByOneScheduler(ReferenceScheduler):
    """Probes a depth with exactly ``probe_min_trials`` trials (``<=`` for ``<``)."""

    name = "probe-trials"

    def __init__(self, scenario):  # type: ignore[no-untyped-def]
        super().__init__(scenario)
        self.params = type(self.params)(
            **{**self.params.__dict__, "probe_min_trials": self.params.probe_min_trials + 1}
        )


class PruneKeepsEqualScheduler(ReferenceScheduler):
    """Padding pruning needs a strictly higher E (equal E at a shorter duration survives)."""

    name = "prune-strict"

    def prune(self, candidates: list[Candidate]) -> dict[int, int]:
        pruned = super().prune(candidates)
        return {
            x: y
            for x, y in pruned.items()
            if candidates[y].expected > candidates[x].expected
            or candidates[y].duration == candidates[x].duration
        }


class TableTruncatesScheduler(ReferenceScheduler):
    """The table update rounds a falling estimate toward zero instead of down."""

    name = "table-trunc"

    def complete(self, event, now):  # type: ignore[no-untyped-def]
        submitted = self.submitted[event["round"]]
        key = (submitted.kind, submitted.b_pad, submitted.width)
        before = self.table.get(key)
        retired = super().complete(event, now)
        if before is not None and submitted.lanes:
            observed = event["observed_us"]
            if submitted.prefill_request >= 0:
                observed -= F.prefill_cost(self.params, submitted.prefill_tokens)
            difference = max(observed, 1) - before[0]
            self.table[key][0] = before[0] + int(difference / 4)
        return retired
