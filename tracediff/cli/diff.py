"""``tracediff diff``: two trace files compared, the first difference explained."""

from __future__ import annotations

import io
import sys

import click

from tracediff.cli.app import EXIT_FINDING, EXIT_OK, check_context, main, make_console
from tracediff.cli.params import output_option
from tracediff.compare.model import DEFAULT_CONTEXT, DiffReport
from tracediff.errors import UsageError

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
@output_option("Write the report to this file (atomically) instead of standard output.")
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
