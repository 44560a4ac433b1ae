"""A trace's summary for ``tracediff show``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.table import Table


def trace_summary_renderable(path: str, reader: Any) -> Table:
    scenario = reader.header.get("scenario", {})
    counts: Counter[str] = Counter()
    rounds: Counter[str] = Counter()
    last_now = 0
    for record in reader.decoded_records():
        kind = str(record.get("t"))
        counts[kind] += 1
        last_now = max(last_now, int(record.get("now", 0)))
        if kind == "plan":
            round_ = record.get("round")
            rounds["none" if round_ is None else str(round_[0])] += 1
    table = Table(title=path, show_header=False)
    table.add_column("field")
    table.add_column("value")
    table.add_row("scenario", f"{scenario.get('profile')}:{scenario.get('seed')}")
    table.add_row("requests", str(len(scenario.get("requests", []))))
    params = scenario.get("params", {})
    table.add_row(
        "allocation / graphs / queue",
        f"{params.get('allocation')} / {'mixed' if params.get('ragged') else 'rect'} / "
        f"{params.get('queue_depth')}",
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
    for key in sorted(provenance):
        table.add_row(f"provenance: {key}", str(provenance[key]))
    return table
