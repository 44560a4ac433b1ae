"""``tracediff upgrade``: convert version 1 traces into the current trace format."""

from __future__ import annotations

import click

from tracediff.cli.app import main
from tracediff.cli.params import output_option
from tracediff.errors import UsageError


@main.command()
@click.argument("traces", nargs=-1, required=True, type=click.Path(dir_okay=False))
@output_option("Write the converted trace here instead of replacing the file (one TRACE only).")
def upgrade(traces: tuple[str, ...], output: str | None) -> None:
    """Convert version 1 trace files into the current format (version 2), in place.

    Every decision is kept: table rows become typed columns of the same values, and the
    converted trace is checked as a freshly recorded one before it replaces the file
    (atomically; on any error nothing is written). Traces already current are left as they
    are. The digest changes with the encoding: regenerate golden manifests instead.
    """
    from tracediff.project import current_model

    upgrade_trace = current_model().upgrade_trace
    if output is not None and len(traces) != 1:
        raise UsageError("-o/--output takes one TRACE; without it each file is converted in place")
    for trace in traces:
        done = upgrade_trace(trace, output)
        if not done.converted:
            click.echo(f"{trace}: already version {done.from_version}, left as it is")
            continue
        click.echo(
            f"{done.target}: version {done.from_version} -> 2, {done.records} records, "
            f"{done.old_bytes:,} -> {done.new_bytes:,} bytes, digest {done.new_digest[:16]}"
        )
