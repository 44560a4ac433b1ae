"""Rich renderables for run summaries and trace inspection (tests render at a fixed width)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tracediff.compare.model import (
    FAILED,
    PASSED,
    DiffReport,
    Divergence,
    RoundMark,
    SignatureGroup,
    StepOutcome,
)
from tracediff.compare.signature import group_signatures
from tracediff.outcomes import Kind
from tracediff.report import describe
from tracediff.running.runner import DIVERGED, ERROR, IDENTICAL, TIMEOUT, RunSummary, ScenarioResult

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
    table.add_row("compared as", summary.equivalence.label)
    tolerated = summary.within_ulps
    if summary.equivalence.tolerant:
        table.add_row("identical (bytes or decisions)", f"{summary.count(IDENTICAL):,}")
        table.add_row("  of which equal only within ULPs", f"{len(tolerated):,}")
        floats = sum(r.floats_within for r in tolerated)
        table.add_row("  floats that differed", f"{floats:,} (max {summary.max_ulps} ULPs)")
    else:
        table.add_row("identical", f"{summary.count(IDENTICAL):,}")
    table.add_row("diverged", f"{summary.count(DIVERGED):,}")
    table.add_row("errors", f"{summary.count(ERROR):,}")
    table.add_row("timeouts", f"{summary.count(TIMEOUT):,}")
    if summary.skipped:
        table.add_row("not run (interrupted)", f"{summary.skipped:,}")
    if summary.resumed:
        table.add_row("taken from the --resume journal", f"{summary.resumed:,}")
    table.add_row("wall time", f"{summary.wall_seconds:.1f} s")
    for i, name in enumerate(summary.impls):
        plans = sum(r.impls[i].plans for r in summary.results if len(r.impls) > i)
        plan_s = sum(r.impls[i].plan_seconds for r in summary.results if len(r.impls) > i)
        drive_s = sum(r.impls[i].seconds for r in summary.results if len(r.impls) > i)
        median = f"{plan_s / plans * 1e6:,.0f} µs/plan" if plans else "-"
        table.add_row(f"{name}: plans/s (driving)", _rate(plans, drive_s))
        table.add_row(f"{name}: mean plan()", median)
    share = summary.simulation_share  # the part of driving that is tracediff's, not plan()'s
    if share is not None:
        table.add_row("simulation and driver (share of plan() time)", f"+{share:.0%}")
    harness = sum(r.harness_seconds for r in summary.results)
    if summary.plans:
        per_impl = harness / summary.plans / max(len(summary.impls), 1) * 1e6
        table.add_row("harness (check, encode, digest, compare)", f"{per_impl:,.1f} µs/plan/impl")
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
            f"interrupted: {describe.plural(summary.scenarios, 'scenario')} finished, "
            f"{summary.skipped} not run",
            style="bold yellow",
        )
    tolerated = summary.within_ulps
    if summary.ok and tolerated:
        floats = sum(r.floats_within for r in tolerated)
        return Text(
            f"decision-equivalent, NOT byte-identical: "
            f"{describe.plural(summary.scenarios, 'scenario')}, "
            f"{describe.plural(summary.plans, 'plan')}, {names}; "
            f"{describe.plural(len(tolerated), 'scenario')} differ in "
            f"{floats:,} floats by at most {summary.max_ulps} ULPs",
            style="bold yellow",
        )
    if summary.ok:
        mode = "" if not summary.equivalence.tolerant else " (no float differed)"
        return Text(
            f"identical{mode}: {describe.plural(summary.scenarios, 'scenario')}, "
            f"{describe.plural(summary.plans, 'plan')}, {names}",
            style="bold green",
        )
    diverged = summary.count(DIVERGED)
    failed = summary.count(ERROR) + summary.count(TIMEOUT)
    parts = []
    if diverged:
        parts.append(f"{diverged:,} diverged")
    if failed:
        parts.append(f"{failed:,} failed (error or timeout)")
    return Text(
        f"FINDINGS: {', '.join(parts)} of {describe.plural(summary.scenarios, 'scenario')} "
        f"({names})",
        style="bold red",
    )


# -- divergences and diff reports ------------------------------------------------------------
MAX_CHANGES_SHOWN = 12
MAX_TRACEBACK_LINES = 20


class DivergenceView:
    """A divergence as a rich renderable: headline, field changes, context side by side.

    Compose it like any renderable (``console.print(DivergenceView(d))``, inside a Group);
    comparison stays free of rich, this view only reads what it found.
    """

    def __init__(self, divergence: Divergence, *, title: str = "first divergence") -> None:
        self.divergence = divergence
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.divergence
        a, b = d.impls
        facts = Table.grid(padding=(0, 2))
        facts.add_column(style="bold")
        facts.add_column()
        facts.add_row("scenario", describe.scenario_line(d))
        facts.add_row("compared", f"A = {a}, B = {b}")
        facts.add_row("where", describe.where(d))
        facts.add_row("field", Text(d.location, style="bold"))
        facts.add_row("kind", Text(describe.kind_line(d), style=_KIND_STYLE.get(d.kind, "")))
        facts.add_row("signature", str(d.signature))
        if d.state is not None or d.state_note:
            style = "bold" if d.state is not None else "dim"
            facts.add_row("state", Text(describe.state_line(d), style=style))
        if d.later:
            facts.add_row("then", d.later)
        parts: list[RenderableType] = [facts]
        if d.changes:
            parts.append(_changes_table(d))
        if (d.kind in (ERROR, TIMEOUT) or d.later) and d.message:
            lines = d.message.splitlines()
            shown = lines[-MAX_TRACEBACK_LINES:]
            if len(lines) > len(shown):
                shown.insert(0, f"... ({len(lines) - len(shown)} lines above)")
            parts.append(Text("\n".join(shown), style="red"))
        if d.context:
            parts.append(_context_table(d))
        if d.timeline_a or d.timeline_b:
            parts.append(_rounds_table(d))
        for note in d.notes:
            parts.append(Text(f"note: {note}", style="yellow"))
        # a Text title: rich reads a str title as markup, and the label holds names from files
        title = Text(f"{self.title} · {d.label}")
        yield Panel(Group(*parts), title=title, title_align="left")


_KIND_STYLE: dict[str, str] = {kind: kind.style for kind in Kind}  # found by the kind's word
_STEP_STYLE: dict[str, str] = {PASSED: "green", FAILED: "bold red"}


def _changes_table(d: Divergence) -> Table:
    a, b = (describe.short_name(name) for name in d.impls)
    table = Table(title=f"fields that differ ({d.total_changes})", title_justify="left")
    shown = describe.changes_headline_first(d)[:MAX_CHANGES_SHOWN]
    # The field name is what a reader looks for: at a narrow width it wraps, never is cut.
    table.add_column("field", overflow="fold")
    table.add_column(f"A: {a}", overflow="fold")
    table.add_column(f"B: {b}", overflow="fold")
    table.add_column("ULPs", justify="right")
    table.add_column("rel. error", justify="right")
    for change in shown:
        shown_a, shown_b = describe.short_pair(change.a, change.b)
        table.add_row(
            change.location,
            shown_a,
            shown_b,
            describe.ulps_count(change.ulps),
            "-" if change.rel_error is None else f"{change.rel_error:.2e}",
        )
    if d.total_changes > MAX_CHANGES_SHOWN:
        table.caption = f"... and {d.total_changes - MAX_CHANGES_SHOWN} more"
    return table


def _context_table(d: Divergence) -> Table:
    a, b = (describe.short_name(name) for name in d.impls)
    table = Table(title="context", caption=describe.context_caption(d), title_justify="left")
    table.add_column("#", justify="right")
    table.add_column(f"A: {a}", overflow="fold", ratio=1)
    table.add_column(f"B: {b}", overflow="fold", ratio=1)
    for row in d.context:
        if row.same:
            left = describe.record_summary(row.a, row.index)
            table.add_row(str(row.index), left, Text("≡ same", style="dim"))
        else:
            left = describe.record_summary(row.a, row.index, row.b)
            right = describe.record_summary(row.b, row.index, row.a)
            if row.b is None and d.kind == ERROR:
                right = f"raised: {describe.failure_tail(d)}"
            table.add_row(Text(f"≠ {row.index}", style="bold red"), left, Text(right, style="bold"))
    return table


def _rounds_table(d: Divergence) -> Table:
    a, b = (describe.short_name(name) for name in d.impls)
    table = Table(title="rounds around the divergence", title_justify="left")
    table.add_column("plan", justify="right")
    table.add_column(f"A: {a}", overflow="fold")
    table.add_column(f"B: {b}", overflow="fold")
    marks_b = {m.plan: m for m in d.timeline_b}
    plans = sorted({m.plan for m in d.timeline_a} | set(marks_b))
    marks_a = {m.plan: m for m in d.timeline_a}
    shown = [p for p in plans if d.plan is None or p >= d.plan - 3][:8]
    for plan in shown:
        left, right = marks_a.get(plan), marks_b.get(plan)
        differ = describe.rounds_differ(d, plan, left, right)
        table.add_row(
            Text(str(plan), style="bold red" if differ else ""),
            _round_cell(left),
            _round_cell(right) + differ if differ else Text("≡ same", style="dim"),
        )
    return table


def _round_cell(mark: RoundMark | None) -> str:
    if mark is None:
        return "—"
    if mark.idle:
        return "no round"
    if mark.lanes == 0:
        return f"{mark.source}: prefill only"
    extra = " +prefill" if mark.prefill else ""
    return (
        f"{mark.source} {mark.shape} · {describe.plural(mark.lanes, 'lane')}, "
        f"{describe.plural(mark.drafts, 'draft')}{extra}"
    )


def groups_renderable(groups: Sequence[SignatureGroup]) -> Table:
    table = Table(title=f"signatures ({len(groups)})", header_style="bold", title_justify="left")
    table.add_column("kind")
    table.add_column("signature (field path)", overflow="fold")
    table.add_column("count", justify="right")
    table.add_column("smallest scenario")
    causes = any(group.causes for group in groups)
    if causes:
        table.add_column("state first differs in", overflow="fold")
    for group in groups:
        small = group.smallest
        cells: list[RenderableType] = [
            Text(group.signature.kind, style=_KIND_STYLE.get(group.signature.kind, "")),
            Text(group.signature.path),
            f"{group.count:,}",
            f"{small.label} ({describe.plural(small.requests, 'request')}, "
            f"{describe.plural(small.plans, 'plan')})",
        ]
        if causes:
            cells.append(Text(", ".join(group.causes) or "-"))
        table.add_row(*cells)
    return table


def steps_renderable(steps: Sequence[StepOutcome]) -> Table:
    table = Table(title="gate", header_style="bold", title_justify="left")
    table.add_column("step")
    table.add_column("result")
    table.add_column("detail")
    for step in steps:
        style = _STEP_STYLE.get(step.status, "yellow")
        table.add_row(step.name, Text(step.status, style=style), step.detail)
    return table


def report_renderable(report: DiffReport, *, explained: int = 3) -> RenderableType:
    """A run's or gate's findings: steps, signature groups, the smallest of the first groups
    explained in full, and a verdict line."""
    parts: list[RenderableType] = []
    if report.steps:
        parts.append(steps_renderable(report.steps))
    groups = group_signatures(report.divergences)
    if groups:
        parts.append(groups_renderable(groups))
        for group in groups[:explained]:
            parts.append(DivergenceView(group.smallest, title=str(group.signature)))
        if len(groups) > explained:
            parts.append(Text(f"... {len(groups) - explained} more signatures in the reports"))
    findings = report.findings
    plain = [f for f in findings if f.divergence is None and f.explanation]
    if plain:
        table = Table(title=f"other findings ({len(plain)})", header_style="bold")
        table.add_column("scenario")
        table.add_column("explanation", overflow="fold")
        for item in plain[:MAX_LISTED]:
            table.add_row(item.label, item.explanation)
        if len(plain) > MAX_LISTED:
            table.caption = f"... and {len(plain) - MAX_LISTED} more"
        parts.append(table)
    if report.ok:
        verdict = Text(
            f"all good: {describe.plural(len(report.outcomes), 'scenario')}, "
            f"{report.plans:,} plans, {' vs '.join(report.impls)}",
            style="bold green",
        )
    else:
        verdict = Text(
            f"FINDINGS: {len(findings):,} of {describe.plural(len(report.outcomes), 'scenario')} "
            f"({' vs '.join(report.impls)})",
            style="bold red",
        )
    for note in report.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    parts.append(verdict)
    return Group(*parts)


def diff_renderable(report: DiffReport) -> RenderableType:
    """``tracediff diff``: one line when identical, else the explained first difference."""
    outcome = report.outcomes[0] if report.outcomes else None
    if outcome is None or outcome.divergence is None:
        if len(report.outcomes) > 1 or report.steps:
            return report_renderable(report)
        names = " and ".join(report.impls)
        return Text(f"identical: {names} have the same compared bytes", style="bold green")
    if len(report.outcomes) > 1 or report.steps:
        return report_renderable(report)
    d = outcome.divergence
    head = Text(
        f"different: first difference at record {d.index}"
        + (f" (plan {d.plan})" if d.plan is not None else "")
        + f": {d.kind}",
        style="bold red",
    )
    return Group(head, DivergenceView(d))
