"""Rich renderables for run summaries and trace inspection (tests render at a fixed width)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.runner import DIVERGED, ERROR, IDENTICAL, TIMEOUT, RunSummary, ScenarioResult

MAX_LISTED = 20


def _rate(plans: int, seconds: float) -> str:
    return f"{plans / seconds:,.0f}" if seconds > 0 else "-"


def summary_renderable(summary: RunSummary) -> RenderableType:
    """The run's summary table, the findings list and a one-line verdict."""
    table = Table(title="tracediff run", show_header=True, header_style="bold")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("scenarios", f"{summary.scenarios:,}")
    table.add_row("plans (per implementation)", f"{summary.plans:,}")
    table.add_row("identical", f"{summary.count(IDENTICAL):,}")
    table.add_row("diverged", f"{summary.count(DIVERGED):,}")
    table.add_row("errors", f"{summary.count(ERROR):,}")
    table.add_row("timeouts", f"{summary.count(TIMEOUT):,}")
    if summary.skipped:
        table.add_row("not run (interrupted)", f"{summary.skipped:,}")
    table.add_row("wall time", f"{summary.wall_seconds:.1f} s")
    for i, name in enumerate(summary.impls):
        plans = sum(r.impls[i].plans for r in summary.results if len(r.impls) > i)
        plan_s = sum(r.impls[i].plan_seconds for r in summary.results if len(r.impls) > i)
        drive_s = sum(r.impls[i].seconds for r in summary.results if len(r.impls) > i)
        median = f"{plan_s / plans * 1e6:,.0f} µs/plan" if plans else "-"
        table.add_row(f"{name}: plans/s (driving)", _rate(plans, drive_s))
        table.add_row(f"{name}: mean plan()", median)
    harness = sum(r.harness_seconds for r in summary.results)
    if summary.plans:
        per_impl = harness / summary.plans / max(len(summary.impls), 1) * 1e6
        table.add_row("harness (encode+compare)", f"{per_impl:,.1f} µs/plan/impl")
    parts: list[RenderableType] = [table]
    findings = [r for r in summary.results if r.status != IDENTICAL]
    if findings:
        parts.append(findings_renderable(findings))
    parts.append(verdict_text(summary))
    return Group(*parts)


def findings_renderable(findings: list[ScenarioResult]) -> RenderableType:
    table = Table(title=f"findings ({len(findings)})", header_style="bold")
    for column in ("scenario", "status", "record", "type", "plan", "detail"):
        table.add_column(column)
    for result in findings[:MAX_LISTED]:
        detail = result.message.splitlines()[-1] if result.message else result.features
        table.add_row(
            result.label,
            result.status,
            "-" if result.divergence is None else str(result.divergence),
            result.record_type or "-",
            "-" if result.plan is None else str(result.plan),
            detail[:100],
        )
    if len(findings) > MAX_LISTED:
        table.caption = f"... and {len(findings) - MAX_LISTED} more"
    return table


def verdict_text(summary: RunSummary) -> Text:
    names = " vs ".join(summary.impls)
    if summary.interrupted:
        return Text(
            f"interrupted: {summary.scenarios} scenarios finished, {summary.skipped} not run",
            style="bold yellow",
        )
    if summary.ok:
        return Text(
            f"identical: {summary.scenarios:,} scenarios, {summary.plans:,} plans, {names}",
            style="bold green",
        )
    bad = summary.scenarios - summary.count(IDENTICAL)
    return Text(
        f"DIVERGED: {bad:,} of {summary.scenarios:,} scenarios differ ({names})",
        style="bold red",
    )
