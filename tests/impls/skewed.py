"""A reference that returns a different decision from plan number ``SKEW_AT`` on."""

from __future__ import annotations

from typing import Any

from tracediff.models.specdec.sched.reference import ReferenceScheduler

SKEW_AT = 3


class SkewedScheduler(ReferenceScheduler):
    name = "skewed"

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        if record["plan"] == SKEW_AT:
            record["credit_after"] = record["credit_after"] + 1.0
        return record
