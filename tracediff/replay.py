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

import contextlib
import traceback
from collections import deque
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

from tracediff.compare.readable import readable
from tracediff.errors import TraceFormatError
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.record import packed_record
from tracediff.models.specdec.schema import Schema, TraceChecker, checked_records, header_schema
from tracediff.project.impls import ImplSpec, load
from tracediff.running.call import Guarded, ImplementationFailed, construct, summary
from tracediff.running.runner import private_copy
from tracediff.trace import TraceReader, encode

MATCH, MISMATCH, ERROR = "match", "mismatch", "error"
INPUT_TYPES = ("arrival", "completion")
DECISION_TYPES = ("plan", "retire")

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


def scenario_from_header(header: dict[str, Any], name: str) -> Scenario:
    """The scenario a trace header carries; a TraceFormatError naming the file if the
    header is not a tracediff trace header (tracediff/models/specdec/schema.py)."""
    return header_schema(header, name)[1]


def replay(
    source: str | TraceReader,
    spec: ImplSpec,
    *,
    until: int | None = None,
    want_state: bool = False,
) -> ReplayResult:
    """Replay a trace's inputs into ``spec`` and compare every decision byte for byte.

    ``until`` stops after the recorded plan with that number (checking it too).
    ``want_state`` keeps the implementation's ``state()`` just before that plan, before
    the first mismatching plan, or at the end of the trace, whichever comes first.
    Trace problems raise TraceFormatError; the implementation raising is status ERROR.
    """
    reader = source if isinstance(source, TraceReader) else TraceReader(source)
    # Every record is checked against the trace schema before the implementation sees it,
    # so a damaged input (a completion of a round never planned, a lane that verified more
    # than it was offered) is the file's fault (exit 2), never the implementation's.
    checker = TraceChecker(reader.header, reader.name)
    current = Schema.current().columns
    if dict(checker.schema.columns) != dict(current):
        raise TraceFormatError(
            reader.name,
            "header: the trace was recorded with other record columns than this tracediff "
            "writes (another record schema); replay it with the tracediff that wrote it, "
            "or re-record it",
            record=0,
        )
    scenario = checker.scenario
    factory = load(spec)
    # its failures are ImplementationFailed (exit 1), whatever it raises (tracediff.running.call)
    scheduler = Guarded(construct(spec.name, factory, private_copy(scenario)), spec.name)
    session = _Session(reader.name, spec.name, scheduler, scenario, until, want_state)
    session.columns = {name: list(cols) for name, cols in current.items()}
    with contextlib.closing(_records(reader, checker)) as records:
        return session.run(records)


def _records(
    reader: TraceReader, checker: TraceChecker
) -> Generator[tuple[int, int, bytes, dict[str, Any]], None, None]:
    for checked in checked_records(reader, checker):
        yield checked.index, checked.offset, checked.payload, checked.record


