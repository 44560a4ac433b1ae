"""``tracediff serve [--model M] IMPL``: an in-process implementation over the stdio protocol."""

from __future__ import annotations

import sys

import click

from tracediff.cli.app import main


@main.command("serve")
@click.argument("impl", metavar="IMPL")
def serve_command(impl: str) -> None:
    """Serve IMPL (a built-in name, package.module:attr or an entry point) on stdin/stdout,
    for --impl 'exec:tracediff serve IMPL' (docs/protocol.md). It speaks the model's own
    layout where it has one (specdec), else the generic layout that serves any model."""
    from tracediff.process.server import protocol_stdout, serve_impl, served_spec
    from tracediff.project import current_model

    model = current_model()
    spec = served_spec(impl)  # a name that resolves to nothing: exit 2, stdout untouched
    # before the implementation is imported: the protocol owns stdout, a print goes to stderr
    out = protocol_stdout()
    sys.exit(serve_impl(model, spec, out))
