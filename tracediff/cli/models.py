"""``tracediff models``: the decision models tracediff can test, and which one is in effect."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from tracediff.cli.app import emit_json, main, make_console
from tracediff.cli.params import json_to_option


@main.command("models")
@json_to_option("The list")
def models_command(json_path: str | None) -> None:
    """List the decision models (entry point group tracediff.models) and the one in
    effect here (--model, $TRACEDIFF_MODEL, [tool.tracediff] model, else specdec)."""
    from tracediff import model as models
    from tracediff.cli.settings import project

    chosen = project()
    rows: list[dict[str, Any]] = []
    for name in models.names():
        try:
            loaded = models.get(name)
            title, note = loaded.title, ""
            impls = ", ".join(loaded.builtin_impls)
        except Exception as exc:  # noqa: BLE001 - one broken plugin must not hide the rest
            title, note, impls = "", f"cannot load: {exc}", ""
        rows.append(
            {
                "name": name,
                "in_effect": name == chosen.model,
                "title": title,
                "impls": impls,
                "note": note,
            }
        )
    if json_path is not None:
        emit_json(json_path, json.dumps(rows, indent=2))
        return
    table = Table(title="decision models (--model NAME)", header_style="bold")
    for column in ("name", "", "what it decides", "built-in implementations", "note"):
        table.add_column(column)
    for row in rows:
        mark = "in effect" if row["in_effect"] else ""
        table.add_row(row["name"], mark, row["title"], row["impls"], row["note"])
    table.caption = f"in effect: {chosen.model} ({chosen.model_origin})"
    make_console().print(table)
