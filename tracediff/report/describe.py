"""Plain-text wording shared by every presenter: one place says what a divergence means.

Presenters differ in markup, not in words: the terminal, Markdown, HTML and JUnit reports
all take their sentences and formatted values from here. Nothing here decides anything; it
only words what :mod:`tracediff.compare` found.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracediff.compare.model import (
    DECISION,
    ERROR,
    STRUCTURE,
    TIMEOUT,
    VALUE,
    Divergence,
    FieldChange,
    RoundMark,
)

KIND_MEANING = {
    DECISION: "a different choice",
    VALUE: "the same decisions; floats moved",
    STRUCTURE: "records missing, extra or of another type",
    ERROR: "an implementation raised",
    TIMEOUT: "an implementation hung",
}


def short(value: Any, limit: int = 48) -> str:
    """A value as a reader wants it: floats in full (their last digits are the point)."""
    if value is None:
        return "—"
    text = repr(value) if isinstance(value, float) else _compact(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _compact(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return repr(value)
    return str(value)


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
    if d.kind == VALUE:
        head = d.headline
        text = "value: same decisions; a float moved"
        if head is not None and head.ulps is not None:
            text += f" by {ulps_text(head)}"
        if d.total_changes > 1 and d.max_ulps is not None:
            text += f"; {differ}, by up to {ulps_count(d.max_ulps)} ULPs"
        return text
    if d.kind == DECISION:
        return f"decision: {KIND_MEANING[DECISION]}; {differ}"
    if d.kind == STRUCTURE:
        return f"structure: {KIND_MEANING[STRUCTURE]}"
    if d.kind == ERROR:
        return f"error: {d.failed_impl or b} raised {d.path[-1].removeprefix('raised ')}"
    if d.kind == TIMEOUT:
        return f"timeout: {d.failed_impl or b} did not finish in time"
    return d.kind


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


def record_summary(record: Mapping[str, Any] | None, index: int) -> str:
    """One generic line per record: its type and number, clock, scalars, list sizes."""
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
    for key, value in record.items():
        if key in ("t", kind, "now"):
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
