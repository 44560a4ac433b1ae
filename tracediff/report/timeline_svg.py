"""The timeline picture: both implementations' rounds as an inline SVG, divergence marked.

x: one slot per plan (plan numbers and the clock on the axis); y: one band per
implementation. Each round is a bar: its height is the round's draft width (W for rect,
Q_pad for ragged), its colour darkens with the lane count (blue: rect, green: ragged), an
orange outline marks an acceptance probe, a red outline a round that differs between the
two implementations (its shape, lanes or any lane's prefix; each bar's tooltip has them);
wide enough slots carry the shape (``8×3``, ``16q48``). A dashed red line marks the first
divergence. The SVG has no script and no external reference.
"""

from __future__ import annotations

from html import escape

from tracediff.compare.model import ERROR, TIMEOUT, Divergence, RoundMark
from tracediff.report import describe

WIDTH = 960
LEFT, RIGHT = 150, 16
TOP = 34
BAND = 96
GAP = 22
AXIS = 46
MAX_TICKS = 12


def _attr(text: str) -> str:
    return escape(text, quote=True)


def timeline_svg(d: Divergence) -> str:
    """The picture for one divergence, or "" when neither side recorded rounds."""
    marks = ({m.plan: m for m in d.timeline_a}, {m.plan: m for m in d.timeline_b})
    plans = sorted(set(marks[0]) | set(marks[1]))
    if not plans:
        return ""
    step = (WIDTH - LEFT - RIGHT) / len(plans)
    bar = max(step * 0.78, 1.0)
    widest = max((m.width for side in marks for m in side.values()), default=0)
    most_lanes = max((m.lanes for side in marks for m in side.values()), default=0) or 1
    height = TOP + 2 * BAND + GAP + AXIS
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img" '
        f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" '
        f'aria-label="{_attr(f"rounds of {d.impls[0]} and {d.impls[1]} by plan")}">',
        f"<title>{escape(f'rounds by plan: A = {d.impls[0]}, B = {d.impls[1]}')}</title>",
        f'<rect class="frame" x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
    ]
    for side, (name, letter) in enumerate(zip(d.impls, "AB", strict=True)):
        top = TOP + side * (BAND + GAP)
        out.append(f'<g class="band" data-impl="{letter}">')
        out.append(
            f'<rect class="band-bg" x="{LEFT}" y="{top}" width="{WIDTH - LEFT - RIGHT}" '
            f'height="{BAND}" fill="#f4f6f8"/>'
        )
        out.append(
            f'<text class="band-label" x="{LEFT - 8}" y="{top + BAND / 2:.1f}" '
            f'text-anchor="end" font-size="13" font-family="sans-serif" fill="#222">'
            f"{escape(letter)}: {escape(_clip(_short_name(name), 15))}</text>"
        )
        for i, plan in enumerate(plans):
            mark = marks[side].get(plan)
            if mark is None:
                continue
            other = marks[1 - side].get(plan)
            # the same test as the rounds table: rows that differ never look the same
            differs = bool(describe.rounds_differ(d, plan, mark, other))
            out.append(
                _bar(
                    mark,
                    differs,
                    LEFT + i * step + (step - bar) / 2,
                    top,
                    bar,
                    widest,
                    most_lanes,
                    step,
                )
            )
        out.append("</g>")
    out += _axis(plans, marks, step, TOP + 2 * BAND + GAP)
    out += _marker(d, plans, step, height)
    out.append("</svg>")
    return "\n".join(out)


