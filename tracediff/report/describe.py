"""Plain-text wording shared by every presenter: one place says what a divergence means.

Presenters differ in markup, not in words: the terminal, Markdown, HTML and JUnit reports
all take their sentences and formatted values from here. Nothing here decides anything; it
only words what :mod:`tracediff.compare` found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from tracediff.compare.model import (
    BOOKKEEPING,
    DECISION,
    ERROR,
    ROUNDING,
    STRUCTURE,
    TIMEOUT,
    TYPE,
    VALUE,
    Divergence,
    FieldChange,
    RoundMark,
    StateDiff,
)

KIND_MEANING: dict[str, str] = {
    DECISION: "a different choice made (a field that holds the decision differs)",
    BOOKKEEPING: "the same choice; a recorded field differs",
    TYPE: "equal values of another type",
    VALUE: "the same decisions; a float is wrong by far more than rounding",
    ROUNDING: "the same decisions; floats moved by a few ULPs",
    STRUCTURE: "records missing, extra or of another type",
    ERROR: "an implementation raised",
    TIMEOUT: "an implementation hung",
}


def short(value: Any, limit: int = 48) -> str:
    """A value as a reader wants it: floats in full (their last digits are the point)."""
    if value is None:
        return "—"
    text = repr(value) if isinstance(value, float) else _compact(value, limit + 1)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Characters of a value's text built at most: a table of 300,000 rows is not written out
# whole to show 48 characters of it.
TEXT_BUDGET = 100_000


def _compact(value: Any, budget: int = TEXT_BUDGET) -> str:
    """``value`` as compact text, at most ``budget`` characters (then cut, with "…")."""
    parts: list[str] = []
    used = 0
    for piece in _pieces(value):
        parts.append(piece)
        used += len(piece)
        if used >= budget:
            return "".join(parts)[:budget] + "…"
    return "".join(parts)


def _pieces(value: Any) -> Iterator[str]:
    if isinstance(value, list):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ", "
            yield from _pieces(item)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield f"{', ' if i else ''}{key}: "
            yield from _pieces(item)
        yield "}"
    elif isinstance(value, float):
        yield repr(value)
    else:
        yield str(value)


def where(d: Divergence) -> str:
    """``record 57 · plan 3 · clock 12,345 µs``."""
    parts = []
    if d.index is not None:
        parts.append(f"record {d.index}")
    if d.plan is not None:
        parts.append(f"plan {d.plan}")
    if d.clock is not None:
        parts.append(f"clock {d.clock:,} µs")
    return " · ".join(parts) or "unknown"


def scenario_line(d: Divergence) -> str:
    return f"{d.label} · {d.features}"


def kind_line(d: Divergence) -> str:
    """What kind of divergence, in one sentence with its numbers."""
    b = d.impls[1]
    differ = f"{plural(d.total_changes, 'field')} {'differs' if d.total_changes == 1 else 'differ'}"
    if d.kind in (VALUE, ROUNDING):
        head = d.headline
        text = f"{d.kind}: same decisions; a float moved"
        if head is not None and head.ulps is not None:
            text += f" by {ulps_text(head)}"
        if d.kind == VALUE:
            text += " (far more than rounding)"
        if d.total_changes > 1 and d.max_ulps is not None:
            text += f"; {differ}, by up to {ulps_count(d.max_ulps)} ULPs"
        return text
    if d.kind == TYPE:
        head = d.headline
        what = f": {type_text(head.a)} vs {type_text(head.b)}" if head is not None else ""
        return f"type: {KIND_MEANING[TYPE]}{what}; {differ}"
    if d.kind in (DECISION, BOOKKEEPING):
        return f"{d.kind}: {KIND_MEANING[d.kind]}; {differ}"
    if d.kind == STRUCTURE:
        return f"structure: {KIND_MEANING[STRUCTURE]}"
    if d.kind == ERROR:
        where = f" in {d.raised_in}" if d.raised_in else ""
        return f"error: {d.failed_impl or b} raised {d.path[-1].removeprefix('raised ')}{where}"
    if d.kind == TIMEOUT:
        return f"timeout: {d.failed_impl or b} did not finish in time"
    return d.kind


def type_text(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def state_line(d: Divergence) -> str:
    """``after plan 3: request 0 pending_advance 8 vs 0 (19 plans before the differing
    record)``, or why there is no state difference to show."""
    if d.state is None:
        return d.state_note or "not compared"
    return state_diff_line(d.state)


def state_diff_line(state: StateDiff) -> str:
    before = ""
    if state.plans_before:
        before = f" ({plural(state.plans_before, 'plan')} before the differing record)"
    values = f"{short(state.a)} vs {short(state.b)}"
    return f"after {state.event}: {state_field_words(state.field)} {values}{before}"


def state_field_words(field: str) -> str:
    """``requests[id=3].pending_advance`` read aloud: ``request 3 pending_advance``."""
    words = re.sub(r"^(\w+?)s?\[id=(-?\d+)\]\.?", r"\1 \2 ", field)
    words = re.sub(r"^(\w+?)\[plan=(-?\d+)\]\.?", r"\1 round of plan \2 ", words)
    return words.strip() or "the state"


def ulps_text(change: FieldChange) -> str:
    if change.ulps is None:
        return "NaN"
    rel = "" if change.rel_error is None else f", rel. error {change.rel_error:.2e}"
    return f"{ulps_count(change.ulps)} ULP{'s' if change.ulps != 1 else ''}{rel}"


def ulps_count(ulps: int | None) -> str:
    """ULPs in full while they are a rounding story; in powers of ten once they are not."""
    if ulps is None:
        return "-"
    return f"{ulps:,}" if ulps < 1_000_000 else f"{ulps:.1e}"


def short_name(name: str, limit: int = 24) -> str:
    """An implementation's name for a column header: ``pkg.mod:Class`` becomes ``Class``."""
    if len(name) <= limit:
        return name
    return name.rsplit(":", 1)[-1] if ":" in name else "…" + name[-(limit - 1) :]


def plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def failure_tail(d: Divergence) -> str:
    """The last line of a traceback (the exception), or the message."""
    lines = [line for line in d.message.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def record_summary(
    record: Mapping[str, Any] | None, index: int, other: Mapping[str, Any] | None = None
) -> str:
    """One generic line per record: its type and number, clock, scalars, list sizes.

    Given the other implementation's record, the fields that differ come first, each cut
    around its first difference, so a summary never stops just before what differs.
    """
    if record is None:
        return "(no record)"
    if index == 0:
        scenario = record.get("scenario")
        seed = scenario.get("seed") if isinstance(scenario, dict) else None
        return "header" + (f" seed={seed}" if seed is not None else "")
    kind = str(record.get("t", "record"))
    number = record.get(kind)
    parts = [f"{kind} {number}" if isinstance(number, int) else kind]
    now = record.get("now")
    if isinstance(now, int):
        parts.append(f"@{now:,}µs")
    differing = [
        key
        for key in record
        if other is not None and key not in ("t",) and record.get(key) != other.get(key)
    ]
    for key in differing:
        mine, _theirs = short_pair(record.get(key), other.get(key) if other else None, 40)
        parts.append(f"≠{key}={mine}")
    for key, value in record.items():
        if key in ("t", kind, "now") or key in differing:
            continue
        if isinstance(value, bool | int | str):
            parts.append(f"{key}={value}")
        elif isinstance(value, list) and value and not isinstance(value[0], list):
            parts.append(f"{key}={short(value, 24)}")
        elif isinstance(value, list) and value:
            parts.append(f"{key}:{len(value)}")
    return " ".join(parts)


def round_text(mark: RoundMark) -> str:
    """``plan 12 @34,567µs winner 8×3, 8 lanes, +prefill``."""
    if mark.idle:
        return f"plan {mark.plan} @{mark.now:,}µs: no round"
    extra = ", +prefill" if mark.prefill else ""
    prefixes = f" (prefixes {short(list(mark.prefixes), 60)})" if mark.prefixes else ""
    return (
        f"plan {mark.plan} @{mark.now:,}µs: {mark.source} {mark.shape}, "
        f"{plural(mark.lanes, 'lane')}, {plural(mark.drafts, 'draft')}{prefixes}{extra}"
    )


def context_caption(d: Divergence) -> str:
    if not d.context:
        return "no records kept"
    first, last = d.context[0].index, d.context[-1].index
    return f"records {first}..{last}: up to the divergence, back to the previous plan at least"


def rounds_differ(d: Divergence, plan: int, left: RoundMark | None, right: RoundMark | None) -> str:
    """Whether plan ``plan``'s rounds differ between A and B: "" when they are the same,
    else a note for B's cell ("" notes nothing beyond the shown shape when the marks differ).

    The marks hold what the picture draws (shape, lanes, prefixes); two rounds can agree
    there and still differ (other lanes, another duration), so the plan records of the
    context are consulted too: a round is never "the same" while its rows differ.
    """
    if left != right:
        return " "
    for row in d.context:
        if (
            row.a is not None
            and row.b is not None
            and row.a.get("t") == "plan"
            and row.a.get("plan") == plan
            and row.a.get("round") != row.b.get("round")
        ):
            return f" (round differs: {round_difference(row.a.get('round'), row.b.get('round'))})"
    return ""


ROUND_NAMES = (
    "source",
    "kind",
    "b_pad",
    "width",
    "prefill_request",
    "prefill_tokens",
    "lanes",
    "expected",
    "duration",
)


def round_difference(a: Any, b: Any) -> str:
    """Which columns of two round rows differ: ``lanes, duration``."""
    if not isinstance(a, list) or not isinstance(b, list):
        return "one side has none"
    names = [
        ROUND_NAMES[i] if i < len(ROUND_NAMES) else f"[{i}]"
        for i in range(max(len(a), len(b)))
        if i >= len(a) or i >= len(b) or a[i] != b[i]
    ]
    return ", ".join(names) or "encoding"


def diff_window(
    a: str, b: str, limit: int = 48
) -> tuple[tuple[str, str, str], tuple[str, str, str]]:
    """Two texts cut to ``limit`` around where they first differ, each as (before, differing
    part, after): a cut never hides the part that differs (as diffoscope marks it)."""
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return _window(a, start, len(a) - end, limit), _window(b, start, len(b) - end, limit)


def _window(text: str, start: int, stop: int, limit: int) -> tuple[str, str, str]:
    before, middle, after = text[:start], text[start:stop], text[stop:]
    room = max(limit - len(middle), 8)
    keep_before = min(len(before), max(room // 2, room - len(after)))
    if keep_before < len(before):
        before = "…" + before[len(before) - keep_before + 1 :] if keep_before > 1 else "…"
    room_after = max(room - len(before), 4)
    if len(after) > room_after:
        after = after[: room_after - 1] + "…"
    if len(middle) > max(limit, 16):
        middle = middle[: max(limit, 16) - 1] + "…"
    return before, middle, after


def short_pair(a: Any, b: Any, limit: int = 48) -> tuple[str, str]:
    """Both values as :func:`short` shows them, cut around their first difference."""
    (ab, am, aa), (bb, bm, ba) = diff_window(full_text(a), full_text(b), limit)
    return ab + am + aa, bb + bm + ba


def full_text(value: Any) -> str:
    """A value as :func:`short` writes it, uncut."""
    if value is None:
        return "—"
    return repr(value) if isinstance(value, float) else _compact(value)


def changes_headline_first(d: Divergence) -> list[FieldChange]:
    """The changes with the headline (the field the kind and signature name) first: in a
    decision, the floats and bookkeeping listed before it in the record would hide it."""
    head = d.headline
    if head is None:
        return list(d.changes)
    return [head, *(c for c in d.changes if c is not head)]
