"""A reference that reports every lane's service rate one ULP higher.

Its decisions are the reference's (the rate is reported, never decided on), so it passes
``--equivalence decisions --ulps 1`` and fails byte identity and ``--ulps 0``.
"""

from __future__ import annotations

import math
from typing import Any

from tests.impls.slot_tiebreak import SlotTieBreakScheduler
from tracediff.models.specdec.sched.record import packed_record, rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler


def _one_ulp_higher(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every lane's rate one ULP higher (its typed tables unpacked to
    rows, edited, packed again)."""
    record = rows_view(record)
    for row in record["lane_values"]:
        row[2] = math.nextafter(row[2], math.inf)
    return packed_record(record)


class OneUlpScheduler(ReferenceScheduler):
    name = "one-ulp"

    def plan(self, now: int) -> dict[str, Any]:
        return _one_ulp_higher(super().plan(now))


class OneUlpSlotTieBreakScheduler(SlotTieBreakScheduler):
    """The rates one ULP higher *and* slot_tiebreak's changed decision (on quick seed 13)."""

    name = "one-ulp-slot-tiebreak"

    def plan(self, now: int) -> dict[str, Any]:
        return _one_ulp_higher(super().plan(now))
