"""``tracediff bench``: the table of median plan() time per implementation (specdec's own
command: :attr:`tracediff.models.specdec.model.SpecDecModel.commands`)."""

from __future__ import annotations

import json

import click

from tracediff.cli.app import make_console, resolve_impls
from tracediff.cli.params import (
    choices_option,
    impl_option,
    json_file_option,
    profile_option,
    seeds_option,
)
from tracediff.errors import UsageError
from tracediff.project.impls import load
from tracediff.project.seeds import parse_seeds


def _counts(text: str) -> tuple[int, ...]:
    try:
        return parse_seeds(text)
    except UsageError:
        raise UsageError(f"--requests {text!r}: give counts like 8,16,32,64") from None


@click.command()
@impl_option("Implementations to time; the first is the baseline (default: reference, optimized).")
@click.option("--requests", default="8,16,32,64", show_default=True, help="Request counts.")
@choices_option(
    "--allocation", ("device", "host", "mixed"), "Allocations (default: device and host)."
)
@click.option("--repeats", type=int, default=25, show_default=True, help="Timed calls per cell.")
@click.option("--cpu", is_flag=True, help="Show thread CPU time instead of wall-clock time.")
@click.option(
    "--harness",
    is_flag=True,
    help="Instead: time the harness (check, encode, digest, compare) per plan over a profile.",
)
@profile_option(
    "With --harness: the profile to drive (default: the configured profile, else quick)."
)
@seeds_option("With --harness: seeds of the profile (e.g. 1..50).")
@json_file_option("Also write the result as versioned JSON.")
def bench(
    impls: tuple[str, ...],
    requests: str,
    allocations: tuple[str, ...],
    repeats: int,
    cpu: bool,
    harness: bool,
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    json_path: str | None,
) -> None:
    """Median plan() µs with one round queued, by requests × allocation × probe.

    Implementations alternate within each cell (A, B, A, B ...) and every repetition
    visits every cell, so ratios and growth hold on a noisy machine. The ratios, the
    growth from the smallest to the largest request count and the performance targets
    (at 64 requests on device: at least 10x faster than the reference without a probe,
    25x with one; growth from 8 to 64 requests at most 5x on device and on host) are
    printed under the table.

    With --harness: drive a profile's scenarios through each implementation in lockstep,
    as ``run`` does, and time what the harness adds to every plan() call (the schema check,
    encoding, the body digest, the byte comparison), with the bytes per plan of the compared
    body and of the stored file.
    """
    if harness:
        _bench_harness(impls, profile_name, seeds, json_path)
        return
    if profile_name is not None or seeds is not None:
        raise UsageError("--profile and --seeds go with --harness")
    from tracediff.models.specdec.bench import bench_to_dict, run_bench
    from tracediff.models.specdec.commands.bench_table import bench_renderable

    specs = resolve_impls(impls, False, ("reference", "optimized"))
    factories = {spec.name: load(spec) for spec in specs}
    result = run_bench(
        factories,
        requests=_counts(requests),
        allocations=allocations or ("device", "host"),
        repeats=repeats,
    )
    make_console().print(bench_renderable(result, cpu=cpu))
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(bench_to_dict(result), indent=2) + "\n")


def _bench_harness(
    impls: tuple[str, ...],
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    json_path: str | None,
) -> None:
    from tracediff.cli.app import resolve_scenarios
    from tracediff.models.specdec.commands.harness_table import harness_renderable
    from tracediff.models.specdec.harness_cost import measure_harness

    specs = resolve_impls(impls, False, ("reference", "optimized"))
    factories = {spec.name: load(spec) for spec in specs}
    scenarios = resolve_scenarios(profile_name, seeds)
    console = make_console()
    with console.status("") as status:

        def progress(done: int) -> None:
            status.update(f"harness cost: {done}/{len(scenarios)} scenarios")

        result = measure_harness(scenarios, factories, progress)
    label = f"{scenarios[0].profile}, {len(scenarios)} scenarios" if scenarios else "no scenario"
    console.print(harness_renderable(result, label))
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(result.to_dict(), indent=2) + "\n")
