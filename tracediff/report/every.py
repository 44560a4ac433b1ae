"""``tracediff diff --all``: every differing field of two traces, as a table."""

from __future__ import annotations

from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.report.describe import plural, short
from tracediff.running.every_difference import AllDifferences

MAX_ROWS = 50  # fields listed; the rest are counted


def all_differences_renderable(found: AllDifferences, names: tuple[str, str]) -> RenderableType:
    a, b = found.records
    if found.identical:
        return Text(f"identical: {plural(a, 'record')} in each", style="bold green")
    head = Text(
        f"{found.differing:,} of {max(a, b):,} records differ (A {Path(names[0]).name}: "
        f"{a:,} records, B {Path(names[1]).name}: {b:,}); "
        f"{plural(len(found.groups), 'field')} differ",
        style="bold red",
    )
    table = Table(header_style="bold", title="every difference, by field")
    for column in ("field", "kind", "records", "first at", "A", "B"):
        table.add_column(column, overflow="fold")
    for group in found.groups[:MAX_ROWS]:
        first = group.examples[0] if group.examples else None
        where = "" if first is None else f"record {first.index}"
        if first is not None and first.plan is not None:
            where += f" (plan {first.plan})"
        table.add_row(
            Text(group.path),
            group.kind,
            f"{group.records:,}",
            where,
            Text(short(first.a) if first else ""),
            Text(short(first.b) if first else ""),
        )
    parts: list[RenderableType] = [head, table]
    if len(found.groups) > MAX_ROWS:
        parts.append(Text(f"... and {len(found.groups) - MAX_ROWS} more fields (--format json)"))
    if found.detailed < found.differing:
        parts.append(
            Text(
                f"fields compared in the first {found.detailed:,} differing records; the other "
                f"{found.differing - found.detailed:,} are counted only"
            )
        )
    return Group(*parts)
