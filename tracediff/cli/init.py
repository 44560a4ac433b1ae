"""``tracediff init``: write a starter ``[tool.tracediff]`` table into ./pyproject.toml."""

from __future__ import annotations

from pathlib import Path

import click

from tracediff.cli.app import main


@main.command()
@click.option(
    "--path",
    "target",
    default="pyproject.toml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The pyproject.toml to add the table to (created when missing).",
)
def init(target: str) -> None:
    """Add a starter [tool.tracediff] table to pyproject.toml (never replaces one)."""
    from tracediff.atomic import write_text_atomic
    from tracediff.model import DEFAULT_MODEL
    from tracediff.project import current_model
    from tracediff.project.config import starter_text

    path = Path(target)
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    # the model in effect (--model, $TRACEDIFF_MODEL) is written down unless it is the
    # default, so that the project's later commands need no --model
    model = current_model()
    named = None if model.name == DEFAULT_MODEL else model.name
    write_text_atomic(str(path), starter_text(existing, model=named, impls=model.default_impls))
    click.echo(f"tracediff: wrote a [tool.tracediff] table into {path}; edit impls to name yours")
