"""The Markdown presenter: a report that fits a GitHub Actions step summary.

GitHub renders ``$GITHUB_STEP_SUMMARY`` as GitHub-flavoured Markdown and caps it at 1 MiB
per step, so this stays short whatever the run's size: the verdict, the gate's steps, one
table of signatures, each signature's smallest scenario explained inside ``<details>``, and
at most :data:`MAX_FINDINGS` findings listed.
"""

from __future__ import annotations

from tracediff.compare.model import DiffReport, Divergence
from tracediff.compare.signature import group_signatures
from tracediff.report import describe

MAX_FINDINGS = 50
MAX_EXPLAINED = 10
MAX_CHANGES = 10


def _cell(text: object) -> str:
    """A table cell: pipes escaped, newlines flattened."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """Inline code that survives backticks inside the text."""
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}" if text else ""


def render(report: DiffReport) -> str:
    lines: list[str] = []
    names = " vs ".join(report.impls)
    if report.ok:
        lines.append(f"## tracediff: ✅ all good ({names})")
    else:
        lines.append(
            f"## tracediff: ❌ {describe.plural(len(report.findings), 'finding')} ({names})"
        )
    lines.append("")
    lines.append(
        f"{describe.plural(len(report.outcomes), 'scenario')}, {report.plans:,} plans"
        + (f", {report.wall_seconds:.1f} s" if report.wall_seconds else "")
    )
    lines.append("")
    for note in report.notes:
        lines += [f"> note: {note}", ""]
    if report.steps:
        lines += ["| step | result | detail |", "|---|---|---|"]
        for step in report.steps:
            lines.append(f"| {_cell(step.name)} | {_cell(step.status)} | {_cell(step.detail)} |")
        lines.append("")
    groups = group_signatures(report.divergences)
    if groups:
        causes = any(group.causes for group in groups)
        lines += [
            "### Signatures",
            "",
            "| kind | field path | count | smallest scenario |"
            + (" state first differs in |" if causes else ""),
            "|---|---|---:|---|" + ("---|" if causes else ""),
        ]
        for group in groups:
            small = group.smallest
            cause = f" {_cell(', '.join(group.causes) or '-')} |" if causes else ""
            lines.append(
                f"| {group.signature.kind} | {_code(group.signature.path)} | {group.count} | "
                f"{_cell(small.label)} ({describe.plural(small.requests, 'request')}, "
                f"{describe.plural(small.plans, 'plan')}) |{cause}"
            )
        lines.append("")
        lines.append("### Smallest scenario of each signature")
        lines.append("")
        for group in groups[:MAX_EXPLAINED]:
            lines += _details(group.smallest)
        if len(groups) > MAX_EXPLAINED:
            lines.append(f"... and {len(groups) - MAX_EXPLAINED} more signatures.")
            lines.append("")
    findings = report.findings
    if findings:
        lines += [
            "### Findings",
            "",
            "| scenario | status | kind | where | field |",
            "|---|---|---|---|---|",
        ]
        for item in findings[:MAX_FINDINGS]:
            d = item.divergence
            if d is None:  # a golden-digest mismatch: its explanation is one sentence
                lines.append(
                    f"| {_cell(item.label)} | {item.status} | {_cell(item.suite)} | "
                    f"{_cell(item.explanation or '-')} | - |"
                )
                continue
            lines.append(
                f"| {_cell(item.label)} | {item.status} | {d.kind} | "
                f"{_cell(describe.where(d))} | {_code(d.location)} |"
            )
        reproducible = [item for item in findings[:MAX_FINDINGS] if item.reproduce]
        if reproducible:
            lines += ["", "<details><summary>Reproduce each finding</summary>", "", "```sh"]
            lines += [f"{item.reproduce}  # {item.label}" for item in reproducible]
            lines += ["```", "", "</details>"]
        if len(findings) > MAX_FINDINGS:
            lines.append("")
            lines.append(f"... and {len(findings) - MAX_FINDINGS} more findings.")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _details(d: Divergence) -> list[str]:
    a, b = d.impls
    lines = [
        f"<details><summary><b>{d.signature}</b> in {d.label}</summary>",
        "",
        f"- scenario: {d.label} · {d.features}",
        f"- compared: A = {_code(a)}, B = {_code(b)}",
        f"- where: {describe.where(d)}",
        f"- field: {_code(d.location)}",
        f"- kind: {describe.kind_line(d)}",
        *([f"- state: {describe.state_line(d)}"] if d.state or d.state_note else []),
        *([f"- then: {d.later}"] if d.later else []),
        "",
    ]
    if d.changes:
        lines += ["| field | A | B | ULPs | rel. error |", "|---|---|---|---:|---:|"]
        for change in describe.changes_headline_first(d)[:MAX_CHANGES]:
            shown_a, shown_b = describe.short_pair(change.a, change.b)
            lines.append(
                f"| {_code(change.location)} | {_cell(shown_a)} | {_cell(shown_b)} | "
                f"{describe.ulps_count(change.ulps)} | "
                f"{'-' if change.rel_error is None else f'{change.rel_error:.2e}'} |"
            )
        if d.total_changes > MAX_CHANGES:
            lines.append("")
            lines.append(f"... and {d.total_changes - MAX_CHANGES} more fields.")
        lines.append("")
    if d.message:
        tail = "\n".join(d.message.splitlines()[-12:]).replace("```", "'''")
        lines += ["```", tail, "```", ""]
    if d.context:
        lines += ["| # | A | B |", "|---:|---|---|"]
        for row in d.context:
            left = describe.record_summary(row.a, row.index, None if row.same else row.b)
            right = "≡" if row.same else describe.record_summary(row.b, row.index, row.a)
            mark = "≠ " if not row.same else ""
            lines.append(f"| {mark}{row.index} | {_cell(left)} | {_cell(right)} |")
        lines.append("")
    for note in d.notes:
        lines.append(f"> {note}")
        lines.append("")
    lines += ["</details>", ""]
    return lines
