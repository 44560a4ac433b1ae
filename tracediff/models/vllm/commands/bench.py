"""``tracediff --model vllm bench``: vLLM's time per engine step against tracediff's."""

from __future__ import annotations

import click

from tracediff.cli.app import resolve_impls
from tracediff.cli.params import choices_option, counts_option, impl_option
from tracediff.errors import UsageError
from tracediff.project.impls import load


@click.command()
@impl_option("The scheduler to time (default: vllm, the installed one).")
@counts_option("16,64,256", "16,64,256")
@choices_option("--pressure", ("low", "high"), "Block pressure (default: both).")
@click.option("--repeats", type=int, default=3, show_default=True, help="Timed runs per cell.")
def bench(
    impls: tuple[str, ...], requests: tuple[int, ...], pressures: tuple[str, ...], repeats: int
) -> None:
    """Median µs per engine step inside vLLM's scheduler (schedule, update_from_output,
    drafts, arrivals, aborts) and in tracediff (driver, simulated runner, encoding and
    digest), by requests × block pressure."""
    from tracediff.models.vllm.bench import bench_lines, run_bench
    from tracediff.models.vllm.model import MODEL

    if len(impls) > 1:
        raise UsageError("bench times one scheduler; give one --impl")
    (spec,) = resolve_impls(impls, False, ("vllm",))
    cells = run_bench(load(spec), MODEL.drive, requests, pressures or ("low", "high"), repeats)
    for line in bench_lines(spec.name, cells):
        click.echo(line)
