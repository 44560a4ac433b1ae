"""``tracediff diff``: two trace files compared, the first difference explained (``--all``:
every difference, grouped by field)."""

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
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="List every difference to the traces' ends, grouped by field (indices elided) with "
    "counts and the first values, instead of explaining the first one (text or json).",
)
def diff(
    a: str | None,
    b: str | None,
    fmt: str,
    output: str | None,
    context: int,
    load_path: str | None,
    show_all: bool,
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
        if show_all:
            _every_difference(a, b, fmt, output)
        report = explain_traces(a, b, context=context)
    present(report, fmt, output)
    sys.exit(EXIT_OK if report.ok else EXIT_FINDING)


def _every_difference(a: str, b: str, fmt: str, output: str | None) -> None:
    """``--all``: every differing field to the traces' ends; exits 0 identical, 1 not."""
    import json

    from tracediff.report.every import all_differences_renderable
    from tracediff.running.every_difference import every_difference

    if fmt == "html":
        raise UsageError("--all writes text or json; drop --format html")
    found = every_difference(a, b)
    if fmt == "json":
        _emit(json.dumps(found.to_dict(), indent=1, default=repr) + "\n", output)
    else:
        renderable = all_differences_renderable(found, (a, b))
        if output is None:
            make_console().print(renderable)
        else:
            _emit(_plain_text(renderable), output)
    sys.exit(EXIT_OK if found.identical else EXIT_FINDING)


def _plain_text(renderable: object) -> str:
    from rich.console import Console

    buffer = io.StringIO()
    Console(file=buffer, width=120, color_system=None, soft_wrap=False, markup=False).print(
        renderable
    )
    return buffer.getvalue()


def _emit(text: str, output: str | None) -> None:
    if output is None:
        click.echo(text, nl=False)
        return
    from tracediff.atomic import write_text_atomic

    write_text_atomic(output, text)
    click.echo(f"wrote {output}", err=True)


def present(report: DiffReport, fmt: str, output: str | None) -> None:
    """Render a report as ``fmt`` into ``output`` (atomically) or onto standard output."""
    from tracediff.report.terminal import diff_renderable

    if fmt == "text" and output is None:
        make_console().print(diff_renderable(report))
        return
    if fmt == "text":
        text = _plain_text(diff_renderable(report))
    elif fmt == "json":
        from tracediff.compare.json_report import dumps

        text = dumps(report)
    else:
        from tracediff.report.html import render

        text = render(report)
    _emit(text, output)
