"""The live serving loop: the simulator's worker loop, on a real clock and a real device.

It follows the driver's order of events (``tracediff/models/specdec/engine/driver.py``) so that a
live trace
replays exactly like a simulated one:

1. Apply what is due, stamped with one clock reading: completions the device has finished
   (in submission order, each followed by its retirements), then arrivals whose time has
   come. Completions before arrivals, as in the simulator.
2. While fewer than ``1 + queue_depth`` rounds are in flight, call ``plan(now)`` (``now`` read
   afresh for each call), record it and submit its round; a plan without a round ends the step.
3. Block until the device finishes a round or the next arrival is due.

The clock is integer microseconds since the loop started, from ``perf_counter_ns``: it never
goes backwards, so the recorded ``now`` values are monotone. Everything the scheduler is
told is recorded with exactly the ``now`` it was told, which is all replay needs.

Recording. Each record is encoded and written on this thread (``record``, the sink) before the
next scheduler call, because an implementation may reuse the lists it returned once it is
called again; encoding later could record what they became, not what was decided. A plan is
recorded just after its round is submitted, so the device has the round while the plan is
encoded; a completion is recorded before ``complete`` sees it, as the simulator's driver
does. Encoding a record takes tens of microseconds of CPU and with rounds queued the device
works meanwhile, so recording costs loop time rather than device time. That is measured on
every run, not assumed: the summary reports the sink's wall and CPU time per record (on the
CPU the device is a thread of this process, so wall time includes waits for the GIL while
the device runs Python), the loop's own time (everything but ``plan``/``complete``/``arrive``
and blocking), and the device's busy share, which is what a stalled loop would lower.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracediff.errors import SchedulerFault
from tracediff.models.specdec.live.engine import Completed, LiveEngine, check_round
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.record import PLAN_KEYS

MAX_PLANS = 200_000


@dataclass
class LoopStats:
    """What the loop measured (µs unless named otherwise)."""

    started_ns: int = 0
    ended_ns: int = 0
    plan_us: list[int] = field(default_factory=list)
    events_us: int = 0  # in complete() and arrive()
    record_us: int = 0  # in the sink: encoding and writing records (wall time)
    record_cpu_us: int = 0  # the same, as this thread's CPU time (without GIL waits)
    records: int = 0
    waiting_us: int = 0  # blocked, waiting for the device or an arrival
    loop_cpu_us: int = 0  # this thread's CPU time over the whole loop
    scheduler_cpu_us: int = 0  # of which in plan(), complete() and arrive()
    completed: list[Completed] = field(default_factory=list)

    @property
    def wall_us(self) -> int:
        return (self.ended_ns - self.started_ns) // 1000

    @property
    def harness_us(self) -> int:
        """Loop time that is neither the scheduler's nor spent waiting: the harness's own."""
        return self.wall_us - sum(self.plan_us) - self.events_us - self.waiting_us

    @property
    def harness_cpu_us(self) -> int:
        """The same as CPU time: robust to a loaded machine and to waits for the GIL."""
        return self.loop_cpu_us - self.scheduler_cpu_us


Sink = Callable[[dict[str, Any]], None]
Progress = Callable[[int], None]


def serve(
    scenario: Scenario,
    scheduler: Any,
    engine: LiveEngine,
    record: Sink,
    progress: Progress | None = None,
) -> LoopStats:
    """Serve ``scenario`` with ``scheduler`` on ``engine``; every record goes to ``record``."""
    stats = LoopStats()
    arrivals = sorted(scenario.requests, key=lambda r: (r.arrival_us, r.id))
    retired: set[int] = set()
    depth = 1 + scenario.params.queue_depth
    budget = scenario.params.verify_budget
    next_arrival = 0
    plans = 0
    origin = time.perf_counter_ns()
    stats.started_ns = origin
    origin_cpu = time.thread_time_ns()

    def clock() -> int:
        return (time.perf_counter_ns() - origin) // 1000

    def emit(item: dict[str, Any]) -> None:
        began = time.perf_counter_ns()
        began_cpu = time.thread_time_ns()
        record(item)
        stats.record_cpu_us += (time.thread_time_ns() - began_cpu) // 1000
        stats.record_us += (time.perf_counter_ns() - began) // 1000
        stats.records += 1

    ready: list[Completed] = []
    while True:
        now = clock()
        for done in [*ready, *engine.poll()]:
            stats.completed.append(done)
            event = {
                "t": "completion",
                "now": now,
                "round": done.plan,
                "observed_us": done.duration_us,
                "lanes": done.lanes,
            }
            emit(event)
            began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
            finished = scheduler.complete(event, now)
            stats.events_us += (time.perf_counter_ns() - began) // 1000
            stats.scheduler_cpu_us += (time.thread_time_ns() - began_cpu) // 1000
            if finished:
                retired.update(finished)
                emit({"t": "retire", "now": now, "requests": list(finished)})
                if progress is not None:
                    progress(len(retired))
        ready = []
        while next_arrival < len(arrivals) and arrivals[next_arrival].arrival_us <= now:
            spec = arrivals[next_arrival]
            next_arrival += 1
            began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
            scheduler.arrive(spec, now)
            stats.events_us += (time.perf_counter_ns() - began) // 1000
            stats.scheduler_cpu_us += (time.thread_time_ns() - began_cpu) // 1000
            emit({"t": "arrival", "now": now, "request": spec.id})
        while engine.busy < depth:
            now = clock()
            began, began_cpu = time.perf_counter_ns(), time.thread_time_ns()
            plan = scheduler.plan(now)
            stats.plan_us.append((time.perf_counter_ns() - began) // 1000)
            stats.scheduler_cpu_us += (time.thread_time_ns() - began_cpu) // 1000
            plans += 1
            _check_plan(plan, plans)
            if plan["round"] is None:
                emit(plan)
                break
            check_round(plan["plan"], plan["round"], budget)
            # Submit first, record after: the device has the round while the plan is encoded
            # (still before the next scheduler call, so the record is what was decided).
            engine.submit(plan["plan"], plan["round"])
            emit(plan)
        if engine.busy == 0 and next_arrival >= len(arrivals):
            missing = [r.id for r in scenario.requests if r.id not in retired]
            if missing:
                raise SchedulerFault(
                    f"plan {plans}: the scheduler stopped planning with requests "
                    f"{missing[:8]} not retired"
                )
            break
        if plans > MAX_PLANS:
            raise SchedulerFault(f"plan {plans}: more than {MAX_PLANS} plans; runaway run")
        timeout = None
        if next_arrival < len(arrivals):
            timeout = max(0, arrivals[next_arrival].arrival_us - clock()) / 1e6
        began = time.perf_counter_ns()
        if engine.busy or timeout:
            ready = engine.wait(timeout)
        stats.waiting_us += (time.perf_counter_ns() - began) // 1000
    stats.ended_ns = time.perf_counter_ns()
    stats.loop_cpu_us = (time.thread_time_ns() - origin_cpu) // 1000
    return stats


def _check_plan(record: Any, number: int) -> None:
    if not isinstance(record, dict) or tuple(record) != PLAN_KEYS:
        keys = list(record) if isinstance(record, dict) else type(record).__name__
        raise SchedulerFault(
            f"plan {number}: malformed plan record: keys {keys}, expected {list(PLAN_KEYS)}"
        )
