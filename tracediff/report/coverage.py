"""The coverage table for ``tracediff coverage``: per feature, scenarios and plans."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tracediff.campaign.clauses import CoverageReport


def coverage_renderable(report: CoverageReport) -> RenderableType:
    """One row per feature (missing required ones in red; informational ones, which do not
    decide the verdict, dim and last), then a one-line verdict."""
    scenarios = len(report.seeds)
    table = Table(
        title=f"tracediff coverage: profile {report.profile} ({report.impl})",
        header_style="bold",
    )
    table.add_column("feature")
    table.add_column("scenarios", justify="right")
    table.add_column("share", justify="right")
    table.add_column("plans", justify="right")
    informational = False
    for feature in report.features:
        if not feature.required and not informational:
            informational = True
            table.add_section()
        share = f"{feature.scenarios / scenarios:.0%}" if scenarios else "-"
        style = None
        if not feature.required:
            style = "dim"
        elif feature.scenarios < max(1, report.min_scenarios):
            style = "bold red"
        name = feature.name if feature.required else f"{feature.name} (info)"
        table.add_row(name, f"{feature.scenarios:,}", share, f"{feature.plans:,}", style=style)
    table.caption = f"{scenarios:,} scenarios, {report.plans:,} plans, {report.wall_seconds:.1f} s"
    if not report.clauses:
        return Group(table, verdict_text(report))
    return Group(table, clause_table(report), verdict_text(report))


def clause_table(report: CoverageReport) -> Table:
    """Rule coverage: per clause of the [fixed] rules, the scenarios and plans it decided in.

    Clauses proved unreachable (in the model's spec) are dim and marked with their proof."""
    scenarios = len(report.scenarios)
    table = Table(title="decided by: rule clauses", header_style="bold")
    table.add_column("clause")
    table.add_column("rule")
    table.add_column("scenarios", justify="right")
    table.add_column("share", justify="right")
    table.add_column("plans", justify="right")
    for row in report.clauses:
        share = f"{row.scenarios / scenarios:.0%}" if scenarios else "-"
        style = None
        name = row.name
        if not row.required:
            style = "dim"
            name = f"{row.name} (never: see {row.spec}#{row.proof})"
        elif row.scenarios < max(1, report.min_scenarios):
            style = "bold red"
        table.add_row(name, row.rule, f"{row.scenarios:,}", share, f"{row.plans:,}", style=style)
    return table


def verdict_text(report: CoverageReport) -> Text:
    if report.complete:
        return Text(
            "complete: every feature exercised"
            + (" and every required rule clause decided" if report.clauses else "")
            + (f" in at least {report.min_scenarios} scenarios" if report.min_scenarios > 1 else "")  # noqa: E501
            + f" by profile {report.profile}",
            style="bold green",
        )
    if report.min_scenarios <= 1:
        return Text(
            f"MISSING: profile {report.profile} never exercises {', '.join(report.missing)}",
            style="bold red",
        )
    counts = {f.name: f.scenarios for f in (*report.features, *report.clauses)}
    thin = ", ".join(f"{name} ({counts.get(name, 0)})" for name in report.missing)
    return Text(
        f"MISSING: profile {report.profile} exercises in fewer than {report.min_scenarios} "
        f"scenarios: {thin}",
        style="bold red",
    )
