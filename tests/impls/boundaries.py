"""Bugs at the equality of a float comparison: only scenarios whose floats are exact see them.

Each is the reference with ``<=`` and ``<`` (or ``>=`` and ``>``) swapped in one comparison of
the [fixed] rules, where both sides are floats: with smooth random floats the two sides are
never equal, so every trace agrees. The quick profile's exact-floats seeds (108..125) make
them meet; ``tests/test_rule_coverage.py`` checks that quick catches both.
"""

from __future__ import annotations

from tracediff.models.specdec.sched.reference import ReferenceScheduler


class UnfundedAtCreditScheduler(ReferenceScheduler):
    """A probe that costs exactly the credit is not funded (``<`` where the spec has ``<=``)."""

    name = "unfunded-at-credit"

    def funded(self, cost: float) -> bool:
        return cost < self.credit


class StrictToleranceScheduler(ReferenceScheduler):
    """A stale candidate whose value gap is exactly the refresh tolerance is not run
    (``>`` where the spec has ``>=``)."""

    name = "strict-tolerance"

    def within_tolerance(self, value: float, winner_value: float) -> bool:
        return value > winner_value * (1.0 - self.params.refresh_tolerance)
