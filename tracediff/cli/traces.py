"""``tracediff record``, ``diff`` and ``show``: one trace at a time."""

from __future__ import annotations

import io
import json
import sys

import click

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    SEED,
    check_context,
    check_output_file,
    main,
    make_console,
    resolve_scenarios,
)
from tracediff.compare.model import DEFAULT_CONTEXT, DiffReport
from tracediff.errors import UsageError
from tracediff.executor.call import ImplementationFailed
from tracediff.project.impls import parse_impl


# -- record / diff / show ----------------------------------------------------------------------
@main.command()
@click.option(
    "--profile",
    "profile_name",
    default=None,
    help="Seed-set profile (default: the configured profile, else quick).",
)
@click.option("--seed", type=SEED, required=True, help="The scenario's seed within the profile.")
@click.option(
    "--impl",
    "impl",
    default="reference",
    show_default=True,
    help="The implementation to record (built-in name or package.module:attr).",
)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    required=True,
    help="Trace file to write (atomically).",
)
def record(profile_name: str | None, seed: int, impl: str, check: bool, output: str) -> None:
    """Record one scenario through one implementation into a trace file."""
    from tracediff.running.runner import write_trace

    (scenario,) = resolve_scenarios(profile_name, str(seed))
    spec = parse_impl(impl, check=check)
    check_output_file(output, "-o/--output")
    try:
        # every call of the implementation goes through tracediff.executor.call: what it raises is
        # exit 1, never mistaken for a failure to write the file
        path = write_trace(scenario, spec, ".", output, guarded=True)
    except ImplementationFailed as failed:
        raise ImplementationFailed(
            failed.impl,
            failed.when,
            failed.error,
            f"recording {scenario.profile}:{scenario.seed}; nothing written",
        ) from failed.error
    click.echo(f"wrote {path}: {scenario.features()}")


FORMATS = ("text", "json", "html")


@main.command()
@click.argument("a", type=click.Path(dir_okay=False), required=False)
@click.argument("b", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="text: the terminal view; json: the versioned report (--load reads it); html: one "
    "self-contained page with a timeline picture.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the report to this file (atomically) instead of standard output.",
)
@click.option(
    "--context",
    "context",
    type=int,
    default=DEFAULT_CONTEXT,
    show_default=True,
    help="Records shown before the divergence (the events since the previous plan too).",
)
@click.option(
    "--load",
    "load_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Present a JSON report written by --format json (or by gate) instead of comparing.",
)
def diff(
    a: str | None, b: str | None, fmt: str, output: str | None, context: int, load_path: str | None
) -> None:
    """Compare two trace files and explain the first difference.

    Where (scenario, record, plan, clock, field path), what kind (decision, value with its
    ULP distance, structure), and the records around it side by side. Exit 0 identical,
    1 different (or a loaded report with findings), 2 bad input.
    """
    from tracediff.running.explain import explain_traces

    check_context(context)
    check_output_file(output, "-o/--output")
    if load_path is not None:
        if a is not None or b is not None:
            raise UsageError("give either two trace files or --load REPORT.json, not both")
        from tracediff.compare.json_report import load as load_report

        report = load_report(load_path)
    else:
        if a is None or b is None:
            raise UsageError("diff needs two trace files A B (or --load REPORT.json)")
        report = explain_traces(a, b, context=context)
    present(report, fmt, output)
    sys.exit(EXIT_OK if report.ok else EXIT_FINDING)


def present(report: DiffReport, fmt: str, output: str | None) -> None:
    """Render a report as ``fmt`` into ``output`` (atomically) or onto standard output."""
    from tracediff.report.terminal import diff_renderable

    if fmt == "text" and output is None:
        make_console().print(diff_renderable(report))
        return
    if fmt == "text":
        from rich.console import Console

        buffer = io.StringIO()
        Console(file=buffer, width=120, color_system=None, soft_wrap=False, markup=False).print(
            diff_renderable(report)
        )
        text = buffer.getvalue()
    elif fmt == "json":
        from tracediff.compare.json_report import dumps

        text = dumps(report)
    else:
        from tracediff.report.html import render

        text = render(report)
    if output is None:
        click.echo(text, nl=False)
        return
    from tracediff.atomic import write_text_atomic

    write_text_atomic(output, text)
    click.echo(f"wrote {output}", err=True)


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
