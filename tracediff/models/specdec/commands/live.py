"""``tracediff live``: the torch engine serving a workload with one implementation (specdec's
own command: :attr:`tracediff.models.specdec.model.SpecDecModel.commands`)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tracediff.cli.app import EXIT_FINDING, check_output_file, emit_json, make_console
from tracediff.cli.params import impl_option, json_to_option, output_option
from tracediff.errors import UsageError
from tracediff.project.impls import parse_impl


@click.command()
@click.option(
    "--device",
    type=click.Choice(["cpu", "cuda"]),
    default="cpu",
    show_default=True,
    help="Where the model runs; cuda captures CUDA graphs and times rounds with CUDA events.",
)
@click.option("--requests", type=int, default=8, show_default=True, help="Requests to serve.")
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the workload (prompts, sizes)."
)
@output_option("Trace file to write (atomically).  [default: live-SEED.trace]")
@impl_option(
    "Implementation that schedules: built-in name, package.module:attr, or entry point.",
    multiple=False,
    default="reference",
)
@click.option(
    "--allocation",
    type=click.Choice(["host", "device", "mixed"]),
    default="device",
    show_default=True,
    help="Who fixes each lane's draft count.",
)
@click.option("--ragged", is_flag=True, help="Mixed graphs: ragged candidates and eager shapes.")
@click.option(
    "--queue-depth",
    type=click.IntRange(0, 2),
    default=1,
    show_default=True,
    help="Rounds queued behind the running one.",
)
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64"]),
    default="float32",
    show_default=True,
    help="float64 makes plain-greedy equality exact (see docs/live.md).",
)
@click.option(
    "--model-seed", type=int, default=0, show_default=True, help="Seed of the model's weights."
)
@click.option(
    "--confidence",
    type=click.FloatRange(0.0, 1.0),
    default=0.7,
    show_default=True,
    help="Device lanes stop drafting below this draft probability.",
)
@click.option(
    "--graphs/--no-graphs",
    default=True,
    show_default=True,
    help="On CUDA, capture CUDA graphs for the shapes not marked eager (else all eager).",
)
@click.option(
    "--check-greedy",
    is_flag=True,
    help="Afterwards decode every request plainly (one token per forward) and require the "
    "same bytes; exit 1 if any differs.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (also off when not a TTY).")
@json_to_option("The summary")
def live(
    device: str,
    requests: int,
    seed: int,
    output: str | None,
    impl: str,
    allocation: str,
    ragged: bool,
    queue_depth: int,
    dtype: str,
    model_seed: int,
    confidence: float,
    graphs: bool,
    check_greedy: bool,
    no_progress: bool,
    json_path: str | None,
) -> None:
    """Serve a workload on a real model in torch, recording a trace that replay checks.

    A tiny decoder-only transformer (seeded weights, byte vocabulary) runs every round the
    implementation plans: mtp (self-speculative draft head) and copy (n-gram lookup)
    drafts, one batched verification forward, greedy acceptance with the bonus token. The
    trace holds the measured durations and the real acceptance; 'tracediff replay TRACE
    --impl optimized' re-drives another implementation from it. Needs the live extra:
    pip install 'tracediff-harness[live]'.
    """
    from tracediff.models.specdec.live import require_torch

    if requests < 1:
        raise UsageError(f"--requests must be at least 1, got {requests}")
    require_torch()  # one line naming the extra, exit 2, before anything else happens
    from tracediff.models.specdec.live.engine import DeviceOptions
    from tracediff.models.specdec.live.model import ModelConfig
    from tracediff.models.specdec.live.session import LiveOptions
    from tracediff.models.specdec.live.workload import WorkloadOptions

    path = output
    if path is None:  # the default, named after --seed, is checked as -o's value is
        path = f"live-{seed}.trace"
        check_output_file(path, "-o/--output")
    spec = parse_impl(impl)
    options = LiveOptions(
        workload=WorkloadOptions(
            requests=requests,
            seed=seed,
            allocation=allocation,
            ragged=ragged,
            queue_depth=queue_depth,
        ),
        model=ModelConfig(seed=model_seed),
        device=DeviceOptions(device=device, dtype=dtype, graphs=graphs),
        confidence=confidence,
        check_greedy=check_greedy,
    )
    result = _with_progress(
        options, spec, path, requests, show=not no_progress and json_path is None
    )
    if json_path is not None:
        data: dict[str, Any] = {
            "format": "tracediff-live",
            "version": 1,
            "trace": result.path,
            "impl": spec.name,
            "settings": result.settings,
            "summary": result.summary.to_dict(),
        }
        if result.greedy is not None:
            data["greedy"] = {
                "equal": result.greedy.equal,
                "different": result.greedy.different,
                "margin": result.greedy.margin,
            }
        emit_json(json_path, json.dumps(data, indent=2))
    else:
        from tracediff.models.specdec.commands.live_table import live_table

        title = (
            f"live: {requests} requests, {spec.name}, {allocation} allocation, "
            f"{'mixed graphs' if ragged else 'rect'}, queue {queue_depth}"
        )
        console = make_console()
        console.print(live_table(result.summary, title=title, settings=result.settings, trace=path))
        if result.greedy is not None:
            greedy = result.greedy
            verdict = "all equal" if not greedy.different else f"DIFFER: {greedy.different}"
            console.print(
                f"greedy check: {greedy.equal} of {requests} requests equal plain greedy "
                f"decoding ({verdict}; smallest top-2 logit gap {greedy.margin:.3g})"
            )
        console.print(f"replay it: tracediff replay {path} --impl optimized")
    if result.greedy is not None and result.greedy.different:
        sys.exit(EXIT_FINDING)


def _with_progress(options: Any, spec: Any, path: str, requests: int, *, show: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tracediff.models.specdec.live.session import run_live

    console = make_console(stderr=True)
    if not show or not console.is_terminal:
        return run_live(options, spec, path)
    progress = Progress(
        TextColumn("[bold]requests retired"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("live", total=requests)
        return run_live(options, spec, path, lambda done: progress.update(task, completed=done))
