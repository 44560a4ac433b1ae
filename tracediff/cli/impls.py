"""``tracediff impls``: every implementation tracediff can load, and how to name one."""

from __future__ import annotations

import json

import click
from rich.table import Table

from tracediff.cli.app import _console, main


@main.command("impls")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def impls_command(as_json: bool) -> None:
    """List built-in implementations, those installed as entry points (group
    tracediff.implementations), and how to name an external exec: one."""
    from tracediff.impls import listing

    rows = listing()
    if as_json:
        data = [{"name": r.name, "kind": r.kind, "target": r.target, "note": r.note} for r in rows]
        click.echo(json.dumps(data, indent=2))
        return
    table = Table(title="implementations (--impl NAME)", header_style="bold")
    for column in ("name", "kind", "target", "note"):
        table.add_column(column)
    for row in rows:
        table.add_row(row.name, row.kind, row.target, row.note)
    table.caption = "also: --impl package.module:attr, importable from PYTHONPATH"
    _console().print(table)
