"""``tracediff run``: implementations over a seed set, traces compared byte for byte."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    _console,
    _impl_specs,
    _jobs,
    _scenarios,
    main,
)
from tracediff.errors import UsageError
from tracediff.runner import DIVERGED, IDENTICAL, RunOptions, RunSummary, ScenarioResult


# -- run ------------------------------------------------------------------------------------
@main.command()
@click.option("--profile", "profile_name", default=None, help="Seed-set profile (default quick).")
@click.option(
    "--seeds", default=None, help="Seeds instead of the profile's: 0..1055, 3,7, 0..9,20."
)
@click.option(
    "--impl",
    "impls",
    multiple=True,
    help="Implementation: built-in name, package.module:attr, or entry point. Repeat (default: "
    "reference, optimized).",
)
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all cores).")
@click.option("--check", is_flag=True, help="Run optimized in check mode (debug-build asserts).")
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the traces of diverging scenarios in this directory.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="Per-scenario time limit in seconds; a scenario over it is a finding.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also write the summary as JSON to this file.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (also off when not a TTY).")
def run(
    profile_name: str | None,
    seeds: str | None,
    impls: tuple[str, ...],
    jobs: int | None,
    check: bool,
    artifacts: str | None,
    timeout_s: float | None,
    json_path: str | None,
    no_progress: bool,
) -> None:
    """Run implementations over a seed set and compare their traces byte for byte."""
    specs = _impl_specs(impls, check, ("reference", "optimized"))
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare (or none)")
    if timeout_s is not None and timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout_s}")
    scenarios = _scenarios(profile_name, seeds)
    options = RunOptions(impls=specs, jobs=_jobs(jobs), artifacts=artifacts, timeout_s=timeout_s)
    summary = _run_with_progress(scenarios, options, show=not no_progress)
    from tracediff.report.terminal import summary_renderable

    _console().print(summary_renderable(summary))
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(summary_to_dict(summary), indent=2) + "\n")
    sys.exit(EXIT_OK if summary.ok else EXIT_FINDING)


def _run_with_progress(scenarios: list[Any], options: RunOptions, *, show: bool) -> RunSummary:
    from tracediff.runner import run_scenarios

    console = _console(stderr=True)
    if not show or not console.is_terminal:
        return run_scenarios(scenarios, options)
    findings = 0
    plans = 0
    progress = Progress(
        TextColumn("[bold]scenarios"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} plans/s"),
        TextColumn("{task.fields[findings]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("run", total=len(scenarios), rate="-", findings="no findings")

        def on_result(result: ScenarioResult) -> None:
            nonlocal findings, plans
            plans += result.impls[0].plans if result.impls else 0
            if result.status != IDENTICAL:
                findings += 1
            elapsed = progress.tasks[task].elapsed or 0.0
            progress.update(
                task,
                advance=1,
                rate=f"{plans / elapsed:,.0f}" if elapsed > 0 else "-",
                findings=f"[red]{findings} findings" if findings else "no findings",
            )

        return _run_scenarios_cb(scenarios, options, on_result)


def _run_scenarios_cb(
    scenarios: list[Any], options: RunOptions, on_result: Callable[[ScenarioResult], None]
) -> RunSummary:
    from tracediff.runner import run_scenarios

    return run_scenarios(scenarios, options, on_result)


def summary_to_dict(summary: RunSummary) -> dict[str, Any]:
    """The versioned JSON form of a run summary."""
    return {
        "format": "tracediff-run",
        "version": 1,
        "impls": list(summary.impls),
        "ok": summary.ok,
        "interrupted": summary.interrupted,
        "scenarios": summary.scenarios,
        "plans": summary.plans,
        "identical": summary.count(IDENTICAL),
        "diverged": summary.count(DIVERGED),
        "wall_seconds": round(summary.wall_seconds, 3),
        "results": [
            {
                "profile": r.profile,
                "seed": r.seed,
                "status": r.status,
                "features": r.features,
                "divergence": r.divergence,
                "plan": r.plan,
                "record_type": r.record_type,
                "failed_impl": r.failed_impl,
                "message": r.message,
                "artifacts": list(r.artifacts),
                "impls": [
                    {"name": s.name, "plans": s.plans, "records": s.records, "digest": s.digest}
                    for s in r.impls
                ],
            }
            for r in summary.results
        ],
    }
