"""``tracediff show``: a trace inspected: its summary, one plan, or JSON lines."""

from __future__ import annotations

import json
import sys

import click

from tracediff.cli.app import main, make_console
from tracediff.errors import UsageError


@main.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option(
    "--plan",
    "plan_number",
    type=int,
    default=None,
    help="Show this plan record as JSON, every field by name.",
)
@click.option(
    "--jsonl",
    is_flag=True,
    help="Every record as one JSON line, each row keyed by its column names (for jq).",
)
def show(trace: str, plan_number: int | None, jsonl: bool) -> None:
    """Inspect a trace: summary, one plan, or JSON lines."""
    from tracediff.trace import TraceReader
    from tracediff.trace.checked import checked_records, trace_checker, trace_model

    reader = TraceReader(trace)
    trace_checker(reader)  # a file that is no trace of its model fails first
    columns = reader.header.get("columns")
    names: dict[str, list[str]] = columns if isinstance(columns, dict) else {}
    labelled = trace_model(reader).labelled
    if jsonl:
        # every row an object keyed by its column names, so `jq '.candidates[].value'` works
        out = sys.stdout
        out.write(json.dumps({"t": "header", **reader.header}) + "\n")
        for checked in checked_records(reader):
            out.write(json.dumps(labelled(checked.record, names)) + "\n")
        return
    if plan_number is not None:
        for checked in checked_records(reader):
            record_ = checked.record
            if record_["t"] == "plan" and record_["plan"] == plan_number:
                click.echo(json.dumps(labelled(record_, names), indent=1))
                return
        raise UsageError(f"{trace} has no plan {plan_number}")
    from tracediff.report.show import trace_summary_renderable

    make_console().print(trace_summary_renderable(trace, reader))
