"""The speculative-decoding scheduler's state (``SchedulerCore.state()``) as rich renderables,
for ``replay --state`` (the model's ``present_state``).

The state is a plain JSON-friendly map; this module only lays it out: the scheduler-wide
values (plan counter, acceptance credit), the requests with their lanes, pending counts and
survival curves, the rounds in flight, and the packed round table. Keys it does not know are
listed at the end as they are, so an implementation that reports more is still shown whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

KNOWN = ("plan", "credit", "requests", "submitted", "table")
CURVE_DIGITS = 3


def requests_table(requests: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title=f"requests ({len(requests)})", header_style="bold")
    columns = (
        ("id", "id"),
        ("phase", "phase"),
        ("slot", "slot"),
        ("gen", "generated"),
        ("filled", "prefilled"),
        ("pend", "pending_count"),
        ("adv", "pending_advance"),
        ("served", "last_served"),
        ("offer", "offer"),
    )
    table.caption = (
        "gen: tokens generated; filled: prompt tokens prefilled; pend, adv: rounds in "
        "flight and the tokens they can still add; served: the plan that last served it"
    )
    for name, _key in columns:
        table.add_column(name, justify="left" if name == "phase" else "right")
    for r in requests:
        table.add_row(*(str(r.get(key)) for _name, key in columns))
    return table


def curves_table(requests: Sequence[Mapping[str, Any]]) -> Table:
    """Per request: the survival curve s_1..s_7 and the counters accepts/trials behind it."""
    table = Table(title="acceptance: survival s_k, accepts/trials", header_style="bold")
    table.add_column("id", justify="right")
    depths = max((len(r.get("curve") or ()) for r in requests), default=0)
    for k in range(1, depths + 1):
        table.add_column(f"k={k}", justify="right")
    for r in requests:
        curve = list(r.get("curve") or ())
        accepts, trials = list(r.get("accepts") or ()), list(r.get("trials") or ())
        cells = []
        for k in range(depths):
            value = curve[k] if k < len(curve) else None
            shown = f"{value:.{CURVE_DIGITS}f}" if isinstance(value, float) else str(value)
            if k < len(accepts) and k < len(trials):
                shown += f" {accepts[k]}/{trials[k]}"
            cells.append(shown)
        table.add_row(str(r.get("id")), *cells)
    return table


def submitted_table(rounds: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title=f"rounds in flight ({len(rounds)})", header_style="bold")
    for name in ("plan", "kind", "b_pad", "width", "lanes (request:prefix)", "duration µs"):
        table.add_column(name, justify="left" if name.startswith(("kind", "lanes")) else "right")
    for r in rounds:
        lanes = " ".join(f"{lane[0]}:{lane[1]}" for lane in r.get("lanes", []))
        table.add_row(
            str(r.get("plan")),
            str(r.get("kind")),
            str(r.get("b_pad")),
            str(r.get("width")),
            lanes or "(prefill only)",
            str(r.get("duration")),
        )
    return table


def round_table(rows: Sequence[Sequence[Any]]) -> Table:
    table = Table(title=f"packed round table, observed shapes ({len(rows)})", header_style="bold")
    for name in ("kind", "b_pad", "width", "estimate µs", "observed at µs"):
        table.add_column(name, justify="left" if name == "kind" else "right")
    for row in rows:
        table.add_row(*(str(v) for v in row))
    return table


def state_renderable(state: Mapping[str, Any], title: str = "scheduler state") -> RenderableType:
    """The whole state: header line, requests, rounds in flight, round table, extras."""
    credit = state.get("credit")
    credit_text = f"{credit:.6g}" if isinstance(credit, float) else str(credit)
    parts: list[RenderableType] = [
        Text(
            f"{title}: plan counter {state.get('plan')}, acceptance credit {credit_text}",
            style="bold",
        )
    ]
    requests = state.get("requests")
    if isinstance(requests, list):
        parts.append(requests_table(requests))
        if any(isinstance(r, Mapping) and r.get("curve") for r in requests):
            parts.append(curves_table(requests))
    submitted = state.get("submitted")
    if isinstance(submitted, list):
        parts.append(submitted_table(submitted))
    table = state.get("table")
    if isinstance(table, list):
        parts.append(round_table(table))
    for key in state:
        if key not in KNOWN:
            parts.append(Text(f"{key}: {state[key]!r}"))
    return Group(*parts)
