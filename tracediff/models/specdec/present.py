"""How a person reads a speculative-decoding record or scenario (``tracediff show``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tracediff.models.specdec.schema import COMPLETION_LANE_COLUMNS


def labelled(record: Any, columns: Mapping[str, Sequence[str]]) -> Any:
    """A record (tables as rows, as read from a trace) with every row an object keyed by
    its column names: a plan's tables (``candidates``, ``pruned``, ...) by the names the
    trace header carries (``columns``), its ``round`` and the round's ``lanes`` too, and a
    completion's ``lanes`` by the completion's lane columns. A row of another length than
    its columns (only a trace that failed its check could hold one) stays a list."""
    if not isinstance(record, dict):
        return record
    out = dict(record)
    if record.get("t") == "plan":
        for name, value in record.items():
            names = columns.get(name)
            if name in ("round", "lanes") or names is None or not isinstance(value, list):
                continue
            out[name] = [_row(row, names) for row in value]
        round_ = _row(record.get("round"), columns.get("round"))
        if isinstance(round_, dict) and isinstance(round_.get("lanes"), list):
            round_["lanes"] = [_row(lane, columns.get("lanes")) for lane in round_["lanes"]]
        out["round"] = round_
    elif record.get("t") == "completion" and isinstance(record.get("lanes"), list):
        out["lanes"] = [_row(lane, COMPLETION_LANE_COLUMNS) for lane in record["lanes"]]
    return out


def _row(row: Any, names: Sequence[str] | None) -> Any:
    if names is None or not isinstance(row, list) or len(row) != len(names):
        return row
    return dict(zip(names, row, strict=True))


def scenario_rows(scenario: Any) -> list[tuple[str, str]]:
    """The scenario's lines in a trace summary."""
    params = scenario.params
    return [
        ("requests", str(len(scenario.requests))),
        (
            "allocation / graphs / queue",
            f"{params.allocation} / {'mixed' if params.ragged else 'rect'} / {params.queue_depth}",
        ),
    ]


def decision_kind(record: Mapping[str, Any]) -> str:
    """What kind of decision a plan record made, for the summary's counts: its round's
    source (winner, probe, refresh), or none."""
    round_ = record.get("round")
    return "none" if round_ is None else str(round_[0])


def decision_summary(record: Mapping[str, Any]) -> str:
    """A plan record in one line: its tables' sizes, the winner and the round it runs."""
    round_ = record.get("round")
    if round_ is None:
        decided = "no round"
    else:
        lanes = " ".join(f"{lane[0]}:{lane[2]}" for lane in round_[6]) if len(round_) > 6 else ""
        decided = (
            f"{round_[0]} round, kind {round_[1]}, b_pad {round_[2]}, width {round_[3]}, "
            f"lanes (request:prefix) {lanes or '-'}"
        )
    return (
        f"plan {record.get('plan')} at {record.get('now')} µs: "
        f"{len(record.get('candidates', []))} candidates, "
        f"{len(record.get('pruned', []))} pruned, winner {record.get('winner')}, {decided}"
    )
