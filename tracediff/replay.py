"""Replay: re-drive an implementation from a trace's recorded inputs and check every decision.

A trace holds two kinds of records. *Inputs* are what the world did to the scheduler:
``arrival`` (a request arrived) and ``completion`` (the engine finished a round, with what
each lane verified and accepted). *Decisions* are what the scheduler did about them: ``plan``
records and ``retire`` records. Replay feeds the inputs to an implementation in record order,
at the recorded clock times, and treats each recorded ``plan`` record as "call ``plan(now)``
here"; every decision the implementation makes is encoded (:func:`tracediff.trace.encode`)
and compared with the recorded one byte for byte. The first record that differs is the
answer.

Only recorded events are used, never the simulator, so a trace recorded by a live engine
replays the same way as one recorded by ``tracediff record``: the engine's behaviour is in
the completion records, whatever produced them.

Retirements are decisions the implementation returns from ``complete()``. A non-empty list
is owed to the trace as a ``retire`` record immediately after the completion, as the driver
records it; a recorded ``retire`` that the implementation did not produce, or one it
produced that the trace does not hold, is a mismatch at that record.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from typing import Any

from tracediff.model import DECISION as DECISION_TYPE
from tracediff.model import claim
from tracediff.project.impls import ImplSpec
from tracediff.trace import TraceReader, encode
from tracediff.trace.checked import trace_model

MATCH, MISMATCH, ERROR = "match", "mismatch", "error"

Path = tuple[str | int, ...]


@dataclass(frozen=True)
class ReplayMismatch:
    """The first record where the implementation's decision differs from the trace."""

    index: int  # body index in the trace (header 0, first record 1)
    plan: int | None  # plan number at, or last before, the record
    record_type: str  # the recorded record's type, or "end" when the trace ended first
    expected: dict[str, Any] | None  # the recorded record (None: the trace has no more)
    actual: dict[str, Any] | None  # the implementation's (None: it decided nothing here)
    field: str | None  # the first differing field, e.g. "round.lanes[1].prefix"
    reason: str
    keys: Path = ()  # the same field as keys and indices: ("round", 6, 1, 2)

    def values(self) -> tuple[Any, Any]:
        """The expected and the actual value of the first differing field."""
        return value_at(self.expected, self.keys), value_at(self.actual, self.keys)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "plan": self.plan,
            "record_type": self.record_type,
            "field": self.field,
            "keys": list(self.keys),
            "reason": self.reason,
            "expected": self.expected,
            "actual": self.actual,
        }


@dataclass(frozen=True)
class ReplayResult:
    trace: str
    impl: str
    status: str  # MATCH, MISMATCH or ERROR
    records: int  # trace records read (inputs and decisions)
    plans: int  # plan records checked
    decisions: int  # decisions compared (plans and retirements)
    until: int | None = None
    stopped: bool = False  # replay stopped at plan ``until``
    mismatch: ReplayMismatch | None = None
    message: str = ""  # what the implementation raised (status ERROR)
    error_index: int | None = None
    error_plan: int | None = None
    state: dict[str, Any] | None = None  # the implementation's state() at ``state_at``
    state_at: str = ""
    plan_record: dict[str, Any] | None = None  # the implementation's plan ``until``

    @property
    def ok(self) -> bool:
        return self.status == MATCH

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "tracediff-replay",
            "version": 1,
            "trace": self.trace,
            "impl": self.impl,
            "status": self.status,
            "records": self.records,
            "plans": self.plans,
            "decisions": self.decisions,
            "until": self.until,
            "stopped": self.stopped,
            "mismatch": None if self.mismatch is None else self.mismatch.to_dict(),
            "message": self.message,
            "error_index": self.error_index,
            "error_plan": self.error_plan,
            "state_at": self.state_at,
            "state": self.state,
            "plan_record": self.plan_record,
        }


def replay(
    source: str | TraceReader,
    spec: ImplSpec,
    *,
    until: int | None = None,
    want_state: bool = False,
) -> ReplayResult:
    """Replay one trace into one implementation, by the trace's model (which knows how its
    input records become calls: :meth:`tracediff.model.DecisionModel.replay`).

    Trace problems raise TraceFormatError; the implementation raising is status ERROR.
    """
    reader = source if isinstance(source, TraceReader) else TraceReader(source)
    result: ReplayResult = trace_model(reader).replay(
        reader, spec, until=until, want_state=want_state
    )
    return result


