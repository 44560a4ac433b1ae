"""The JSON presenter and its reader: a versioned file that ``tracediff diff --load`` reads.

Format ``{"format": "tracediff-diff-report", "version": 1, ...}``: the report's steps and
scenario outcomes, each finding with its full explanation (field changes, context records,
timeline rounds), and the signature groups (derived: written for other tools, recomputed on
load). Floats are written with Python's shortest round-trip repr, so ULP distances read back
exactly. A reader refuses another format or version, and a malformed file, with a
TraceFormatError naming the file and the field at fault.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tracediff import __version__
from tracediff.compare.model import (
    ContextRow,
    DiffReport,
    Divergence,
    FieldChange,
    RoundMark,
    ScenarioOutcome,
    StateDiff,
    StepOutcome,
)
from tracediff.compare.signature import group_signatures
from tracediff.errors import NESTING, TraceFormatError

FORMAT = "tracediff-diff-report"
VERSION = 1

T = TypeVar("T")


# -- writing ------------------------------------------------------------------------------
def report_to_dict(report: DiffReport) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "tracediff": __version__,
        "title": report.title,
        "impls": list(report.impls),
        "wall_seconds": report.wall_seconds,
        "notes": list(report.notes),
        "steps": [{"name": s.name, "status": s.status, "detail": s.detail} for s in report.steps],
        "outcomes": [_outcome(o) for o in report.outcomes],
        "groups": groups_to_list(report.divergences),
    }


def groups_to_list(divergences: Sequence[Divergence]) -> list[dict[str, Any]]:
    """The signature groups, most frequent first: what ``run --json`` and the diff report
    write (plain ASCII paths; ``scenarios`` in the order found)."""
    return [
        {
            "kind": g.signature.kind,
            "path": g.signature.path,
            "count": g.count,
            "smallest": g.smallest.label,
            "scenarios": list(g.labels),
            "causes": list(g.causes),
        }
        for g in group_signatures(divergences)
    ]


def finding_to_dict(d: Divergence) -> dict[str, Any]:
    """One finding, flat, for tools (``run --json``'s ``findings``): what kind, which
    signature, the first differing record and plan, the field, the state diff."""
    lines = [line for line in d.message.splitlines() if line.strip()]
    return {
        "scenario": d.label,
        "profile": d.profile,
        "seed": d.seed,
        "requests": d.requests,
        "plans": d.plans,
        "impls": list(d.impls),
        "kind": d.kind,
        "signature": {"kind": d.signature.kind, "path": d.signature.path},
        "record": d.index,
        "plan": d.plan,
        "clock": d.clock,
        "record_type": d.record_type,
        "field": d.field,
        "location": d.location,
        "headline": None
        if d.headline is None
        else {
            "a": d.headline.a,
            "b": d.headline.b,
            "ulps": d.headline.ulps,
            "rel_error": d.headline.rel_error,
        },
        "total_changes": d.total_changes,
        "failed_impl": d.failed_impl,
        "raised_in": d.raised_in,
        "error": lines[-1].strip() if lines else "",
        "later": d.later,
        "state": None if d.state is None else state_to_dict(d.state),
        "state_note": d.state_note,
    }


def dumps(report: DiffReport) -> str:
    """The report as JSON text (UTF-8, indented, one trailing newline)."""
    return json.dumps(report_to_dict(report), indent=1, ensure_ascii=False) + "\n"


def outcome_to_dict(outcome: ScenarioOutcome) -> dict[str, Any]:
    """One scenario's outcome (with its divergence) as JSON-ready data, as in a report."""
    return _outcome(outcome)


def outcome_from_dict(data: Any, path: str = "<outcome>") -> ScenarioOutcome:
    """The inverse of :func:`outcome_to_dict`; TraceFormatError naming ``path`` if wrong."""
    return _read_outcome(_Reader(path), data, "outcome")


def _outcome(outcome: ScenarioOutcome) -> dict[str, Any]:
    return {
        "suite": outcome.suite,
        "profile": outcome.profile,
        "seed": outcome.seed,
        "features": outcome.features,
        "status": outcome.status,
        "plans": outcome.plans,
        "seconds": outcome.seconds,
        "divergence": None if outcome.divergence is None else _divergence(outcome.divergence),
        "explanation": outcome.explanation,
        "reproduce": outcome.reproduce,
    }


def _divergence(d: Divergence) -> dict[str, Any]:
    return {
        "kind": d.kind,
        "signature": str(d.signature),
        "signature_path": d.signature.path,
        "location": d.location,
        "field": d.field,
        "profile": d.profile,
        "seed": d.seed,
        "features": d.features,
        "requests": d.requests,
        "plans": d.plans,
        "impls": list(d.impls),
        "index": d.index,
        "plan": d.plan,
        "clock": d.clock,
        "record_type": d.record_type,
        "path": list(d.path),
        "changes": [
            {
                "path": list(c.path),
                "kind": c.kind,
                "a": c.a,
                "b": c.b,
                "ulps": c.ulps,
                "rel_error": c.rel_error,
            }
            for c in d.changes
        ],
        "total_changes": d.total_changes,
        # rows before the divergence are the same on both sides: written once
        "context": [
            {"index": r.index, "a": r.a, "same": True}
            if r.same
            else {"index": r.index, "a": r.a, "b": r.b}
            for r in d.context
        ],
        "timeline_a": [_mark(m) for m in d.timeline_a],
        "timeline_b": [_mark(m) for m in d.timeline_b],
        "failed_impl": d.failed_impl,
        "message": d.message,
        "notes": list(d.notes),
        "raised_in": d.raised_in,
        "later": d.later,
        "state": None if d.state is None else state_to_dict(d.state),
        "state_note": d.state_note,
    }


def state_to_dict(state: StateDiff) -> dict[str, Any]:
    return {
        "event": state.event,
        "index": state.index,
        "plan": state.plan,
        "field": state.field,
        "a": state.a,
        "b": state.b,
        "plans_before": state.plans_before,
    }


_MARK_FIELDS = ("plan", "now", "source", "kind", "b_pad", "width", "lanes", "prefill", "prefixes")


def _mark(mark: RoundMark) -> list[Any]:
    return [
        list(v) if isinstance(v, tuple) else v for v in (getattr(mark, n) for n in _MARK_FIELDS)
    ]


# -- reading ------------------------------------------------------------------------------
class _Reader:
    """Typed field access that names the file and the field when something is wrong."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, where: str, what: str) -> TraceFormatError:
        return TraceFormatError(self.path, f"{where}: {what}")

    def get(self, data: Any, key: str, kind: type[T] | tuple[type, ...], where: str) -> Any:
        if not isinstance(data, dict) or key not in data:
            raise self.fail(where, f"missing field {key!r}")
        value = data[key]
        if isinstance(value, bool) and bool not in _as_tuple(kind):
            raise self.fail(f"{where}.{key}", f"expected {_names(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.fail(f"{where}.{key}", f"expected {_names(kind)}, got {_jtype(value)}")
        return value

    def opt(
        self, data: Any, key: str, kind: type[T] | tuple[type, ...], where: str, default: Any
    ) -> Any:
        """A field added within version 1: absent in older files, then ``default``."""
        if isinstance(data, dict) and key not in data:
            return default
        return self.get(data, key, kind, where)

    def items(
        self, data: Any, key: str, where: str, build: Callable[[Any, str], T]
    ) -> tuple[T, ...]:
        values = self.get(data, key, list, where)
        return tuple(build(v, f"{where}.{key}[{i}]") for i, v in enumerate(values))


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _names(kind: type | tuple[type, ...]) -> str:
    return " or ".join("null" if k is type(None) else k.__name__ for k in _as_tuple(kind))


def _jtype(value: Any) -> str:
    return "null" if value is None else type(value).__name__


_INT = int
_OPT_INT = (int, type(None))
_NUM = (int, float)
_OPT_NUM = (int, float, type(None))
_OPT_STR = (str, type(None))
_RECORD = (dict, type(None))


def loads(text: str, path: str = "<report>") -> DiffReport:
    """Read a report written by :func:`dumps`; raises TraceFormatError if it is not one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"not a JSON report: {exc}") from None
    except RecursionError:
        raise TraceFormatError(path, f"not a JSON report: {NESTING}") from None
    r = _Reader(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else None
        raise r.fail("format", f"expected {FORMAT!r}, found {found!r}: not a tracediff report")
    if data.get("version") != VERSION:
        raise r.fail(
            "version",
            f"this tracediff reads version {VERSION}, the file has {data.get('version')!r}; "
            "use the tracediff that wrote it",
        )
    return DiffReport(
        title=r.get(data, "title", str, "report"),
        impls=tuple(str(x) for x in r.get(data, "impls", list, "report")),
        outcomes=r.items(data, "outcomes", "report", lambda v, w: _read_outcome(r, v, w)),
        steps=r.items(
            data,
            "steps",
            "report",
            lambda v, w: StepOutcome(
                r.get(v, "name", str, w), r.get(v, "status", str, w), r.get(v, "detail", str, w)
            ),
        ),
        wall_seconds=float(r.get(data, "wall_seconds", _NUM, "report")),
        notes=tuple(str(x) for x in r.get(data, "notes", list, "report")),
    )


def load(path: str) -> DiffReport:
    """Read a JSON report file."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise TraceFormatError(path, f"cannot read report: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(path, "not a JSON report: not UTF-8 text") from None
    return loads(text, path)


def _read_outcome(r: _Reader, v: Any, w: str) -> ScenarioOutcome:
    raw = r.get(v, "divergence", (dict, type(None)), w)
    return ScenarioOutcome(
        suite=r.get(v, "suite", str, w),
        profile=r.get(v, "profile", str, w),
        seed=r.get(v, "seed", _INT, w),
        features=r.get(v, "features", str, w),
        status=r.get(v, "status", str, w),
        plans=r.get(v, "plans", _INT, w),
        seconds=float(r.get(v, "seconds", _NUM, w)),
        divergence=None if raw is None else _read_divergence(r, raw, f"{w}.divergence"),
        # absent in reports written before these fields existed
        explanation=str(v.get("explanation", "")) if isinstance(v, dict) else "",
        reproduce=str(v.get("reproduce", "")) if isinstance(v, dict) else "",
    )


def _read_divergence(r: _Reader, v: Any, w: str) -> Divergence:
    impls = r.get(v, "impls", list, w)
    if len(impls) != 2 or not all(isinstance(x, str) for x in impls):
        raise r.fail(f"{w}.impls", "expected two implementation names")
    return Divergence(
        kind=r.get(v, "kind", str, w),
        profile=r.get(v, "profile", str, w),
        seed=r.get(v, "seed", _INT, w),
        features=r.get(v, "features", str, w),
        requests=r.get(v, "requests", _INT, w),
        plans=r.get(v, "plans", _INT, w),
        impls=(impls[0], impls[1]),
        index=r.get(v, "index", _OPT_INT, w),
        plan=r.get(v, "plan", _OPT_INT, w),
        clock=r.get(v, "clock", _OPT_INT, w),
        record_type=r.get(v, "record_type", _OPT_STR, w),
        path=_strings(r, v, "path", w),
        changes=r.items(v, "changes", w, lambda c, cw: _read_change(r, c, cw)),
        total_changes=r.get(v, "total_changes", _INT, w),
        context=r.items(v, "context", w, lambda c, cw: _read_row(r, c, cw)),
        timeline_a=r.items(v, "timeline_a", w, lambda m, mw: _read_mark(r, m, mw)),
        timeline_b=r.items(v, "timeline_b", w, lambda m, mw: _read_mark(r, m, mw)),
        failed_impl=r.get(v, "failed_impl", _OPT_STR, w),
        message=r.get(v, "message", str, w),
        notes=_strings(r, v, "notes", w),
        raised_in=r.opt(v, "raised_in", _OPT_STR, w, None),
        later=r.opt(v, "later", str, w, ""),
        state=_read_state(r, r.opt(v, "state", (dict, type(None)), w, None), f"{w}.state"),
        state_note=r.opt(v, "state_note", str, w, ""),
    )


def _read_state(r: _Reader, v: Any, w: str) -> StateDiff | None:
    if v is None:
        return None
    if "a" not in v or "b" not in v:
        raise r.fail(w, "a state difference needs fields 'a' and 'b'")
    return StateDiff(
        event=r.get(v, "event", str, w),
        index=r.get(v, "index", _INT, w),
        plan=r.get(v, "plan", _OPT_INT, w),
        field=r.get(v, "field", str, w),
        a=v["a"],
        b=v["b"],
        plans_before=r.get(v, "plans_before", _OPT_INT, w),
    )


def _read_row(r: _Reader, c: Any, w: str) -> ContextRow:
    a = r.get(c, "a", _RECORD, w)
    if isinstance(c, dict) and c.get("same") is True:
        return ContextRow(r.get(c, "index", _INT, w), a, a)
    return ContextRow(r.get(c, "index", _INT, w), a, r.get(c, "b", _RECORD, w))


def _strings(r: _Reader, v: Any, key: str, w: str) -> tuple[str, ...]:
    values = r.get(v, key, list, w)
    if not all(isinstance(x, str) for x in values):
        raise r.fail(f"{w}.{key}", "expected a list of strings")
    return tuple(values)


def _read_change(r: _Reader, c: Any, w: str) -> FieldChange:
    if not isinstance(c, dict) or "a" not in c or "b" not in c:
        raise r.fail(w, "a change needs fields 'a' and 'b'")
    rel = r.get(c, "rel_error", _OPT_NUM, w)
    return FieldChange(
        path=_strings(r, c, "path", w),
        kind=r.get(c, "kind", str, w),
        a=c["a"],
        b=c["b"],
        ulps=r.get(c, "ulps", _OPT_INT, w),
        rel_error=None if rel is None else float(rel),
    )


def _read_mark(r: _Reader, m: Any, w: str) -> RoundMark:
    if not isinstance(m, list) or len(m) != len(_MARK_FIELDS):
        raise r.fail(w, f"a round needs {len(_MARK_FIELDS)} fields: {', '.join(_MARK_FIELDS)}")
    plan, now, source, kind, b_pad, width, lanes, prefill, prefixes = m
    ints = (
        plan,
        now,
        kind,
        b_pad,
        width,
        lanes,
        *(prefixes if isinstance(prefixes, list) else [None]),
    )
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in ints):
        raise r.fail(w, "plan, now, kind, b_pad, width, lanes and prefixes must be integers")
    if not isinstance(source, str) or not isinstance(prefill, bool):
        raise r.fail(w, "source must be a string and prefill a boolean")
    return RoundMark(plan, now, source, kind, b_pad, width, lanes, prefill, tuple(prefixes))
