"""Small, purpose-built references that each diverge in one *kind* (docs/reports.md), or
that fail in the ways the explanation must see through.

==========================  ===========================================================
class                       what differs from the reference
==========================  ===========================================================
TypeScheduler               ``credit_before`` written as an int when it is whole (0 vs 0.0)
ClampScheduler              ``credit_after`` without its clamp at plan ``AT``: off by 0.5
DominatorScheduler          each pruned row names the dominator one id too high
DivergeThenRaiseScheduler   ``credit_after`` off at plan ``AT``, then raises at ``RAISE_AT``
CompleteRaisesScheduler     raises in ``complete()`` at a completion that finishes a
                            request, or at the completion of plan ``AT`` + seed % 4
==========================  ===========================================================

Decisions (rounds, probes) are the reference's in all of them: the records differ only in
what they write, so the first differing record says exactly one thing.
"""

from __future__ import annotations

from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.record import packed_record, rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler

AT = 2  # the plan whose record (or completion) is spoiled
RAISE_AT = 6  # DivergeThenRaiseScheduler raises here, after its divergence at AT


class TypeScheduler(ReferenceScheduler):
    name = "type"

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        credit = record["credit_before"]
        if isinstance(credit, float) and credit.is_integer():
            record["credit_before"] = int(credit)  # the bug: 0 where the schema has 0.0
        return record


class ClampScheduler(ReferenceScheduler):
    name = "clamp"

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        if record["plan"] == AT:
            record["credit_after"] = record["credit_after"] + 0.5  # the bug: no clamp
        return record


class DominatorScheduler(ReferenceScheduler):
    name = "dominator"

    def plan(self, now: int) -> dict[str, Any]:
        record = rows_view(super().plan(now))  # the typed tables as rows, to edit
        record["pruned"] = [[pruned, by + 1] for pruned, by in record["pruned"]]
        return packed_record(record)


class DivergeThenRaiseScheduler(ClampScheduler):
    name = "diverge-then-raise"

    def plan(self, now: int) -> dict[str, Any]:
        if self.plan_number + 1 == RAISE_AT:
            raise RuntimeError(f"deliberate failure at plan {RAISE_AT}")
        return super().plan(now)


class CompleteRaisesScheduler(ReferenceScheduler):
    """One bug raising at several places: what the reference records next (a retirement,
    an arrival, a plan, nothing) varies with the scenario; the cause does not."""

    name = "complete-raises"

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.fail_at = AT + scenario.seed % 4

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        finishing = any(lane[4] for lane in event["lanes"])
        if event["round"] == self.fail_at or finishing:
            raise KeyError(f"deliberate failure at the completion of plan {event['round']}")
        return super().complete(event, now)
