"""A trace's summary for ``tracediff show``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.markup import escape
from rich.table import Table

from tracediff.model import DECISION
from tracediff.trace import provenance
from tracediff.trace.checked import checked_records, trace_checker, trace_model


def trace_summary_renderable(path: str, reader: Any) -> Table:
    """Counts by record type and decision kind, clock, digest, provenance; every record is
    checked against the trace schema on the way (a TraceFormatError names the bad one).
    The clock is shown in seconds when the model says how long its tick is (its optional
    ``clock_seconds``: specdec's clock counts microseconds), else as the number it is."""
    model = trace_model(reader)
    checker = trace_checker(reader)
    scenario = checker.scenario
    counts: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    last_now = 0
    for checked in checked_records(reader, checker):
        record = checked.record
        kind = str(record["t"])
        counts[kind] += 1
        last_now = max(last_now, record["now"])
        if kind == DECISION:
            kinds[model.decision_kind(record)] += 1
    # The path is a row, not the title: a title wraps at the table's width and cuts it.
    table = Table(show_header=False)
    table.add_column("field", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_row("file", escape(path))
    table.add_row("scenario", escape(f"{scenario.profile}:{scenario.seed}"))
    for field, value in model.scenario_rows(scenario):
        table.add_row(escape(field), escape(value))
    for kind in sorted(counts):
        table.add_row(f"{kind} records", f"{counts[kind]:,}")
    for kind in sorted(kinds):
        table.add_row(f"decisions: {kind}", f"{kinds[kind]:,}")
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
        tick = getattr(model, "clock_seconds", None)
        if isinstance(tick, (int, float)) and tick > 0:
            table.add_row("simulated time", f"{last_now * tick:.3f} s")
        else:
            table.add_row("clock at the end", f"{last_now:,}")
    table.add_row("body digest", reader.verify())
    for key, value in provenance.rows(reader.provenance):  # bounded: the file's writer chose
        table.add_row(escape(f"provenance: {key}"), escape(value))
    return table
