"""A reference that raises at plan ``RAISE_AT``: an implementation error is a finding."""

from __future__ import annotations

from typing import Any

from tracediff.models.specdec.sched.reference import ReferenceScheduler

RAISE_AT = 5


class RaisingScheduler(ReferenceScheduler):
    name = "raises"

    def plan(self, now: int) -> dict[str, Any]:
        if self.plan_number + 1 == RAISE_AT:
            raise RuntimeError(f"deliberate failure at plan {RAISE_AT}")
        return super().plan(now)
