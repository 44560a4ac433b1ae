"""``tracediff new-model NAME``: the skeleton of a new model, runnable at once."""

from __future__ import annotations

from pathlib import Path

import click

from tracediff.cli.app import main


@main.command("new-model")
@click.argument("name")
@click.option(
    "--dir",
    "directory",
    default=None,
    type=click.Path(file_okay=False),
    help="Where to write it (a new or empty directory; default: ./NAME).",
)
def new_model(name: str, directory: str | None) -> None:
    """Write a new model NAME: generator, driver, reference, a second implementation,
    profiles, a planted bug, tests and a pyproject.toml that registers it.

    It runs identical at once: `pip install -e NAME`, then `tracediff run` in it.
    """
    from tracediff.scaffold import new_model as write

    target = Path(directory or name)
    written = write(name, target)
    for path in written:
        click.echo(f"wrote {path}")
    click.echo(
        f"next: pip install -e {target} && cd {target} && tracediff run  (docs/models.md says "
        "what each member does)"
    )
