"""The HTML presenter: one self-contained file (inline CSS and SVG; no script, no fetch).

It shows what the Markdown summary shows and more: each signature's smallest scenario with
its timeline picture (:mod:`tracediff.report.timeline_svg`), its field changes, and its
context side by side, each record expandable to its full JSON. The markup is well-formed
XML as well as HTML, so it can be checked with any XML parser.
"""

from __future__ import annotations

import json
import re
from html import escape
from typing import Any

from tracediff.compare.model import FAILED, PASSED, DiffReport, Divergence
from tracediff.compare.signature import group_signatures
from tracediff.report import describe
from tracediff.report.timeline_svg import timeline_svg

MAX_EXPLAINED = 20
TIMELINE_CAPTION = (
    "Rounds by plan, A above B. Bar height: draft width (W or Q_pad); colour: lane count "
    "(darker is more; blue rect, green ragged; grey a prefill-only round). A bar's label is "
    "its shape: 1×7 is a rect round of B_pad 1 lane slot by W 7 draft positions, 1q8 a "
    "ragged round of B_pad 1 by Q_pad 8 packed draft tokens. Orange outline: acceptance "
    "probe; red outline: the two rounds differ (shape, lanes or drafts; hover for details); "
    "dashed line: the first divergence."
)
MAX_FINDINGS = 500

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1000px;
       color: #1b1f23; padding: 0 12px; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0 16px; width: 100%; }
th, td { border: 1px solid #d0d7de; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre, td.mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
                     font-size: 12px; }
