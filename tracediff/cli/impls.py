"""``tracediff impls``: every implementation tracediff can load, and how to name one."""

from __future__ import annotations

import json

from rich.table import Table

from tracediff.cli.app import emit_json, main, make_console
from tracediff.cli.params import json_to_option


@main.command("impls")
@json_to_option("The list")
def impls_command(json_path: str | None) -> None:
    """List built-in implementations, those installed as entry points (group
    tracediff.implementations), and how to name an external exec: one."""
    from tracediff.project.impls import listing

    rows = listing()
    if json_path is not None:
        data = [{"name": r.name, "kind": r.kind, "target": r.target, "note": r.note} for r in rows]
        emit_json(json_path, json.dumps(data, indent=2))
        return
    table = Table(title="implementations (--impl NAME)", header_style="bold")
    for column in ("name", "kind", "target", "note"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.name, row.kind, row.target, row.note)
    table.caption = "also: --impl package.module:attr, importable from PYTHONPATH"
    make_console().print(table)
