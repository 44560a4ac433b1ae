"""Rounds for the timeline picture, read from plan records by the header's column names.

Only what a picture needs is kept (a :class:`RoundMark` per plan). A trace whose schema has
no ``round`` row with these columns simply yields no marks: the harness compares any
implementation pair, and the picture is a bonus for those that record rounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracediff.compare.model import RoundMark

_NEEDED = ("source", "kind", "b_pad", "width", "lanes")


def round_mark(record: Mapping[str, Any], columns: Mapping[str, Sequence[str]]) -> RoundMark | None:
    """The plan record's round as a mark; None for other records or an unknown schema."""
    if record.get("t") != "plan":
        return None
    plan, now = record.get("plan"), record.get("now")
    if not isinstance(plan, int) or not isinstance(now, int):
        return None
    if "round" not in record:
        return None  # a model whose decisions are not rounds: no timeline
    row = record.get("round")
    if row is None:
        return RoundMark(plan, now, "", 0, 0, 0, 0, False)
    names = list(columns.get("round", ()))
    if not isinstance(row, list) or any(name not in names for name in _NEEDED):
        return None
    values = dict(zip(names, row, strict=False))
    lane_names = list(columns.get("lanes", ()))
    try:
        prefill = values.get("prefill_request", -1)
        prefixes: tuple[int, ...] = ()
        if "prefix" in lane_names:
            at = lane_names.index("prefix")
            prefixes = tuple(int(lane[at]) for lane in values["lanes"])
        return RoundMark(
            plan=plan,
            now=now,
            source=str(values["source"]),
            kind=int(values["kind"]),
            b_pad=int(values["b_pad"]),
            width=int(values["width"]),
            lanes=len(values["lanes"]),
            prefill=isinstance(prefill, int) and prefill >= 0,
            prefixes=prefixes,
        )
    except (TypeError, ValueError, IndexError, KeyError):  # a malformed round draws nothing
        return None
