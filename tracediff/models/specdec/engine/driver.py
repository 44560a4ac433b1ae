"""The worker loop: apply due events, plan while the queue has room, advance the clock.

``drive`` is a generator of plain record dicts (header first), so a caller can encode,
compare or store them one at a time with bounded memory, and two drivers can run in
lockstep. The scheduler is anything with the driver interface (docs/implementations.md):
``arrive(spec, now)``, ``plan(now) -> dict``, ``complete(event, now) -> list[int]``.

A scheduler may also have ``begin_step(now, events, plans)``: before each step the driver
tells it the calls it is about to make, ``events`` the ``(ARRIVE, spec)`` and ``(COMPLETE,
event)`` pairs in order and ``plans`` how many plans at most (fewer when one chooses no
round). The calls still follow one by one; an implementation in another process uses the
announcement to send them all at once (docs/protocol.md, version 2).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tracediff.errors import SchedulerFault
from tracediff.model import Encoded
from tracediff.models.specdec.engine.simulator import SimulatedEngine
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.record import COLUMNS, PLAN_KEYS, TYPE_NAMES, packed_record
from tracediff.models.specdec.schema import SCHEMA_VERSION, TRACE_FORMAT, record_problem
from tracediff.trace.columns import ColumnError

TRACE_VERSION = SCHEMA_VERSION
ARRIVE, COMPLETE = "arrive", "complete"  # the kinds of a step's events (begin_step)
MAX_PLANS = 200_000  # a scenario that needs more is a scheduler that does not converge


def header_record(scenario: Scenario) -> dict[str, Any]:
    """The trace header: format, version, the full scenario and the column names."""
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "scenario": scenario.to_dict(),
        "columns": {name: list(cols) for name, cols in COLUMNS.items()},
        "types": {name: list(types) for name, types in TYPE_NAMES.items()},
    }


def drive(scenario: Scenario, scheduler: Any, *, check: bool = True) -> Iterator[dict[str, Any]]:
    """Run ``scenario`` through ``scheduler`` on the simulated engine, yielding records.

    The first record is the header. Events are applied in time order (completions before
    arrivals at the same microsecond); after them the scheduler plans while fewer than
    ``1 + queue_depth`` rounds are in flight. Each plan record's wide tables are turned
    into typed columns if the scheduler gave rows, and its content is checked against the
    trace schema; ``check=False`` leaves that content check to the caller, who must call
    :func:`check_plan` on the record before asking for the next one (the runner skips it
    for a record whose bytes equal a record it already checked).
    """
    engine = SimulatedEngine(scenario)
    arrivals = sorted(scenario.requests, key=lambda r: (r.arrival_us, r.id))
    # arrival times with a sentinel past every completion: "no arrival left" needs no test
    never = float("inf")
    arrival_times: list[float] = [r.arrival_us for r in arrivals]
    arrival_times.append(never)
    retired: set[int] = set()
    next_arrival = 0
    now = 0
    plans = 0
    depth = 1 + scenario.params.queue_depth
    begin_step = getattr(scheduler, "begin_step", None)
    in_flight = engine.in_flight  # the engine's rounds in flight, oldest first (a deque)
    complete_next, submit = engine.complete_next, engine.submit
    yield header_record(scenario)
    while True:
        # The step's events depend on the engine alone, so they are known before the
        # scheduler sees any of them.
        events: list[tuple[str, Any]] = []
        arrival_at = arrival_times[next_arrival]
        while True:
            due = in_flight[0][0] if in_flight else never
            if due <= now and due <= arrival_at:
                events.append((COMPLETE, complete_next()))
            elif arrival_at <= now:
                events.append((ARRIVE, arrivals[next_arrival]))
                next_arrival += 1
                arrival_at = arrival_times[next_arrival]
            else:
                break
        if begin_step is not None:
            begin_step(now, events, depth - len(in_flight))
        for kind, item in events:
            if kind is COMPLETE:
                yield item
                done = scheduler.complete(item, now)
                if done:
                    ids = _retired_ids(done, plans)
                    retired.update(ids)
                    yield {"t": "retire", "now": now, "requests": ids}
            else:
                scheduler.arrive(item, now)
                yield {"t": "arrival", "now": now, "request": item.id}
        while len(in_flight) < depth:
            record = scheduler.plan(now)
            plans += 1
            record = _packed_plan(record, plans)
            if check:
                check_plan(record, plans)
            yield record
            last_round = record["round"]
            if last_round is None:
                break
            submit(record["plan"], last_round, now)
        due = in_flight[0][0] if in_flight else never
        if due == never and arrival_at == never:
            missing = [r.id for r in scenario.requests if r.id not in retired]
            if missing:
                raise SchedulerFault(
                    f"plan {plans}: the scheduler stopped planning with requests "
                    f"{missing[:8]} not retired"
                )
            return
        if plans > MAX_PLANS:
            raise SchedulerFault(f"plan {plans}: more than {MAX_PLANS} plans; runaway scenario")
        # the earlier of the next completion and the next arrival (one of them exists)
        now = int(due if due < arrival_at else arrival_at)


def _packed_plan(record: Any, number: int) -> dict[str, Any]:
    """The plan record to record: its keys checked, wide tables given as rows turned into
    typed columns. A record that came with its bytes (Encoded: asked for only where the
    digest of those bytes is checked against a known good one) is recorded as it came."""
    if type(record) is Encoded:
        return record
    if not isinstance(record, dict) or tuple(record) != PLAN_KEYS:
        keys = list(record) if isinstance(record, dict) else type(record).__name__
        raise SchedulerFault(
            f"plan {number}: malformed plan record: keys {keys}, expected {list(PLAN_KEYS)}"
        )
    try:
        packed = packed_record(record)
    except ColumnError as exc:
        raise SchedulerFault(f"plan {number}: malformed plan record: {exc}") from None
    return packed


def check_plan(record: dict[str, Any], number: int) -> None:
    """Refuse a plan record the trace schema refuses, so that every trace tracediff records
    reads back (models/specdec/schema.py): the implementation's finding, not a bad file."""
    problem = record_problem(record)
    if problem is not None:
        what = "round" if problem.startswith("round") else "plan record"
        raise SchedulerFault(f"plan {number}: malformed {what}: {problem}")


_INT_ONLY = frozenset({int})


def _retired_ids(done: Any, plans: int) -> list[int]:
    """The request ids ``complete()`` returned, as the retire record holds them."""
    if type(done) is list and set(map(type, done)) <= _INT_ONLY:
        return done[:]  # what the schema check below accepts, in one C-level pass
    try:
        ids = list(done)
    except TypeError:
        ids = None
    problem = None if ids is None else record_problem({"t": "retire", "now": 0, "requests": ids})
    if ids is None or problem is not None:
        raise SchedulerFault(
            f"after plan {plans}: complete() returned {type(done).__name__} {done!r:.60}, "
            "expected a list of the retired request ids"
        )
    return ids
