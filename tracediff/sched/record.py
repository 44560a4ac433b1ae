"""The plan record: the one shape every implementation returns from ``plan()``.

Records are plain dicts whose keys are in ``PLAN_KEYS`` order; nested rows are lists in
the column orders below. The driver encodes them as they are, so building them in this
order is what makes two implementations' bytes comparable. ``docs/trace-format.md``
documents every field.
"""

from __future__ import annotations

from typing import Any

PLAN_KEYS = (
    "t",
    "plan",
    "now",
    "eligible",
    "prefill",
    "credit_before",
    "candidates",
    "pruned",
    "winner",
    "probes",
    "probe",
    "refresh",
    "credit_after",
    "round",
    "lane_values",
)
ELIGIBLE_COLUMNS = ("request", "slot", "cap", "fixed_width", "alloc", "last_served", "curve")
CANDIDATE_COLUMNS = (
    "id",
    "kind",
    "cohort",
    "prefill",
    "bound",
    "b_pad",
    "width",
    "prefixes",
    "expected",
    "duration",
    "value",
    "budget",
)
PRUNED_COLUMNS = ("id", "by")
PROBE_COLUMNS = (
    "position",
    "request",
    "depth",
    "trials",
    "gain",
    "expected",
    "duration",
    "cost",
)
ROUND_COLUMNS = (
    "source",
    "kind",
    "b_pad",
    "width",
    "prefill_request",
    "prefill_tokens",
    "lanes",
    "expected",
    "duration",
)
ROUND_LANE_COLUMNS = ("request", "slot", "prefix", "alloc")
LANE_VALUE_COLUMNS = ("request", "expected", "rate", "next_progress")

COLUMNS: dict[str, tuple[str, ...]] = {
    "eligible": ELIGIBLE_COLUMNS,
    "candidates": CANDIDATE_COLUMNS,
    "pruned": PRUNED_COLUMNS,
    "probes": PROBE_COLUMNS,
    "round": ROUND_COLUMNS,
    "lanes": ROUND_LANE_COLUMNS,
    "lane_values": LANE_VALUE_COLUMNS,
}

SOURCE_WINNER, SOURCE_PROBE, SOURCE_REFRESH = "winner", "probe", "refresh"


def plan_record(
    *,
    plan: int,
    now: int,
    eligible: list[list[Any]],
    prefill: int,
    credit_before: float,
    candidates: list[list[Any]],
    pruned: list[list[int]],
    winner: int,
    probes: list[list[Any]],
    probe: int,
    refresh: int,
    credit_after: float,
    round_: list[Any] | None,
    lane_values: list[list[Any]],
) -> dict[str, Any]:
    """Build a plan record with its keys in schema order."""
    return {
        "t": "plan",
        "plan": plan,
        "now": now,
        "eligible": eligible,
        "prefill": prefill,
        "credit_before": credit_before,
        "candidates": candidates,
        "pruned": pruned,
        "winner": winner,
        "probes": probes,
        "probe": probe,
        "refresh": refresh,
        "credit_after": credit_after,
        "round": round_,
        "lane_values": lane_values,
    }


def empty_plan_record(
    *, plan: int, now: int, eligible: list[list[Any]], credit: float
) -> dict[str, Any]:
    """A plan call that chooses nothing: no lane eligible and no prefill row waiting."""
    return plan_record(
        plan=plan,
        now=now,
        eligible=eligible,
        prefill=-1,
        credit_before=credit,
        candidates=[],
        pruned=[],
        winner=-1,
        probes=[],
        probe=-1,
        refresh=-1,
        credit_after=credit,
        round_=None,
        lane_values=[],
    )