class _Session:
    """One replay: the scheduler under test, the decisions it owes, the counters."""

    def __init__(
        self,
        name: str,
        impl: str,
        scheduler: Any,
        scenario: Scenario,
        until: int | None,
        want_state: bool,
    ) -> None:
        self.name = name
        self.impl = impl
        self.scheduler = scheduler
        self.specs = {r.id: r for r in scenario.requests}
        self.until = until
        self.want_state = want_state
        self.owed: deque[dict[str, Any]] = deque()
        self.records = 0
        self.plans = 0
        self.decisions = 0
        self.last_plan: int | None = None
        self.state: dict[str, Any] | None = None
        self.state_at = ""
        self.columns: dict[str, list[str]] | None = None

    def result(self, status: str, **extra: Any) -> ReplayResult:
        return ReplayResult(
            trace=self.name,
            impl=self.impl,
            status=status,
            records=self.records,
            plans=self.plans,
            decisions=self.decisions,
            until=self.until,
            state=self.state,
            state_at=self.state_at,
            **extra,
        )

    def mismatch(
        self,
        index: int,
        expected: dict[str, Any] | None,
        actual: dict[str, Any] | None,
        reason: str,
    ) -> ReplayResult:
        record_type = "end" if expected is None else str(expected.get("t"))
        path = None
        keys: Path = ()
        if expected is not None and actual is not None:
            found = difference_path(expected, actual)
            if found is not None:
                keys = found
                path = format_path(found, expected, self.columns)
        return self.result(
            MISMATCH,
            mismatch=ReplayMismatch(
                index, self.last_plan, record_type, expected, actual, path, reason, keys
            ),
        )

    def snapshot(self, where: str) -> None:
        if not self.want_state:
            return
        if not self.scheduler.has_state:
            self.state_at = f"unavailable: {self.impl} has no state() method"
            return
        self.state = self.scheduler.state()
        self.state_at = where

    def failure(self, exc: BaseException, index: int) -> ReplayResult:
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" ({frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})"
        return self.result(
            ERROR,
            message=f"{summary(exc)}{where if frames else ''}",
            error_index=index,
            error_plan=self.last_plan,
        )

    def run(self, records: Iterator[tuple[int, int, bytes, dict[str, Any]]]) -> ReplayResult:
        index = 0
        for index, offset, payload, record in records:
            self.records += 1
            kind = record.get("t")
            if kind == "plan" and isinstance(record.get("plan"), int):
                self.last_plan = record["plan"]
            if self.owed:
                produced = self.owed.popleft()
                self.decisions += 1
                if encode(produced) != payload:
                    reason = (
                        "a different retirement"
                        if kind == "retire"
                        else "the implementation retired requests the trace does not retire here"
                    )
                    return self.mismatch(index, record, produced, reason)
                continue
            try:
                outcome = self.step(index, offset, kind, payload, record)
            except TraceFormatError:
                raise
            except ImplementationFailed as failed:  # whatever it raised: a finding
                return self.failure(failed.error, index)
            except Exception as exc:  # noqa: BLE001 - e.g. a plan that cannot be encoded
                return self.failure(exc, index)
            if outcome is not None:
                return outcome
        if self.owed:
            return self.mismatch(
                index + 1, None, self.owed[0], "the trace ends; the implementation retired more"
            )
        if self.until is not None:
            return self.result(MATCH, stopped=False)
        self.snapshot("end of trace")
        return self.result(MATCH)

    def step(
        self, index: int, offset: int, kind: Any, payload: bytes, record: dict[str, Any]
    ) -> ReplayResult | None:
        now = record.get("now")
        if not isinstance(now, int):
            raise TraceFormatError(
                self.name, f"{kind} record has no integer clock", offset=offset, record=index
            )
        if kind == "arrival":
            request = record.get("request")
            spec = self.specs.get(request) if isinstance(request, int) else None
            if spec is None:
                raise TraceFormatError(
                    self.name,
                    f"arrival of request {record.get('request')!r}, which the header's "
                    "scenario does not hold",
                    offset=offset,
                    record=index,
                )
            self.scheduler.arrive(spec, now)
            return None
        if kind == "completion":
            done = self.scheduler.complete(record, now)
            if done:
                self.owed.append({"t": "retire", "now": now, "requests": list(done)})
            return None
        if kind == "plan":
            number = record.get("plan")
            at_until = self.until is not None and number == self.until
            self.snapshot(f"before plan {number}")
            produced = self.scheduler.plan(now)
            self.plans += 1
            self.decisions += 1
            if isinstance(produced, dict):
                # tables given as rows become typed columns, as the driver records them
                produced = packed_record(produced)
            if encode(produced) != payload:
                # shown and compared as rows, as the trace's record reads back
                return self.mismatch(index, record, readable(produced), "a different plan")
            if at_until:
                return self.result(MATCH, stopped=True, plan_record=readable(produced))
            return None
        if kind == "retire":
            self.decisions += 1
            return self.mismatch(index, record, None, "the implementation retired nothing here")
        raise TraceFormatError(
            self.name,
            f"record of unknown type {kind!r}; replay knows {INPUT_TYPES + DECISION_TYPES}",
            offset=offset,
            record=index,
        )


# -- where two decoded records differ ---------------------------------------------------------
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
    of the trace schema (the header's ``columns`` map): ``round.lanes[0].prefix``.

    A keyed value whose name has columns is either one row (``round``: the next index is a
    column) or a list of rows (``candidates``: the next index is a row, then a column).
    """
    if columns is None:
        from tracediff.models.specdec.sched.record import COLUMNS

        columns = {name: list(cols) for name, cols in COLUMNS.items()}
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