pre { background: #f6f8fa; padding: 8px; overflow-x: auto; white-space: pre-wrap; }
.ok { color: #1a7f37; } .bad { color: #cf222e; } .warn { color: #9a6700; }
tr.differs td { background: #ffebe9; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; }
dl.facts dt { font-weight: bold; } dl.facts dd { margin: 0; }
section.divergence { border-top: 2px solid #d0d7de; }
figure { margin: 12px 0; } figcaption { color: #57606a; font-size: 12px; }
svg.timeline { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
details summary { cursor: pointer; }
mark { background: #ffd33d; color: inherit; padding: 0 1px; }
dd.state { font-weight: bold; } dd.state.none { font-weight: normal; color: #57606a; }
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def render(report: DiffReport) -> str:
    names = " vs ".join(report.impls)
    if report.ok:
        heading = f'<h1 class="ok">tracediff: all good ({_e(names)})</h1>'
    else:
        count = describe.plural(len(report.findings), "finding")
        heading = f'<h1 class="bad">tracediff: {_e(count)} ({_e(names)})</h1>'
    body = [
        heading,
        f"<p>{_e(report.title)} · {_e(describe.plural(len(report.outcomes), 'scenario'))}, "
        f"{report.plans:,} plans"
        + (f", {report.wall_seconds:.1f} s" if report.wall_seconds else "")
        + "</p>",
    ]
    if report.steps:
        body.append("<h2>Gate</h2><table><tr><th>step</th><th>result</th><th>detail</th></tr>")
        for step in report.steps:
            css = _STEP_CSS.get(step.status, "warn")
            body.append(
                f'<tr><td>{_e(step.name)}</td><td class="{css}">{_e(step.status)}</td>'
                f"<td>{_e(step.detail)}</td></tr>"
            )
        body.append("</table>")
    groups = group_signatures(report.divergences)
    if groups:
        causes = any(group.causes for group in groups)
        body.append(
            '<h2>Signatures</h2><table class="signatures"><tr><th>kind</th><th>field path</th>'
            "<th>count</th><th>smallest scenario</th>"
            + ("<th>state first differs in</th>" if causes else "")
            + "</tr>"
        )
        for group in groups:
            small = group.smallest
            cause = f'<td class="mono">{_e(", ".join(group.causes) or "-")}</td>' if causes else ""
            body.append(
                f"<tr><td>{_e(group.signature.kind)}</td>"
                f'<td class="mono">{_e(group.signature.path)}</td>'
                f'<td class="num">{group.count}</td>'
                f'<td><a href="#{_anchor(small)}">{_e(small.label)}</a> '
                f"({_e(describe.plural(small.requests, 'request'))}, "
                f"{_e(describe.plural(small.plans, 'plan'))})</td>{cause}</tr>"
            )
        body.append("</table>")
        for group in groups[:MAX_EXPLAINED]:
            body.append(_section(group.smallest, str(group.signature)))
        if len(groups) > MAX_EXPLAINED:
            body.append(f"<p>... and {len(groups) - MAX_EXPLAINED} more signatures.</p>")
    findings = report.findings
    if findings:
        body.append(
            "<h2>Findings</h2><table><tr><th>scenario</th><th>status</th><th>kind</th>"
            "<th>where</th><th>field</th></tr>"
        )
        for item in findings[:MAX_FINDINGS]:
            d = item.divergence
            reproduce = (
                f'<br/><span class="mono">{_e(item.reproduce)}</span>' if item.reproduce else ""
            )
            if d is None:  # a golden-digest mismatch: its explanation is one sentence
                body.append(
                    f"<tr><td>{_e(item.label)}</td><td>{_e(item.status)}</td>"
                    f"<td>{_e(item.suite)}</td>"
                    f"<td>{_e(item.explanation or '-')}{reproduce}</td><td>-</td></tr>"
                )
                continue
            body.append(
                f"<tr><td>{_e(item.label)}</td><td>{_e(item.status)}</td>"
                f"<td>{_e(d.kind)}</td>"
                f"<td>{_e(describe.where(d))}{reproduce}</td>"
                f'<td class="mono">{_e(d.location)}</td></tr>'
            )
        body.append("</table>")
        if len(findings) > MAX_FINDINGS:
            body.append(f"<p>... and {len(findings) - MAX_FINDINGS} more findings.</p>")
    for note in report.notes:
        body.append(f'<p class="warn">{_e(note)}</p>')
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8"/>'
        '<meta name="viewport" content="width=device-width, initial-scale=1"/>'
        f"<title>{_e(report.title)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _anchor(d: Divergence) -> str:
    return "d-" + re.sub(r"[^A-Za-z0-9_-]", "-", d.label)


def _section(d: Divergence, title: str) -> str:
    a, b = d.impls
    out = [
        f'<section class="divergence" id="{_anchor(d)}">',
        f"<h2>{_e(title)} · {_e(d.label)}</h2>",
        '<dl class="facts">',
        f"<dt>scenario</dt><dd>{_e(describe.scenario_line(d))}</dd>",
        f"<dt>compared</dt><dd>A = <code>{_e(a)}</code>, B = <code>{_e(b)}</code></dd>",
        f"<dt>where</dt><dd>{_e(describe.where(d))}</dd>",
        f"<dt>field</dt><dd><code>{_e(d.location)}</code></dd>",
        f"<dt>kind</dt><dd>{_e(describe.kind_line(d))}</dd>",
        f"<dt>signature</dt><dd><code>{_e(d.signature)}</code></dd>",
    ]
    if d.state is not None or d.state_note:
        css = "state" if d.state is not None else "state none"
        out.append(f'<dt>state</dt><dd class="{css}">{_e(describe.state_line(d))}</dd>')
    if d.later:
        out.append(f"<dt>then</dt><dd>{_e(d.later)}</dd>")
    out.append("</dl>")
    svg = timeline_svg(d)
    if svg:
        out += [
            "<figure>",
            svg,
            f"<figcaption>{_e(TIMELINE_CAPTION)}</figcaption>",
            "</figure>",
        ]
    else:
        out.append(
            '<p class="no-timeline">No timeline to draw (the model records none, or none was '
            "re-run).</p>"
        )
    if d.changes:
        out.append(
            f'<table class="changes"><caption>fields that differ ({d.total_changes})</caption>'
            f"<tr><th>field</th><th>A: {_e(a)}</th><th>B: {_e(b)}</th><th>ULPs</th>"
            "<th>rel. error</th></tr>"
        )
        for change in describe.changes_headline_first(d):
            shown_a, shown_b = _marked_pair(change.a, change.b, 120)
            out.append(
                f'<tr><td class="mono">{_e(change.location)}</td>'
                f'<td class="mono">{shown_a}</td>'
                f'<td class="mono">{shown_b}</td>'
                f'<td class="num">{describe.ulps_count(change.ulps)}</td>'
                f'<td class="num">'
                f"{'-' if change.rel_error is None else f'{change.rel_error:.2e}'}</td></tr>"
            )
        out.append("</table>")
        if d.total_changes > len(d.changes):
            out.append(f"<p>... and {d.total_changes - len(d.changes)} more fields.</p>")
    if d.message:
        out.append(f'<pre class="traceback">{_e(d.message)}</pre>')
    if d.context:
        out.append(
            f'<table class="context"><caption>{_e(describe.context_caption(d))}</caption>'
            f"<tr><th>#</th><th>A: {_e(a)}</th><th>B: {_e(b)}</th></tr>"
        )
        for row in d.context:
            css = "" if row.same else ' class="differs"'
            out.append(
                f'<tr{css}><td class="num">{row.index}</td>'
                f"<td>{_record_cell(row.a, row.index, None if row.same else row.b)}</td>"
                f"<td>{_record_cell(row.b, row.index, None if row.same else row.a)}</td></tr>"
            )
        out.append("</table>")
    for note in d.notes:
        out.append(f'<p class="warn">note: {_e(note)}</p>')
    out.append("</section>")
    return "\n".join(out)


def _marked_pair(a: Any, b: Any, limit: int) -> tuple[str, str]:
    """Both values, escaped, cut around their first difference, the differing part marked."""
    first, second = describe.diff_window(describe.full_text(a), describe.full_text(b), limit)
    return _marked(first), _marked(second)


def _marked(parts: tuple[str, str, str]) -> str:
    before, middle, after = parts
    marked = f"<mark>{_e(middle)}</mark>" if middle else ""
    return f"{_e(before)}{marked}{_e(after)}"


def _record_cell(
    record: dict[str, Any] | None, index: int, other: dict[str, Any] | None = None
) -> str:
    summary = _e(describe.record_summary(record, index, other))
    if record is None:
        return summary
    full = _e(json.dumps(record, indent=1, ensure_ascii=False))
    return f'<details><summary class="mono">{summary}</summary><pre>{full}</pre></details>'


_STEP_CSS: dict[str, str] = {PASSED: "ok", FAILED: "bad"}
