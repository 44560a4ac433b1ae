"""``tracediff --model kvbatch bench``: plan() time by requests × block pressure."""

from __future__ import annotations

import click

from tracediff.cli.app import resolve_impls
from tracediff.cli.params import choices_option, counts_option, impl_option
from tracediff.project.impls import load


@click.command()
@impl_option("Implementations to time; the first is the baseline (default: reference, optimized).")
@counts_option("50,100,200,400", "50,100,200")
@choices_option("--pressure", ("low", "high"), "Block pressure (default: both).")
@click.option("--repeats", type=int, default=3, show_default=True, help="Timed runs per cell.")
def bench(
    impls: tuple[str, ...], requests: tuple[int, ...], pressures: tuple[str, ...], repeats: int
) -> None:
    """Median plan() µs per plan, by requests × block pressure, with ratios to the first
    implementation and the growth from the smallest to the largest request count."""
    from tracediff.models.kvbatch.bench import bench_lines, run_bench
    from tracediff.models.kvbatch.model import MODEL

    specs = resolve_impls(impls, False, ("reference", "optimized"))
    factories = {spec.name: load(spec) for spec in specs}
    cells = run_bench(factories, MODEL.drive, requests, pressures or ("low", "high"), repeats)
    for line in bench_lines([spec.name for spec in specs], cells):
        click.echo(line)