def _short_name(name: str) -> str:
    """``tests.impls.summation:ReversedSumScheduler`` -> ``ReversedSumScheduler``."""
    return name.rsplit(":", 1)[-1].rsplit(".", 1)[-1] if ":" in name else name


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _bar(
    mark: RoundMark,
    differs: bool,
    x: float,
    top: int,
    bar: float,
    widest: int,
    most_lanes: int,
    step: float,
) -> str:
    classes = ["round"] + (["differs"] if differs else []) + ([mark.source] if mark.source else [])
    tip = escape(describe.round_text(mark))
    if mark.idle or mark.b_pad == 0:
        # no round, or a prefill-only round: a low grey bar
        h = 5.0 if mark.idle else 10.0
        fill = "#d0d4d8" if mark.idle else "#9aa3ab"
        stroke = ' stroke="#d62728" stroke-width="2"' if differs else ""
    else:
        h = 10 + (BAND - 26) * (mark.width + 1) / (widest + 1)
        share = mark.lanes / most_lanes
        hue = 212 if mark.kind == 0 else 150
        fill = f"hsl({hue}, 62%, {82 - 52 * share:.0f}%)"
        if differs:
            stroke = ' stroke="#d62728" stroke-width="2.5"'
        elif mark.source == "probe":
            stroke = ' stroke="#ff7f0e" stroke-width="2"'
        else:
            stroke = ""
    y = top + BAND - h
    parts = [
        f'<rect class="{" ".join(classes)}" data-plan="{mark.plan}" x="{x:.1f}" y="{y:.1f}" '
        f'width="{bar:.1f}" height="{h:.1f}" fill="{fill}"{stroke}><title>{tip}</title></rect>'
    ]
    if step >= 24 and not mark.idle:
        parts.append(
            f'<text class="shape-label" x="{x + bar / 2:.1f}" y="{y - 3:.1f}" '
            f'text-anchor="middle" font-size="9" font-family="sans-serif" fill="#333">'
            f"{escape(mark.shape)}</text>"
        )
    return "".join(parts)


def _axis(
    plans: list[int],
    marks: tuple[dict[int, RoundMark], dict[int, RoundMark]],
    step: float,
    top: int,
) -> list[str]:
    out = [
        f'<g class="axis"><line x1="{LEFT}" y1="{top + 2}" x2="{WIDTH - RIGHT}" y2="{top + 2}" '
        f'stroke="#888"/>'
    ]
    every = max(1, -(-len(plans) // MAX_TICKS))
    for i in range(0, len(plans), every):
        plan = plans[i]
        mark = marks[0].get(plan) or marks[1].get(plan)
        x = LEFT + (i + 0.5) * step
        out.append(
            f'<line x1="{x:.1f}" y1="{top + 2}" x2="{x:.1f}" y2="{top + 6}" stroke="#888"/>'
            f'<text class="tick" x="{x:.1f}" y="{top + 18}" text-anchor="middle" font-size="10" '
            f'font-family="sans-serif" fill="#333">plan {plan}</text>'
        )
        if mark is not None:
            out.append(
                f'<text class="tick clock" x="{x:.1f}" y="{top + 31}" text-anchor="middle" '
                f'font-size="9" font-family="sans-serif" fill="#777">'
                f"{mark.now / 1000:,.1f} ms</text>"
            )
    out.append(
        f'<text x="{LEFT - 8}" y="{top + 18}" text-anchor="end" font-size="10" '
        f'font-family="sans-serif" fill="#555">plan</text>'
        f'<text x="{LEFT - 8}" y="{top + 31}" text-anchor="end" font-size="9" '
        f'font-family="sans-serif" fill="#777">clock</text></g>'
    )
    return out


def _marker(d: Divergence, plans: list[int], step: float, height: int) -> list[str]:
    if d.plan is None:
        return []
    # just before the diverging plan's bar; a failure after plan N sits after N's bar
    position = next((i for i, plan in enumerate(plans) if plan >= d.plan), len(plans) - 1)
    x = LEFT + position * step + max((step - step * 0.78) / 4, 1.0)
    if d.kind in (ERROR, TIMEOUT) and d.record_type != "plan":
        x += step * 0.89
    words = _END_WORDS.get(d.kind, "first divergence")
    label = f"{words} · plan {d.plan} · {d.kind}"
    anchor = "end" if x > WIDTH * 0.7 else "start"
    dx = -4 if anchor == "end" else 4
    return [
        f'<g class="divergence-marker"><line class="divergence-marker" x1="{x:.1f}" '
        f'y1="{TOP - 14}" x2="{x:.1f}" y2="{height - AXIS + 4}" stroke="#d62728" '
        f'stroke-width="2" stroke-dasharray="6 4"/>'
        f'<text x="{x + dx:.1f}" y="{TOP - 18}" text-anchor="{anchor}" font-size="12" '
        f'font-family="sans-serif" font-weight="bold" fill="#d62728">{escape(label)}</text></g>'
    ]


_END_WORDS: dict[str, str] = {ERROR: "raised", TIMEOUT: "hung"}
