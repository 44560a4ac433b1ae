"""A trace's summary for ``tracediff show``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from tracediff.models.specdec.schema import COMPLETION_LANE_COLUMNS, TraceChecker, checked_records


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


def trace_summary_renderable(path: str, reader: Any) -> Table:
    """Counts by record type and round source, clock, digest, provenance; every record is
    checked against the trace schema on the way (a TraceFormatError names the bad one)."""
    checker = TraceChecker(reader.header, reader.name)
    scenario = checker.scenario
    counts: Counter[str] = Counter()
    rounds: Counter[str] = Counter()
    last_now = 0
    for checked in checked_records(reader, checker):
        record = checked.record
        kind = str(record["t"])
        counts[kind] += 1
        last_now = max(last_now, record["now"])
        if kind == "plan":
            round_ = record.get("round")
            rounds["none" if round_ is None else str(round_[0])] += 1
    # The path is a row, not the title: a title wraps at the table's width and cuts it.
    table = Table(show_header=False)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("file", escape(path))
    table.add_row("scenario", escape(f"{scenario.profile}:{scenario.seed}"))
    table.add_row("requests", str(len(scenario.requests)))
    params = scenario.params
    table.add_row(
        "allocation / graphs / queue",
        f"{params.allocation} / {'mixed' if params.ragged else 'rect'} / {params.queue_depth}",
    )
    for kind in sorted(counts):
        table.add_row(f"{kind} records", f"{counts[kind]:,}")
    for source in sorted(rounds):
        table.add_row(f"rounds: {source}", f"{rounds[source]:,}")
    live = reader.header.get("live")
    if isinstance(live, dict):
        # A live engine's trace: the clock was real, and the run depended on these.
        table.add_row("served time (live)", f"{last_now / 1e6:.3f} s")
        table.add_row(
            "live engine",
            f"{live.get('device')} {live.get('dtype')}, torch {live.get('torch')}, "
            f"deterministic {live.get('deterministic_algorithms')}",
        )
    else:
        table.add_row("simulated time", f"{last_now / 1e6:.3f} s")
    table.add_row("body digest", reader.verify())
    provenance = reader.provenance or {}
    for key in sorted(provenance, key=str):
        table.add_row(escape(f"provenance: {key}"), escape(str(provenance[key])))
    return table
