"""A trace's summary for ``tracediff show``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.markup import escape
from rich.table import Table

from tracediff.trace.schema import TraceChecker, checked_records


def labelled(value: Any, columns: dict[str, list[str]], name: str | None = None) -> Any:
    """A decoded record with its positional rows turned into objects, using the column
    names the trace header carries (``columns``): ``"round": ["winner", 1, ...]`` becomes
    ``"round": {"source": "winner", "kind": 1, ...}``, and a list of rows (``candidates``)
    a list of objects. A row longer or shorter than its columns is left as it is."""
    cols = columns.get(name) if name is not None else None
    if isinstance(value, dict):
        return {key: labelled(item, columns, str(key)) for key, item in value.items()}
    if cols is not None and isinstance(value, list):
        if value and all(isinstance(row, list) for row in value):
            return [_row(row, cols, columns) for row in value]
        return _row(value, cols, columns)
    return value


def _row(row: list[Any], cols: list[str], columns: dict[str, list[str]]) -> Any:
    if len(row) != len(cols):
        return row
    return {col: labelled(item, columns, col) for col, item in zip(cols, row, strict=True)}


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
