"""The trace conventions, checked while recording: no command writes what another refuses.

``show``, ``diff``, ``replay`` and golden explanations read every record of a trace through
its model's trace checker (:func:`tracediff.trace.checked.checked_records`). Every recording
checks its records with that same checker before they are written or compared: the trace
files ``record``, ``--artifacts``, ``golden`` and ``shrink --save`` write
(:func:`tracediff.running.runner.checked_recording`), the runner's lockstep walk
(:func:`tracediff.running.runner.run_scenario`) and the re-runs that explain its findings.
A model's ``check_record`` checks a decision alone; the trace checker also checks what holds
across records (a clock that never goes back, a request that arrives once), which is what a
reader refuses a file for.

Whose fault a record that breaks them is (:func:`fault`):

- the implementation's (a finding, exit 1, naming it) when it is a decision record and the
  implementation's decision method was called since the record before: the driver records
  what the implementation returned, checked and repacked;
- otherwise the model's (exit 2, naming the model, its member and the file and line of the
  driver's ``yield``, :func:`tracediff.blame.yielded_fault`): the header, and every record
  the driver makes itself, come from the model's code, which must check what it takes from
  the implementation before recording it (as specdec's driver checks ``complete()``'s ids).
  A driver that records a bad record for every implementation alike is not an implementation
  that is "not deterministic".
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from tracediff.blame import yielded_fault
from tracediff.errors import ModelFailed, SchedulerFault, TracediffError, TraceFormatError
from tracediff.model import DECISION, DecisionModel

RECORDING = "<recording>"  # the name a checker gives the trace being recorded (never shown)


def problem_of(checker: Any, record: Any, index: int) -> str | None:
    """What the trace checker refuses ``record`` (body index ``index``) for, or None. A
    checker's optional ``check_recorded`` is used where it has one: the same check, for a
    record whose decision the model's ``check_record`` already passed (every recording
    checks decisions with it first), which it need not check again."""
    check = getattr(checker, "check_recorded", None) or checker.check
    try:
        check(record, offset=None, index=index)
    except TraceFormatError as exc:
        return exc.problem
    return None


def header_problem(model: DecisionModel, header: Any) -> tuple[Any, str | None]:
    """The model's trace checker for a trace with this header, or why it refuses it."""
    if not isinstance(header, Mapping):
        return None, f"the header is {type(header).__name__}, not a map"
    try:
        return model.trace_checker(header, RECORDING), None
    except TraceFormatError as exc:
        return None, exc.problem


class Conventions:
    """The trace checker of implementations recorded side by side, one record index at a
    time. While their records are byte-identical they share one checker, so each record is
    checked once, not once per implementation (as :class:`~tracediff.trace.LockstepDigests`
    hashes it once); one whose record differs gets a copy of the shared checker as it was
    before that record and goes on alone."""

    def __init__(self, model: DecisionModel, count: int) -> None:
        self._model = model
        self._checkers: list[Any] = [None] * count

    def start(
        self, headers: Sequence[Any], payloads: Sequence[bytes | None]
    ) -> tuple[int, str] | None:
        """The headers (index 0); returns (position, problem) of one the model refuses."""
        made: dict[bytes, Any] = {}
        for position, header in enumerate(headers):
            payload = payloads[position]
            if header is None or payload is None:
                continue
            if payload in made:
                self._checkers[position] = made[payload]
                continue
            checker, problem = header_problem(self._model, header)
            if problem is not None:
                return position, problem
            made[payload] = self._checkers[position] = checker
        return None

    def feed(
        self, records: Sequence[Any], payloads: Sequence[bytes | None], index: int
    ) -> tuple[int, str] | None:
        """The records at ``index`` (None: that implementation has none); returns (position,
        problem) of the first one the trace checker refuses."""
        checkers = self._checkers
        shared = checkers[0]
        first = payloads[0]
        for position in range(1, len(payloads)):
            if checkers[position] is shared and payloads[position] != first:
                checkers[position] = _copied(shared)  # the state before this record
        for position, record in enumerate(records):
            checker = checkers[position]
            if record is None or checker is None or (position and checker is shared):
                continue
            problem = problem_of(checker, record, index)
            if problem is not None:
                return position, problem
        return None


def _copied(checker: Any) -> Any:
    """A checker in the same state; None (this implementation's records go unchecked) when
    a model's checker cannot be copied: its records already differ from the baseline's,
    which is the finding."""
    if checker is None:
        return None
    try:
        return copy.deepcopy(checker)
    except Exception:  # noqa: BLE001 - a model's checker holding what cannot be copied
        return None


def fault(
    model: DecisionModel,
    impl: str,
    record: Any,
    index: int,
    problem: str,
    *,
    decided: bool,
    driver: Any,
) -> TracediffError:
    """The error for a record that breaks the trace conventions (see the module's doc):
    SchedulerFault naming the implementation, or ModelFailed naming the model's driver."""
    if index > 0 and decided and isinstance(record, dict) and record.get("t") == DECISION:
        number = record.get("plan")
        plan = f"plan {number}" if isinstance(number, int) else "a plan"
        return SchedulerFault(
            f"record {index}: {impl} returned {plan} that breaks the trace conventions, so no "
            f"trace could hold it: {problem}; fix the implementation"
        )
    what = "the trace header" if index == 0 else f"record {index}"
    found = yielded_fault(
        model.name,
        driver,
        f"{what}, which it recorded, breaks the trace conventions: {problem}",
    )
    return ModelFailed(found.message())


def rejected(
    model: DecisionModel, record: Any, number: int, *, decided: bool, driver: Any
) -> TracediffError | None:
    """ModelFailed when the driver recorded a decision record the model's ``check_record``
    refuses without the implementation having decided since the record before (the driver
    made it up); None when the refusal is the implementation's (its SchedulerFault)."""
    if decided:
        return None
    try:
        model.check_record(record, number)
    except SchedulerFault as exc:
        found = yielded_fault(
            model.name, driver, f"a decision record it made itself is refused: {exc}"
        )
        return ModelFailed(found.message())
    return None
