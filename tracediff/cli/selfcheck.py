"""``tracediff selfcheck``: each implementation twice per scenario, for nondeterminism."""

from __future__ import annotations

import json
import sys
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    main,
    resolve_executor,
    resolve_impls,
    resolve_jobs,
)
from tracediff.cli.output import MAX_LISTED, progress_bar, text_console
from tracediff.cli.params import (
    executor_option,
    impl_option,
    json_file_option,
    profile_option,
    seeds_option,
    timeout_option,
    workload_option,
)


@main.command()
@profile_option()
@workload_option
@seeds_option("Seeds instead of the profile's: 0..1055, 3,7.")
@impl_option("Implementation to self-check (repeat; default reference and optimized).")
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all).")
@timeout_option("Per-scenario limit (s).")
@json_file_option("Also write the result as JSON to this file.")
@executor_option
@click.option("--no-progress", is_flag=True, help="No progress bar (also off when not a TTY).")
def selfcheck(
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    impls: tuple[str, ...],
    check: bool,
    jobs: int | None,
    timeout_s: float | None,
    json_path: str | None,
    executor_text: str,
    no_progress: bool,
) -> None:
    """Run each implementation twice per scenario (two fresh instances) and compare.

    Reports nondeterminism (the two runs differ), apart from any divergence between
    implementations. Exit 0 when every implementation is deterministic and never failed,
    1 otherwise (nondeterminism, or an error or timeout finding).
    """
    from tracediff.cli.app import resolve_scenarios
    from tracediff.executor import open_executor
    from tracediff.running.selfcheck import self_check

    specs = resolve_impls(impls, check, ("reference", "optimized"))
    executor_spec = resolve_executor(executor_text)
    scenarios = resolve_scenarios(profile_name, seeds)
    with (
        progress_bar(not no_progress, len(scenarios) * len(specs), "self-check") as advance,
        open_executor(executor_spec, jobs=resolve_jobs(jobs)) as executor,
    ):
        summary = self_check(
            scenarios, specs, timeout_s=timeout_s, on_result=advance, executor=executor
        )
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(summary.to_dict(), indent=1) + "\n")
    text_console().print(selfcheck_renderable(summary))
    sys.exit(EXIT_OK if summary.ok else EXIT_FINDING)


def selfcheck_renderable(summary: Any) -> RenderableType:
    """The self-check's findings table (if any) and its verdict line; ``tracediff run
    --self-check`` prints the same under the run's summary."""
    from tracediff.running.selfcheck import ERROR, NONDETERMINISTIC, TIMEOUT

    parts: list[RenderableType] = []
    findings = [r for r in summary.results if r.status in (NONDETERMINISTIC, ERROR, TIMEOUT)]
    if findings:
        table = Table(title=f"self-check findings ({len(findings)})", header_style="bold")
        for column in ("scenario", "impl", "status", "record", "type", "plan", "detail"):
            table.add_column(column)
        for r in findings[:MAX_LISTED]:
            table.add_row(
                r.label,
                r.impl,
                r.status,
                "-" if r.divergence is None else str(r.divergence),
                r.record_type or "-",
                "-" if r.plan is None else str(r.plan),
                r.message[:80],
            )
        if len(findings) > MAX_LISTED:
            table.caption = f"... and {len(findings) - MAX_LISTED} more"
        parts.append(table)
    scenarios_n = len({(r.profile, r.seed) for r in summary.results})
    if summary.ok:
        parts.append(
            Text(
                f"deterministic: {', '.join(summary.impls)} each decided the same twice on "
                f"{scenarios_n:,} scenarios ({summary.wall_seconds:.1f} s)",
                style="bold green",
            )
        )
    elif summary.deterministic:
        bad = sorted({r.impl for r in summary.errors})
        parts.append(
            Text(
                f"ERRORS: {', '.join(bad)} failed (error or timeout) in {len(summary.errors)} "
                f"of {scenarios_n:,} scenarios; no nondeterminism seen",
                style="bold red",
            )
        )
    else:
        bad = sorted({r.impl for r in summary.nondeterministic})
        parts.append(
            Text(
                f"NONDETERMINISTIC: {', '.join(bad)} decided differently on a second run in "
                f"{len(summary.nondeterministic)} of {scenarios_n:,} scenarios",
                style="bold red",
            )
        )
    return Group(*parts)
