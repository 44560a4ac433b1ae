"""Replaying a speculative-decoding trace: its input records become driver calls.

See :mod:`tracediff.replay` for what a replay checks. Here: ``arrival`` records become
``arrive(spec, now)`` (the request's spec from the header's scenario), ``completion`` records
``complete(event, now)`` (a non-empty result is owed as the next ``retire`` record) and each
``plan`` record a ``plan(now)`` call whose record is compared byte for byte.
"""

from __future__ import annotations

import contextlib
import traceback
from collections import deque
from collections.abc import Generator, Iterator
from typing import Any

from tracediff import model as models
from tracediff.compare.readable import readable
from tracediff.errors import TraceFormatError
from tracediff.executor.call import Guarded, ImplementationFailed, construct, summary
from tracediff.model import DecisionModel
from tracediff.models.specdec.scenario.model import Scenario, private_copy
from tracediff.models.specdec.sched.record import packed_record
from tracediff.models.specdec.schema import Schema, TraceChecker
from tracediff.project.impls import ImplSpec, load
from tracediff.replay import (
    ERROR,
    MATCH,
    MISMATCH,
    Path,
    ReplayMismatch,
    ReplayResult,
    difference_path,
    format_path,
)
from tracediff.trace import TraceReader, encode
from tracediff.trace.checked import checked_records

INPUT_TYPES = ("arrival", "completion")
DECISION_TYPES = ("plan", "retire")


def replay_trace(
    source: str | TraceReader,
    spec: ImplSpec,
    *,
    until: int | None = None,
    want_state: bool = False,
    model: DecisionModel | None = None,
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
    # its failures are ImplementationFailed (exit 1), whatever it raises (tracediff.executor.call)
    scheduler = Guarded(construct(spec.name, factory, private_copy(scenario)), spec.name)
    session = _Session(reader.name, spec.name, scheduler, scenario, until, want_state)
    session.model = model or models.get(None)
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
        self.model: DecisionModel | None = None

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
                return self.mismatch(
                    index, record, readable(produced, self.model), "a different plan"
                )
            if at_until:
                return self.result(MATCH, stopped=True, plan_record=readable(produced, self.model))
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
