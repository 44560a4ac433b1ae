"""``tracediff shrink`` and ``tracediff fuzz``: small repros of divergences."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tracediff.cli import settings
from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    SEED,
    check_output_file,
    check_seconds,
    main,
    resolve_impls,
)
from tracediff.cli.output import text_console
from tracediff.errors import UsageError
from tracediff.report.describe import plural

MAX_EXAMPLES = 1_000_000  # fuzz: generated scenarios; days of fuzzing, more is a typo


DEFAULT_IMPLS = ("reference", "optimized")
# The defaults, imported without the shrinker itself (it is loaded when a command runs).
DEFAULT_EVALUATIONS = 2000  # tracediff.shrink.DEFAULT_EVALUATIONS
DEFAULT_SHRINK_EVALUATIONS = 500  # tracediff.fuzz.DEFAULT_SHRINK_EVALUATIONS
DEFAULT_RUN_TIMEOUT_S = 60.0  # tracediff.shrink.DEFAULT_RUN_TIMEOUT_S
DEFAULT_MAX_SECONDS = 3600.0  # tracediff.shrink.DEFAULT_MAX_SECONDS
MAX_REQUESTS = 64  # what a scenario may hold (the generator matrix allows 1..64)


@contextmanager
def _progress_line(show: bool, label: str) -> Iterator[Callable[[str], None]]:
    """A one-line live status on stderr (only on a terminal); yields its update function."""
    console = text_console(stderr=True)
    if not show or not console.is_terminal:
        yield lambda _text: None
        return
    with console.status(label) as status:
        yield lambda text: status.update(f"{label} {text}")


def _impl_args(names: tuple[str, ...]) -> str:
    return " ".join(f"--impl {shlex.quote(n)}" for n in names)


def _save_directories(command: Any) -> Any:
    """--regressions and --artifacts: where --save writes (shrink and fuzz alike)."""
    command = click.option(
        "--artifacts",
        default=None,
        metavar="DIR",
        type=click.Path(file_okay=False),
        help="Artifacts directory (CI); default $TRACEDIFF_ARTIFACTS, the configured one, or "
        "./artifacts.",
    )(command)
    return click.option(
        "--regressions",
        default=None,
        metavar="DIR",
        type=click.Path(file_okay=False),
        help="The regression corpus --save writes into (default: the configured corpus, else "
        "./scenarios/regressions).",
    )(command)


def _shrink_budget(default_budget: int) -> Callable[[Any], Any]:
    """--budget, --timeout and --max-seconds: how far a shrink goes (shrink and fuzz alike).
    The budget counts candidate evaluations, so the repro is the same on any machine."""

    def decorate(command: Any) -> Any:
        command = click.option("--timeout-s", "timeout_old", type=float, default=None, hidden=True)(
            command
        )  # the old name of the total time limit, now --max-seconds
        command = click.option(
            "--max-seconds",
            type=float,
            default=None,
            help="Safety cap on the whole shrink in wall-clock seconds (default "
            f"{DEFAULT_MAX_SECONDS:g}); a search it stops says so, since its repro then "
            "depends on the machine's speed.",
        )(command)
        command = click.option(
            "--timeout",
            "timeout_s",
            type=float,
            default=None,
            help="Per-candidate run limit in seconds (default: the configured timeout, else "
            f"{DEFAULT_RUN_TIMEOUT_S:g}); a candidate past it counts as a timeout.",
        )(command)
        return click.option(
            "--budget",
            type=int,
            default=default_budget,
            show_default=True,
            help="Candidate evaluations the shrink may run: the same scenario, implementations "
            "and options give the same repro on any machine.",
        )(command)

    return decorate


def _shrink_options(
    budget: int, timeout_s: float | None, max_seconds: float | None, timeout_old: float | None
) -> Any:
    from tracediff.shrink import ShrinkOptions

    if timeout_old is not None and max_seconds is None:
        max_seconds = timeout_old
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 candidate evaluation, got {budget}")
    timeout_s = settings.timeout(timeout_s)
    check_seconds(timeout_s, "--timeout")
    check_seconds(max_seconds, "--max-seconds" if timeout_old is None else "--timeout-s")
    return ShrinkOptions(
        max_evaluations=budget,
        run_timeout_s=DEFAULT_RUN_TIMEOUT_S if timeout_s is None else timeout_s,
        max_seconds=DEFAULT_MAX_SECONDS if max_seconds is None else max_seconds,
    )


# -- shrink -----------------------------------------------------------------------------------
@main.command()
@click.option(
    "--profile",
    "profile_name",
    default=None,
    help="Seed-set profile of --seed (default: the configured profile, else quick).",
)
@click.option("--seed", type=SEED, default=None, help="The diverging scenario's seed.")
@click.option(
    "--scenario",
    "scenario_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Start from a scenario JSON file (e.g. a saved regression) instead of a seed.",
)
@click.option(
    "--impl",
    "impls",
    multiple=True,
    help="Implementations to compare (repeat; default reference and optimized, or the "
    "scenario file's when they are built-in: other names a file holds must be confirmed "
    "with --impl).",
)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@_shrink_budget(DEFAULT_EVALUATIONS)
@click.option(
    "--save",
    is_flag=True,
    help="Write the shrunk scenario into the regression corpus (CI=true: the artifacts dir).",
)
@_save_directories
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
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the result (before, after, saved file) as JSON to this file.",
)
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
    from tracediff.shrink import SIGNATURES, ShrinkProgress, load_regression, save_regression
    from tracediff.shrink import shrink as run_shrink

    options = _shrink_options(budget, timeout_s, max_seconds, timeout_old)
    profile_name = settings.profile(profile_name)
    check_output_file(json_path, "--json")
    if (seed is None) == (scenario_file is None):
        raise UsageError("give exactly one of --seed N (with --profile) or --scenario FILE")
    saved_impls: tuple[str, ...] = ()
    if scenario_file is not None:
        scenario, saved_impls = load_regression(scenario_file)
        if not impls:
            _refuse_code_named_by_data(scenario_file, saved_impls)
    else:
        (scenario,) = resolve_scenarios(profile_name, str(seed))
    specs = resolve_impls(impls, check, saved_impls or DEFAULT_IMPLS)
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare")
    with _progress_line(not no_progress, f"shrinking {scenario.profile}:{scenario.seed}") as show:

        def on_progress(p: ShrinkProgress) -> None:
            show(
                f"[{p.pass_name}] {plural(p.requests, 'request')}, {plural(p.plans, 'plan')}; "
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
    for column in ("", "requests", "plans"):
        table.add_column(column, justify="right" if column else "left")
    table.add_row("before", str(result.before[0]), str(result.before[1]))
    table.add_row("after", str(result.after[0]), str(result.after[1]))
    console.print(table)
    from tracediff.shrink import describe_signature

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
            f"repro: tracediff shrink --scenario {shlex.quote(shown)} {_impl_args(args)}",
            markup=False,
        )
    elif scenario_file is not None:
        console.print(
            f"repro: tracediff shrink --scenario {shlex.quote(scenario_file)} {_impl_args(args)}",
            markup=False,
        )
    else:
        console.print(
            f"repro: tracediff shrink --profile {shlex.quote(profile_name)} --seed "
            f"{scenario.seed} {_impl_args(args)} --save",
            markup=False,
        )
    traces: list[str] = []
    if traces_dir is not None:
        from pathlib import Path

        from tracediff.runner import write_trace

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
    from tracediff.impls import BUILTINS

    foreign = [name for name in names if name not in BUILTINS]
    if foreign:
        raise UsageError(
            f"{path} was found with {', '.join(names)}; tracediff does not import code a data "
            f"file names: confirm with {_impl_args(names)} (or choose other --impl values)"
        )


def _shrink_json(result: Any, saved: Any, traces: list[str]) -> dict[str, Any]:
    from tracediff.shrink import regression_document

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
@main.command()
@click.option(
    "--impl",
    "impls",
    multiple=True,
    help="Implementations to compare (repeat; default reference and optimized).",
)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@click.option(
    "--max-examples",
    type=int,
    default=200,
    show_default=True,
    help="Scenarios to generate and compare.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the search.")
@click.option(
    "--max-failures",
    type=int,
    default=3,
    show_default=True,
    help="Stop after this many distinct failures.",
)
@click.option(
    "--max-requests",
    type=int,
    default=6,
    show_default=True,
    help="Requests per generated scenario, at most.",
)
@_shrink_budget(DEFAULT_SHRINK_EVALUATIONS)
@click.option("--save", is_flag=True, help="Save each shrunk failure into the corpus.")
@_save_directories
@click.option(
    "--signature",
    "signature_name",
    type=click.Choice(["compare", "fields"]),
    default="compare",
    show_default=True,
    help="What must stay the same while shrinking: compare = the divergence explanation's "
    "kind and field path; fields = status, record type and first differing top-level field.",
)
@click.option("--no-progress", is_flag=True, help="No live progress line.")
def fuzz(
    impls: tuple[str, ...],
    check: bool,
    max_examples: int,
    seed: int,
    max_failures: int,
    max_requests: int,
    budget: int,
    timeout_s: float | None,
    max_seconds: float | None,
    timeout_old: float | None,
    save: bool,
    regressions: str | None,
    artifacts: str | None,
    signature_name: str,
    no_progress: bool,
) -> None:
    """Search generated scenarios (Hypothesis) for divergences; report each shrunk.

    Exit 1 when a failure was found, 0 when none was in --max-examples scenarios.
    """
    from tracediff.fuzz import FuzzProgress
    from tracediff.fuzz import fuzz as run_fuzz
    from tracediff.shrink import SIGNATURES, describe_signature, save_regression

    options = _shrink_options(budget, timeout_s, max_seconds, timeout_old)
    if max_examples < 1 or max_failures < 1 or max_requests < 1:
        raise UsageError("--max-examples, --max-failures and --max-requests must be at least 1")
    if max_examples > MAX_EXAMPLES:
        raise UsageError(
            f"--max-examples must be at most {MAX_EXAMPLES:,}, got {str(max_examples)[:30]}"
        )
    if max_requests > MAX_REQUESTS:
        raise UsageError(f"--max-requests must be at most {MAX_REQUESTS}, got {max_requests}")
    specs = resolve_impls(impls, check, DEFAULT_IMPLS)
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare")
    with _progress_line(not no_progress, "fuzzing") as show:

        def on_progress(p: FuzzProgress) -> None:
            show(
                f"{p.phase}: {plural(p.examples, 'scenario')}, "
                f"{plural(p.failures, 'failure')}, {p.elapsed:.0f} s"
            )

        from tracediff.executor import open_executor

        with open_executor("local", jobs=1) as executor:  # one warm isolated worker
            result = run_fuzz(
                specs,
                max_examples=max_examples,
                seed=seed,
                max_failures=max_failures,
                max_requests=max_requests,
                shrink_options=options,
                signature_fn=SIGNATURES[signature_name],
                on_progress=on_progress,
                executor=executor,
            )
    console = text_console()
    names = " vs ".join(result.impls)
    if result.ok:
        console.print(
            f"no failure: {plural(result.examples, 'scenario')}, {names} ({result.seconds:.1f} s)",
            style="bold green",
        )
        sys.exit(EXIT_OK)
    table = Table(title=f"fuzz: {plural(len(result.failures), 'failure')}", header_style="bold")
    for column in ("signature", "found (requests)", "shrunk (requests, plans)", "saved"):
        table.add_column(column)
    saved_paths: list[str | None] = []
    for failure in result.failures:
        shrunk = failure.shrunk
        saved = ""
        if save:
            saved = str(
                save_regression(
                    shrunk,
                    regressions=str(settings.write_dir(regressions, "regressions")),
                    artifacts=settings.artifacts(artifacts, None),
                )
            )
        saved_paths.append(saved or None)
        table.add_row(
            describe_signature(failure.signature),
            str(len(failure.found.requests)),
            f"{shrunk.after[0]}, {shrunk.after[1]}",
            saved or "-",
        )
    console.print(table)
    _explain_failures(console, result.failures, specs, saved_paths, artifacts)
    console.print(
        f"DIVERGED: {plural(len(result.failures), 'distinct failure')} in "
        f"{plural(result.examples, 'scenario')} "
        f"({names}, {result.seconds:.1f} s, --seed {seed})",
        style="bold red",
    )
    sys.exit(EXIT_FINDING)


def _explain_failures(
    console: Console,
    failures: Any,
    specs: Any,
    saved: list[str | None],
    artifacts: str | None,
) -> None:
    """Each failure's explanation and the command that reproduces it, saved or not: an
    unsaved shrunk scenario is kept under the artifacts directory so the command works."""
    import json as _json

    import tracediff
    from tracediff.atomic import write_text_atomic
    from tracediff.filenames import component

    names = tuple(spec.arg for spec in specs)
    keep = settings.artifacts(artifacts)
    for failure, path in zip(failures, saved, strict=True):
        scenario = failure.shrunk.shrunk
        if path is None:
            folder = f"{keep}/fuzz"
            import os

            os.makedirs(folder, exist_ok=True)
            path = f"{folder}/{component(scenario.profile, scenario.seed)}.json"
            write_text_atomic(path, _json.dumps(scenario.to_dict(), indent=1) + "\n")
        shown = settings.project().relative(path)
        compared = tracediff.compare_implementations(scenario, names, jobs=2)
        for comparison in compared.findings:
            console.print(f"{comparison.label}: {comparison.explanation}", markup=False)
        console.print(
            f"reproduce: tracediff run --scenario {shlex.quote(shown)} {_impl_args(names)}",
            markup=False,
        )