def replay_generic(
    model: Any,
    reader: TraceReader,
    spec: ImplSpec,
    *,
    until: int | None = None,
    want_state: bool = False,
) -> ReplayResult:
    """Replay for a model that names its inputs with
    :meth:`~tracediff.model.BaseModel.replay_input`: each plan record is a call of the
    model's decision method at the recorded clock, compared byte for byte; each input record
    is applied by the model, and the records it owes (e.g. a retirement) must come next."""
    from collections import deque

    from tracediff.executor.call import Guarded, ImplementationFailed, construct, summary
    from tracediff.running.record import factory
    from tracediff.trace.checked import checked_records

    checker = model.trace_checker(reader.header, reader.name)
    scenario = claim(model, checker.scenario)
    impl = Guarded(construct(spec.name, factory(spec), model.private_copy(scenario)), spec.name)
    decide = getattr(impl, model.decide)
    owed: deque[dict[str, Any]] = deque()
    records = plans = decisions = 0
    last_plan: int | None = None
    state: dict[str, Any] | None = None
    state_at = ""

    def result(status: str, **extra: Any) -> ReplayResult:
        return ReplayResult(
            reader.name, spec.name, status, records, plans, decisions, until,
            state=state, state_at=state_at, **extra,
        )  # fmt: skip

    def mismatch(index: int, expected: Any, actual: Any, reason: str) -> ReplayResult:
        keys = difference_path(expected, actual) if expected and actual else None
        path = format_path(keys, expected) if keys else None
        record_type = "end" if expected is None else str(expected.get("t"))
        found = ReplayMismatch(
            index, last_plan, record_type, expected, actual, path, reason, keys or ()
        )
        return result(MISMATCH, mismatch=found)

    def snapshot(where: str) -> tuple[dict[str, Any] | None, str]:
        if not want_state:
            return state, state_at
        if not impl.has_state:
            return None, f"unavailable: {spec.name} has no state() method"
        return impl.state(), where

    index = 0
    try:
        for checked in checked_records(reader, checker):
            index, record, payload = checked.index, checked.record, checked.payload
            records += 1
            kind = record.get("t")
            if owed:
                decisions += 1
                produced = owed.popleft()
                if encode(produced) != payload:
                    return mismatch(index, record, produced, f"a different {produced.get('t')}")
                continue
            if kind == DECISION_TYPE:
                number = record.get("plan")
                last_plan = number if isinstance(number, int) else last_plan
                state, state_at = snapshot(f"before plan {number}")
                made = decide(record["now"])
                plans += 1
                decisions += 1
                if encode(made) != payload:
                    return mismatch(index, record, made, "a different plan")
                if until is not None and number == until:
                    return result(MATCH, stopped=True, plan_record=made)
                continue
            more = model.replay_input(impl, record, scenario)
            if more is None:
                decisions += 1
                return mismatch(index, record, None, f"the implementation made no {kind} here")
            owed.extend(more)
    except ImplementationFailed as failed:
        frames = traceback.extract_tb(failed.error.__traceback__)
        where = f" ({frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})"
        return result(
            ERROR,
            message=f"{summary(failed.error)}{where if frames else ''}",
            error_index=index,
            error_plan=last_plan,
        )
    if owed:
        return mismatch(index + 1, None, owed[0], "the trace ends; the implementation made more")
    if until is not None:
        return result(MATCH, stopped=False)
    state, state_at = snapshot("end of trace")
    return result(MATCH)


def difference_path(expected: Any, actual: Any) -> Path | None:
    """The path (keys and indices) to the first place two decoded values differ, or None.

    Maps are walked in the expected value's key order (then keys only the actual has),
    lists index by index; scalars compare by their canonical bytes, so ``1`` and ``1.0``
    differ as they do in a trace, and NaN equals NaN.
    """
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            if key not in expected or key not in actual:
                return (key,)
            inner = difference_path(expected[key], actual[key])
            if inner is not None:
                return (key, *inner)
        if list(expected) != list(actual):
            return (next(a for a, b in zip(expected, actual, strict=False) if a != b),)
        return None
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        for position, (left, right) in enumerate(zip(expected, actual, strict=False)):
            inner = difference_path(left, right)
            if inner is not None:
                return (position, *inner)
        if len(expected) != len(actual):
            return (min(len(expected), len(actual)),)
        return None
    try:
        same = encode(expected) == encode(actual)
    except TypeError:
        same = expected == actual
    return None if same else ()


def format_path(path: Path, record: Any = None, columns: dict[str, list[str]] | None = None) -> str:
    """``("round", 6, 0, 2)`` as ``round[6][0][2]``; given the record, with the column names
    of the trace schema (the header's ``columns`` map) given as ``columns``:
    ``round.lanes[0].prefix``.

    A keyed value whose name has columns is either one row (``round``: the next index is a
    column) or a list of rows (``candidates``: the next index is a row, then a column).
    """
    columns = columns or {}
    out = ""
    value = record
    row: list[str] | None = None  # the columns the next index names
    table: list[str] | None = None  # the columns of the row the next index selects
    for part in path:
        value = _child(value, part)
        if isinstance(part, str) or row is not None:
            if isinstance(part, str):
                name: str | None = part
            else:
                assert row is not None
                name = row[part] if 0 <= part < len(row) else None
            if name is None:
                out += f"[{part}]"
                row = table = None
                continue
            out += name if not out else f".{name}"
            row = table = None
            cols = columns.get(name)
            if cols is not None and isinstance(value, list):
                if value and all(isinstance(item, list) for item in value):
                    table = cols
                else:
                    row = cols
            continue
        out += f"[{part}]"
        row, table = table, None
    return out or "(the whole record)"


def value_at(value: Any, keys: Path) -> Any:
    """The value at ``keys`` inside a decoded record (None where the path does not exist)."""
    for part in keys:
        value = _child(value, part)
    return value


def _child(value: Any, part: str | int) -> Any:
    try:
        return value[part]
    except (KeyError, IndexError, TypeError):
        return None
