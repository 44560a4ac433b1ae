"""``tracediff shrink``: a diverging scenario made small, with the same signature."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import click
from rich.table import Table

from tracediff.cli import settings
from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    main,
    resolve_impls,
)
from tracediff.cli.output import text_console
from tracediff.cli.params import (
    SEED,
    impl_option,
    json_file_option,
    profile_option,
    workload_option,
)
from tracediff.cli.shrink_options import (
    DEFAULT_EVALUATIONS,
    DEFAULT_IMPLS,
    impl_args,
    progress_line,
    save_directories,
    shrink_budget,
    shrink_options,
)
from tracediff.errors import UsageError
from tracediff.model import of as model_of
from tracediff.project.profiles import profile_options
from tracediff.report.describe import plural


@main.command()
@profile_option("Seed-set profile of --seed (default: the configured profile, else quick).")
@workload_option
@click.option("--seed", type=SEED, default=None, help="The diverging scenario's seed.")
@click.option(
    "--scenario",
    "scenario_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Start from a scenario JSON file (e.g. a saved regression) instead of a seed.",
)
@impl_option(
    "Implementations to compare (repeat; default reference and optimized, or the "
    "scenario file's when they are built-in: other names a file holds must be confirmed "
    "with --impl)."
)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@shrink_budget(DEFAULT_EVALUATIONS)
@click.option(
    "--save",
    is_flag=True,
    help="Write the shrunk scenario into the regression corpus (CI=true: the artifacts dir).",
)
@save_directories
@click.option("--note", default="", help="A note stored with the saved scenario.")
@click.option(
    "--traces",
    "traces_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Also write the shrunk scenario's traces (one per implementation) here.",
)
@click.option(
    "--signature",
    "signature_name",
    type=click.Choice(["compare", "fields"]),
    default="compare",
    show_default=True,
    help="What must stay the same while shrinking: compare = the divergence explanation's "
    "kind and field path; fields = status, record type and first differing top-level field.",
)
@json_file_option("Also write the result (before, after, saved file) as JSON to this file.")
@click.option("--no-progress", is_flag=True, help="No live progress line.")
def shrink(
    profile_name: str | None,
    seed: int | None,
    scenario_file: str | None,
    impls: tuple[str, ...],
    check: bool,
    budget: int,
    timeout_s: float | None,
    max_seconds: float | None,
    timeout_old: float | None,
    save: bool,
    regressions: str | None,
    artifacts: str | None,
    note: str,
    traces_dir: str | None,
    signature_name: str,
    json_path: str | None,
    no_progress: bool,
) -> None:
    """Minimise a diverging scenario while its divergence keeps the same signature.

    Exit 1 when the scenario fails (the shrunk repro is the finding), 0 when the
    implementations agree on it (nothing to shrink), 2 on bad input.
    """
    from tracediff.cli.app import resolve_scenarios
    from tracediff.search.shrink import SIGNATURES, ShrinkProgress, load_regression, save_regression
    from tracediff.search.shrink import shrink as run_shrink

    options = shrink_options(budget, timeout_s, max_seconds, timeout_old)
    profile_name = settings.profile(profile_name)
    if (seed is None) == (scenario_file is None):
        raise UsageError("give exactly one of --seed N (with --profile) or --scenario FILE")
    saved_impls: tuple[str, ...] = ()
    if scenario_file is not None:
        scenario, saved_impls = load_regression(scenario_file)
        if not impls:
            _refuse_code_named_by_data(scenario_file, saved_impls)
    else:
        assert seed is not None
        (scenario,) = resolve_scenarios(profile_name, (seed,))
    specs = resolve_impls(impls, check, saved_impls or DEFAULT_IMPLS)
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare")
    unit = model_of(scenario).size_unit
    with progress_line(not no_progress, f"shrinking {scenario.profile}:{scenario.seed}") as show:

        def on_progress(p: ShrinkProgress) -> None:
            show(
                f"[{p.pass_name}] {plural(p.requests, unit)}, {plural(p.plans, 'plan')}; "
                f"{p.attempts}/{p.budget} evaluations, {p.improvements} kept, {p.elapsed:.0f} s"
            )

        from tracediff.executor import open_executor

        # One warm isolated worker: a candidate that exits or kills its process is a
        # failing candidate, never the end of tracediff.
        with open_executor("local", jobs=1) as executor:
            result = run_shrink(
                scenario,
                specs,
                signature_fn=SIGNATURES[signature_name],
                options=options,
                on_progress=on_progress,
                executor=executor,
            )
    console = text_console()
    names = tuple(s.name for s in specs)
    args = tuple(s.arg for s in specs)
    if not result.failing:
        console.print(
            f"identical: {' and '.join(names)} agree on {scenario.profile}:{scenario.seed}; "
            "nothing to shrink",
            style="bold green",
        )
        sys.exit(EXIT_OK)
    table = Table(title=f"shrink {scenario.profile}:{scenario.seed}", header_style="bold")
    for column in ("", f"{unit}s", "plans"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row("before", str(result.before[0]), str(result.before[1]))
    table.add_row("after", str(result.after[0]), str(result.after[1]))
    console.print(table)
    from tracediff.search.shrink import describe_signature

    console.print(f"signature: {describe_signature(result.signature)}", markup=False)
    console.print(
        f"{result.attempts} of {options.max_evaluations} evaluations used, "
        f"{result.improvements} kept, {result.seconds:.1f} s "
        f"(per-candidate timeout {options.run_timeout_s:g} s)",
        markup=False,
    )
    console.print(result.stop_reason(), style=None if result.complete else "yellow", markup=False)
    console.print(f"shrunk scenario: {result.shrunk.features()}", markup=False)
    saved = None
    if save:
        saved = save_regression(
            result,
            regressions=str(settings.write_dir(regressions, "regressions")),
            artifacts=settings.artifacts(artifacts, None),
            note=note,
        )
        shown = settings.project().relative(saved)
        console.print(f"saved {shown}", markup=False)
        console.print(
            f"repro: tracediff shrink --scenario {shlex.quote(shown)} {impl_args(args)}",
            markup=False,
        )
    elif scenario_file is not None:
        console.print(
            f"repro: tracediff shrink --scenario {shlex.quote(scenario_file)} {impl_args(args)}",
            markup=False,
        )
    else:
        console.print(
            f"repro: tracediff shrink {profile_options(profile_name)} --seed "
            f"{scenario.seed} {impl_args(args)} --save",
            markup=False,
        )
    traces: list[str] = []
    if traces_dir is not None:
        from pathlib import Path

        from tracediff.running.runner import write_trace

        Path(traces_dir).mkdir(parents=True, exist_ok=True)
        traces = [write_trace(result.shrunk, spec, traces_dir) for spec in specs]
        console.print(f"traces: {' '.join(traces)}", markup=False)
        console.print(f"  tracediff diff {traces[0]} {traces[1]}", markup=False)
        console.print(f"  tracediff replay {traces[0]} --impl {shlex.quote(args[1])}", markup=False)
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(_shrink_json(result, saved, traces), indent=1))
    sys.exit(EXIT_FINDING)


def _refuse_code_named_by_data(path: str, names: tuple[str, ...]) -> None:
    """A scenario file names the implementations it was found with; importing them would
    let a data file choose code to run. Built-in names are fine; others need ``--impl``."""
    from tracediff.project.impls import builtins

    foreign = [name for name in names if name not in builtins()]
    if foreign:
        raise UsageError(
            f"{path} was found with {', '.join(names)}; tracediff does not import code a data "
            f"file names: confirm with {impl_args(names)} (or choose other --impl values)"
        )


def _shrink_json(result: Any, saved: Any, traces: list[str]) -> dict[str, Any]:
    from tracediff.search.shrink import regression_document

    return {
        "format": "tracediff-shrink",
        "version": 1,
        "before": {"requests": result.before[0], "plans": result.before[1]},
        "after": {"requests": result.after[0], "plans": result.after[1]},
        "attempts": result.attempts,
        "evaluations": result.evaluations,
        "budget": result.options.max_evaluations,
        "run_timeout_s": result.options.run_timeout_s,
        "improvements": result.improvements,
        "seconds": round(result.seconds, 3),
        "complete": result.complete,
        "one_minimal": result.complete,
        "stopped": result.stopped,
        "saved": None if saved is None else str(saved),
        "traces": traces,
        "regression": regression_document(result),
    }


# -- fuzz -------------------------------------------------------------------------------------
