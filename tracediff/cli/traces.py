"""``tracediff record``, ``diff`` and ``show``: one trace at a time."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from tracediff.cli.app import EXIT_FINDING, EXIT_OK, _console, _scenarios, main
from tracediff.errors import UsageError
from tracediff.impls import parse_impl


# -- record / diff / show ----------------------------------------------------------------------
@main.command()
@click.option("--profile", "profile_name", default="quick", show_default=True)
@click.option("--seed", type=int, required=True, help="The scenario's seed within the profile.")
@click.option("--impl", "impl", default="reference", show_default=True)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    required=True,
    help="Trace file to write (atomically).",
)
def record(profile_name: str, seed: int, impl: str, check: bool, output: str) -> None:
    """Record one scenario through one implementation into a trace file."""
    from tracediff.runner import write_trace

    (scenario,) = _scenarios(profile_name, str(seed))
    spec = parse_impl(impl, check=check)
    _check_writable(output)
    path = write_trace(scenario, spec, ".", output)
    click.echo(f"wrote {path}: {scenario.features()}")


def _check_writable(path: str) -> None:
    parent = Path(path).parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: directory {parent} does not exist")


@main.command()
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False))
def diff(a: str, b: str) -> None:
    """Compare two trace files byte for byte; exit 0 equal, 1 different."""
    from tracediff.trace import TraceReader, first_difference

    index = first_difference(a, b)
    if index is None:
        click.echo(f"identical: {a} and {b} have the same compared bytes")
        sys.exit(EXIT_OK)
    details = []
    for path in (a, b):
        record_ = _record_at(TraceReader(path), index)
        if record_ is None:
            details.append(f"{path}: ends before record {index}")
        else:
            details.append(f"{path}: {_describe_record(record_)}")
    click.echo(f"different: first difference at record {index}")
    for line in details:
        click.echo(f"  {line}")
    sys.exit(EXIT_FINDING)


def _record_at(reader: Any, index: int) -> dict[str, Any] | None:
    if index == 0:
        header: dict[str, Any] = reader.header
        return header
    for i, record_ in enumerate(reader.decoded_records(), start=1):
        if i == index:
            return dict(record_)
    return None


def _describe_record(record_: dict[str, Any]) -> str:
    kind = record_.get("t", "header")
    parts = [f"type {kind}"]
    if "plan" in record_:
        parts.append(f"plan {record_['plan']}")
    if "now" in record_:
        parts.append(f"clock {record_['now']} µs")
    return ", ".join(parts)


@main.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@click.option("--plan", "plan_number", type=int, default=None, help="Show this plan record.")
@click.option("--jsonl", is_flag=True, help="Every record as one JSON line (for jq).")
def show(trace: str, plan_number: int | None, jsonl: bool) -> None:
    """Inspect a trace: summary, one plan, or JSON lines."""
    from tracediff.trace import TraceReader

    reader = TraceReader(trace)
    if jsonl:
        out = sys.stdout
        out.write(json.dumps({"t": "header", **reader.header}) + "\n")
        for record_ in reader.decoded_records():
            out.write(json.dumps(record_) + "\n")
        return
    if plan_number is not None:
        for record_ in reader.decoded_records():
            if record_.get("t") == "plan" and record_.get("plan") == plan_number:
                click.echo(json.dumps(record_, indent=1))
                return
        raise UsageError(f"{trace} has no plan {plan_number}")
    from tracediff.report.show import trace_summary_renderable

    _console().print(trace_summary_renderable(trace, reader))
