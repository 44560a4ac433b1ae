"""An implementation's state (its ``state()``) as rich renderables, for ``replay --state``.

A model lays its own state out when it has a presenter (``DecisionModel.present_state``,
optional); otherwise :func:`generic_state` shows any plain JSON-friendly map in words that
belong to no model: the scalar fields on one line, each list of maps as a table whose
columns are the maps' keys, every other field as ``key: value``. :func:`state_pair_table`
puts two states side by side, field by field, in the path notation of the state diff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

MAX_TABLE_ROWS = 200  # a state's list is shown whole up to this many rows, then counted


def present_state(model: Any, state: Mapping[str, Any], title: str) -> RenderableType:
    """``state`` as ``model`` lays it out, else as :func:`generic_state` does."""
    presenter = getattr(model, "present_state", None)
    if callable(presenter):
        shown: RenderableType = presenter(state, title)
        return shown
    return generic_state(state, title)


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _shown(value: Any) -> str:
    from tracediff.report.describe import short

    return f"{value:.6g}" if isinstance(value, float) else short(value, 60)


def generic_state(state: Mapping[str, Any], title: str = "state") -> RenderableType:
    """Any state map: scalars on the title line, lists of maps as tables, the rest as is."""
    scalars = [f"{key} {_shown(value)}" for key, value in state.items() if _scalar(value)]
    parts: list[RenderableType] = [
        Text(f"{title}: {', '.join(scalars)}" if scalars else title, style="bold")
    ]
    for key, value in state.items():
        if _scalar(value):
            continue
        if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            parts.append(_rows_table(str(key), value))
        else:
            parts.append(Text(f"{key}: {_shown(value)}"))
    return Group(*parts)


def _rows_table(name: str, rows: list[Mapping[str, Any]]) -> Table:
    columns = list(dict.fromkeys(k for row in rows for k in row))  # first seen, first shown
    table = Table(title=f"{name} ({len(rows)})", header_style="bold")
    for column in columns:
        table.add_column(str(column), overflow="fold")
    for row in rows[:MAX_TABLE_ROWS]:
        table.add_row(*(Text(_shown(row.get(c))) for c in columns))
    if len(rows) > MAX_TABLE_ROWS:
        table.caption = f"the first {MAX_TABLE_ROWS} of {len(rows)} rows"
    return table


def state_pair_table(
    name_a: str, name_b: str, a: Mapping[str, Any] | None, b: Mapping[str, Any] | None
) -> Table:
    """Two states side by side, one row per field (the path notation of the state diff,
    ``requests[id=3].pending_advance``), rows that differ marked ``≠`` and in bold."""
    from tracediff.report.describe import short, short_name
    from tracediff.running.state import flatten_state

    rows_a = dict(flatten_state(a)) if a is not None else {}
    rows_b = dict(flatten_state(b)) if b is not None else {}
    table = Table(title="states side by side", header_style="bold", title_justify="left")
    table.add_column("")
    table.add_column("field", overflow="fold")
    table.add_column(f"A: {short_name(name_a)}", overflow="fold")
    table.add_column(f"B: {short_name(name_b)}", overflow="fold")
    for field in [*rows_a, *(f for f in rows_b if f not in rows_a)]:
        left, right = rows_a.get(field, _ABSENT), rows_b.get(field, _ABSENT)
        same = left is not _ABSENT and right is not _ABSENT and short(left) == short(right)
        style = Style() if same else Style(bold=True, color="red")
        table.add_row(
            "" if same else "≠",
            Text(field),  # Text: "[id=3]" is not markup
            Text("—" if left is _ABSENT else short(left, 60)),
            Text("≡" if same else ("—" if right is _ABSENT else short(right, 60))),
            style=style,
        )
    return table


_ABSENT = object()
