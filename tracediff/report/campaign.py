"""A campaign's summary for the terminal: the run's summary table, the signatures seen,
throughput per worker, and the verdict (rich renderables; the CLI prints them)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.campaign.store import Totals

MAX_LISTED = 20


def workers_renderable(found: dict[str, list[float]]) -> RenderableType:
    """Per worker: scenarios, busy seconds and scenarios per busy second."""
    workers = Table(title="throughput per worker", header_style="bold")
    for column in ("worker", "scenarios", "busy s", "scenarios/s busy"):
        workers.add_column(column, justify="right" if column != "worker" else "left")
    for name, (done, busy) in sorted(found.items())[:MAX_LISTED]:
        rate = f"{done / busy:,.1f}" if busy > 0 else "-"
        workers.add_row(name, f"{done:,.0f}", f"{busy:,.1f}", rate)
    if len(found) > MAX_LISTED:
        workers.caption = f"... and {len(found) - MAX_LISTED} more"
    return workers


def campaign_renderable(
    totals: Totals,
    impls: tuple[str, ...],
    wall_seconds: float,
    *,
    remaining: int = 0,
    stopped: str | None = None,
) -> RenderableType:
    table = Table(title="tracediff campaign", header_style="bold")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("scenarios", f"{totals.scenarios:,}")
    table.add_row("plans (per implementation)", f"{totals.plans:,}")
    for status in ("identical", "diverged", "error", "timeout"):
        label = {"error": "errors", "timeout": "timeouts"}.get(status, status)
        table.add_row(label, f"{totals.statuses.get(status, 0):,}")
    if remaining:
        table.add_row("not run yet", f"{remaining:,}")
    table.add_row("wall time (this invocation)", f"{wall_seconds:.1f} s")
    for name in impls:
        plans = totals.impl_plans.get(name, 0)
        driving = totals.impl_seconds.get(name, 0.0)
        inside = totals.impl_plan_seconds.get(name, 0.0)
        rate = f"{plans / driving:,.0f}" if driving > 0 else "-"
        table.add_row(f"{name}: plans/s (driving)", rate)
        table.add_row(
            f"{name}: mean plan()", f"{inside / plans * 1e6:,.0f} µs/plan" if plans else "-"
        )
    parts: list[RenderableType] = [table]
    if totals.signatures:
        signatures = Table(title=f"signatures ({len(totals.signatures)})", header_style="bold")
        for column in ("signature", "scenarios", "lowest seed"):
            signatures.add_column(column)
        ranked = sorted(totals.signatures.items(), key=lambda item: (-item[1][0], item[0]))
        for signature, (count, seed) in ranked[:MAX_LISTED]:
            signatures.add_row(signature, f"{count:,}", str(seed))
        parts.append(signatures)
    parts.append(workers_renderable(totals.workers))
    names = " vs ".join(impls)
    if stopped:
        verdict = Text(
            f"stopped ({stopped}): {totals.scenarios:,} scenarios in the store, "
            f"{totals.findings:,} findings, {remaining:,} not run; run the same command to "
            "go on",
            style="bold yellow",
        )
    elif totals.findings:
        verdict = Text(
            f"FINDINGS: {totals.findings:,} of {totals.scenarios:,} scenarios ({names})",
            style="bold red",
        )
    else:
        verdict = Text(
            f"identical: {totals.scenarios:,} scenarios, {totals.plans:,} plans, {names}",
            style="bold green",
        )
    parts.append(verdict)
    return Group(*parts)
