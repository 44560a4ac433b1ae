"""``tracediff bench``: the table of median plan() time per implementation."""

from __future__ import annotations

import json

import click

from tracediff.cli.app import _console, _impl_specs, check_output_file, main
from tracediff.errors import UsageError
from tracediff.impls import load
from tracediff.scenario.profiles import parse_seeds


def _counts(text: str) -> tuple[int, ...]:
    try:
        return parse_seeds(text)
    except UsageError:
        raise UsageError(f"--requests {text!r}: give counts like 8,16,32,64") from None


@main.command()
@click.option(
    "--impl",
    "impls",
    multiple=True,
    help="Implementations to time; the first is the baseline (default: reference, optimized).",
)
@click.option("--requests", default="8,16,32,64", show_default=True, help="Request counts.")
@click.option(
    "--allocation",
    "allocations",
    multiple=True,
    type=click.Choice(["device", "host", "mixed"]),
    help="Allocations (default: device and host).",
)
@click.option("--repeats", type=int, default=25, show_default=True, help="Timed calls per cell.")
@click.option("--cpu", is_flag=True, help="Show thread CPU time instead of wall-clock time.")
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the result as versioned JSON.",
)
def bench(
    impls: tuple[str, ...],
    requests: str,
    allocations: tuple[str, ...],
    repeats: int,
    cpu: bool,
    json_path: str | None,
) -> None:
    """Median plan() µs with one round queued, by requests × allocation × probe.

    Implementations alternate within each cell (A, B, A, B ...) so ratios hold on a noisy
    machine; the ratios, the growth from the smallest to the largest request count and the
    performance targets (at 64 requests on device: at least 4x faster than the reference
    without a probe, 14x with one; growth from 8 to 64 requests at most 8.5x) are printed
    under the table.
    """
    from tracediff.bench import bench_to_dict, run_bench
    from tracediff.report.bench import bench_renderable

    check_output_file(json_path, "--json")
    specs = _impl_specs(impls, False, ("reference", "optimized"))
    factories = {spec.name: load(spec) for spec in specs}
    result = run_bench(
        factories,
        requests=_counts(requests),
        allocations=allocations or ("device", "host"),
        repeats=repeats,
    )
    _console().print(bench_renderable(result, cpu=cpu))
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(bench_to_dict(result), indent=2) + "\n")
