"""The plan() benchmark (docs/optimized.md): median time by requests × allocation × probe.

API (pure functions returning data; no printing, no click)::

    result = run_bench(
        {"reference": ReferenceScheduler, "optimized": OptimizedScheduler},
        requests=(8, 16, 32, 64), allocations=("device", "host"), probe=(False, True),
        repeats=25,
    )
    result.cells[0].median("optimized")      # µs
    result.cells[0].ratio("optimized")       # baseline median / optimized median
    result.growth_of("optimized", "device", True).factor   # median at 64 / at 8
    data = bench_to_dict(result)             # {"format": "tracediff-bench", "version": 1, ...}
    bench_from_dict(data) == result

``impls`` maps a name to a factory ``(scenario) -> SchedulerCore`` (a built-in scheduler class,
or anything built on ``SchedulerCore``: the bench prepares its state through that class's
fields), or an ``exec:`` implementation that offers the protocol's ``bench`` message: it is
sent the prepared state as plain data (:func:`bench_state`) and times its own ``plan()``, so
the pipe's cost is not in its numbers (docs/protocol.md). The first name is the baseline of
the ratios unless ``baseline`` names another.

What one cell measures
----------------------
A synthetic scenario of N ``mtp`` requests (truth varied per request, every request arriving
at 0, ``max_new`` out of reach) runs on the simulated engine with ``queue_depth`` 1 until all
N are decoding and have been served for a while; it stops right after a completion, with
one round in flight: the moment the worker plans the round that will queue behind it. The
prefill bonus is made generous for the warm-up only so that N lanes fill up quickly; no
request waits for prefill when the timed plan runs. That one prepared state is then set up:

* with acceptance probe: credit at ``credit_cap`` and every lane's ``trials`` below
  ``probe_min_trials`` (accepts scaled down with them), so probe candidates are built and
  funded;
* without: credit 0 and every ``trials`` at least ``probe_min_trials``, so no lane is eligible.

Each implementation gets that state copied into a fresh instance. Every repetition deep-copies
it (outside the timed region) and times one ``plan()`` with ``time.perf_counter_ns``, garbage
collection paused; implementations alternate within the repetition loop (A, B, A, B...) and
every repetition visits every cell in turn, so a noisy machine slows implementations and
cells alike: the growth from the smallest to the largest cell is as much a ratio of
neighbouring samples as the ratio between two implementations. The thread's CPU time
(``time.thread_time_ns``) is recorded too: on a loaded machine a long call is preempted far
more often than a short one, which inflates wall-clock ratios; CPU-time ratios are not
inflated that way.

The first repetition's records are checked: ``probes`` must be non-empty with a probe and
empty without (else ``SchedulerFault``), and whether every implementation returned the same
bytes is reported as ``records_equal``.
"""

from __future__ import annotations

import copy
import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import msgpack

from tracediff.errors import ImplementationError, SchedulerFault, TraceFormatError, UsageError
from tracediff.executor.call import PLAN, Guarded, ImplementationFailed, construct, passes_through
from tracediff.models.specdec.engine.simulator import SimulatedEngine
from tracediff.models.specdec.scenario import rng
from tracediff.models.specdec.scenario.model import (
    ALLOCATIONS,
    RequestSpec,
    Scenario,
    SchedulerParams,
)
from tracediff.models.specdec.sched.core import DECODING, SchedulerCore
from tracediff.models.specdec.sched.optimized import OptimizedScheduler
from tracediff.models.specdec.sched.record import packed_record, rows_view

BENCH_FORMAT = "tracediff-bench"
BENCH_VERSION = 1
BENCH_SEED = 182  # the scenario seed of every cell; any fixed value will do

Factory = Callable[[Scenario], SchedulerCore]

# The SchedulerCore fields that make up a scheduler's state between events.
_STATE_FIELDS = ("requests", "submitted", "table", "credit", "plan_number", "free_slots")


class _Planner(Protocol):
    def plan(self, now: int) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ImplTiming:
    impl: str
    median_us: float  # wall clock (perf_counter_ns): the headline number
    min_us: float
    cpu_median_us: float  # this thread's CPU time (thread_time_ns): immune to preemption
    samples: int


@dataclass(frozen=True)
class BenchCell:
    requests: int
    allocation: str
    probe: bool
    timings: tuple[ImplTiming, ...]
    candidates: int  # candidate rows in the timed plan's record
    probe_rows: int  # acceptance-probe rows in it
    probe_chosen: bool  # whether the timed plan chose a probe
    records_equal: bool  # every implementation returned the same record bytes

    def timing(self, impl: str) -> ImplTiming:
        for timing in self.timings:
            if timing.impl == impl:
                return timing
        raise KeyError(impl)

    def median(self, impl: str, cpu: bool = False) -> float:
        timing = self.timing(impl)
        return timing.cpu_median_us if cpu else timing.median_us

    def ratio(self, impl: str, baseline: str | None = None, cpu: bool = False) -> float:
        """Baseline median / ``impl`` median: how many times faster ``impl`` is."""
        base = self.timings[0].impl if baseline is None else baseline
        return self.median(base, cpu) / self.median(impl, cpu)


@dataclass(frozen=True)
class Growth:
    """An implementation's median at the largest request count / at the smallest."""

    impl: str
    allocation: str
    probe: bool
    smallest: int
    largest: int
    factor: float


@dataclass(frozen=True)
class BenchResult:
    impls: tuple[str, ...]  # in timing order; the baseline first
    repeats: int
    ragged: bool
    cells: tuple[BenchCell, ...]
    growth: tuple[Growth, ...]

    @property
    def baseline(self) -> str:
        return self.impls[0]

    def cell(self, requests: int, allocation: str, probe: bool) -> BenchCell:
        for cell in self.cells:
            if (cell.requests, cell.allocation, cell.probe) == (requests, allocation, probe):
                return cell
        raise KeyError((requests, allocation, probe))

    def growth_of(self, impl: str, allocation: str, probe: bool) -> Growth:
        for growth in self.growth:
            if (growth.impl, growth.allocation, growth.probe) == (impl, allocation, probe):
                return growth
        raise KeyError((impl, allocation, probe))


MAX_REPEATS = 100_000  # timed calls per cell: far beyond any useful median
MIN_REQUESTS = 8  # per cell: the probe cells need that many (see _check_path)


def default_impls() -> dict[str, Factory]:
    """The built-in pair: reference (the baseline) and optimized."""
    from tracediff.models.specdec.sched.reference import ReferenceScheduler

    return {"reference": ReferenceScheduler, "optimized": OptimizedScheduler}


def run_bench(
    impls: Mapping[str, Factory],
    requests: Sequence[int] = (8, 16, 32, 64),
    allocations: Sequence[str] = ("device", "host"),
    probe: Sequence[bool] = (False, True),
    *,
    repeats: int = 25,
    ragged: bool = True,
    baseline: str | None = None,
) -> BenchResult:
    """Time ``plan()`` per implementation in every (requests, allocation, probe) cell."""
    if not impls:
        raise UsageError("bench: name at least one implementation")
    if not 1 <= repeats <= MAX_REPEATS:
        raise UsageError(
            f"bench: repeats must be at least 1 and at most {MAX_REPEATS:,}, not {repeats}"
        )
    for count in requests:
        if not 1 <= count <= 64:
            raise UsageError(f"bench: request counts must lie in 1..64, not {count}")
        if count < MIN_REQUESTS:
            # a cell with a probe needs lanes that have not verified their cap yet
            raise UsageError(
                f"bench: request counts must be at least {MIN_REQUESTS} (with fewer, every "
                f"lane may already verify its cap and no cell has a probe), not {count}"
            )
    for allocation in allocations:
        if allocation not in ALLOCATIONS:
            raise UsageError(f"bench: allocation {allocation!r} not in {ALLOCATIONS}")
    names = list(impls)
    if baseline is not None:
        if baseline not in impls:
            raise UsageError(f"bench: baseline {baseline!r} is not one of {names}")
        names.remove(baseline)
        names.insert(0, baseline)
    prepared = []
    for count in requests:
        for allocation in allocations:
            scenario, warm = _warm_state(count, allocation, ragged)
            for with_probe in probe:
                prepared.append(_Cell(impls, names, scenario, warm, with_probe))
    # Repetitions outermost: every cell is timed once per round, so a slow stretch of the
    # machine touches all cells alike and the growth between cells is a ratio of samples
    # taken side by side, as the ratio between implementations within a cell is.
    for _ in range(repeats):
        for cell in prepared:
            cell.time_once()
    cells = [cell.result() for cell in prepared]
    return BenchResult(
        impls=tuple(names),
        repeats=repeats,
        ragged=ragged,
        cells=tuple(cells),
        growth=_growth(names, cells),
    )


def bench_to_dict(result: BenchResult) -> dict[str, Any]:
    """A versioned, JSON-friendly form of ``result`` (read back by ``bench_from_dict``)."""
    return {
        "format": BENCH_FORMAT,
        "version": BENCH_VERSION,
        "impls": list(result.impls),
        "baseline": result.baseline,
        "repeats": result.repeats,
        "ragged": result.ragged,
        "cells": [
            {
                "requests": cell.requests,
                "allocation": cell.allocation,
                "probe": cell.probe,
                "median_us": {t.impl: t.median_us for t in cell.timings},
                "min_us": {t.impl: t.min_us for t in cell.timings},
                "cpu_median_us": {t.impl: t.cpu_median_us for t in cell.timings},
                "samples": {t.impl: t.samples for t in cell.timings},
                "ratio": {t.impl: cell.ratio(t.impl) for t in cell.timings[1:]},
                "cpu_ratio": {t.impl: cell.ratio(t.impl, cpu=True) for t in cell.timings[1:]},
                "candidates": cell.candidates,
                "probe_rows": cell.probe_rows,
                "probe_chosen": cell.probe_chosen,
                "records_equal": cell.records_equal,
            }
            for cell in result.cells
        ],
        "growth": [
            {
                "impl": g.impl,
                "allocation": g.allocation,
                "probe": g.probe,
                "smallest": g.smallest,
                "largest": g.largest,
                "factor": g.factor,
            }
            for g in result.growth
        ],
    }


def bench_from_dict(data: Any, source: str = "<bench>") -> BenchResult:
    """Read back ``bench_to_dict``'s output; raises TraceFormatError naming ``source``."""
    if not isinstance(data, dict) or data.get("format") != BENCH_FORMAT:
        raise TraceFormatError(source, f"not a {BENCH_FORMAT} document")
    if data.get("version") != BENCH_VERSION:
        raise TraceFormatError(
            source,
            f"{BENCH_FORMAT} version {data.get('version')!r}; this tracediff reads "
            f"version {BENCH_VERSION}: rerun the bench",
        )
    try:
        impls = tuple(str(name) for name in data["impls"])
        cells = tuple(
            BenchCell(
                requests=int(cell["requests"]),
                allocation=str(cell["allocation"]),
                probe=bool(cell["probe"]),
                timings=tuple(
                    ImplTiming(
                        impl=name,
                        median_us=float(cell["median_us"][name]),
                        min_us=float(cell["min_us"][name]),
                        cpu_median_us=float(cell["cpu_median_us"][name]),
                        samples=int(cell["samples"][name]),
                    )
                    for name in impls
                ),
                candidates=int(cell["candidates"]),
                probe_rows=int(cell["probe_rows"]),
                probe_chosen=bool(cell["probe_chosen"]),
                records_equal=bool(cell["records_equal"]),
            )
            for cell in data["cells"]
        )
        growth = tuple(
            Growth(
                impl=str(g["impl"]),
                allocation=str(g["allocation"]),
                probe=bool(g["probe"]),
                smallest=int(g["smallest"]),
                largest=int(g["largest"]),
                factor=float(g["factor"]),
            )
            for g in data["growth"]
        )
        return BenchResult(
            impls=impls,
            repeats=int(data["repeats"]),
            ragged=bool(data["ragged"]),
            cells=cells,
            growth=growth,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceFormatError(source, f"malformed {BENCH_FORMAT} document: {exc!r}") from None


# -- preparing a cell ----------------------------------------------------------------------
def bench_scenario(requests: int, allocation: str, ragged: bool = True) -> Scenario:
    """The synthetic scenario of a cell (warm-up parameters included)."""
    specs = tuple(
        RequestSpec(
            id=index,
            arrival_us=0,
            prompt_len=64,
            max_new=1_000_000,
            accept_base=0.45 + 0.5 * rng.uniform(BENCH_SEED, "bench-base", index),
            accept_decay=0.7 + 0.3 * rng.uniform(BENCH_SEED, "bench-decay", index),
        )
        for index in range(requests)
    )
    params = SchedulerParams(
        allocation=allocation,
        ragged=ragged,
        queue_depth=1,
        eager_shapes=((1, 64, 96), (0, 48, 3), (1, 16, 24)) if ragged else (),
        # Warm-up only: a waiting prefill row wins at once, so N lanes fill quickly.
        prefill_bonus_cap=1000.0,
        prefill_bonus_period_us=1,
    )
    return Scenario(profile="bench", seed=BENCH_SEED, params=params, requests=specs)


def _warm_state(
    requests: int, allocation: str, ragged: bool
) -> tuple[Scenario, tuple[SchedulerCore, int]]:
    """Run the cell's scenario to a steady state with one round in flight."""
    scenario = bench_scenario(requests, allocation, ragged)
    engine = SimulatedEngine(scenario)
    scheduler = OptimizedScheduler(scenario)
    for spec in scenario.requests:
        scheduler.arrive(spec, 0)
    now = 0
    settled = 0  # plans since every request was decoding
    depth = 1 + scenario.params.queue_depth
    while True:
        while engine.busy < depth:
            record = scheduler.plan(now)
            if record["round"] is None:
                break
            engine.submit(record["plan"], record["round"], now)
        decoding = all(s.phase == DECODING for s in scheduler.requests.values())
        if decoding:
            settled += 1
        due = engine.next_completion()
        if due is None:
            raise SchedulerFault(f"bench: the warm-up of {requests} requests went idle")
        now = due
        scheduler.complete(engine.complete_next(), now)
        if settled >= 24 and engine.busy == 1:
            return scenario, (scheduler, now)


def _set_probe_state(scheduler: SchedulerCore, with_probe: bool) -> None:
    params = scheduler.params
    least = params.probe_min_trials
    for state in scheduler.requests.values():
        for k, (trials, accepts) in enumerate(zip(state.trials, state.accepts, strict=True)):
            if with_probe:
                fewer = min(trials, least - 1)
                state.accepts[k] = accepts * fewer // trials if trials else 0
                state.trials[k] = fewer
            else:
                state.trials[k] = max(trials, least)
    scheduler.credit = params.credit_cap if with_probe else 0.0


class _Cell:
    """One cell, prepared: every implementation holds the cell's state; :meth:`time_once`
    times one ``plan()`` of each (A, B, ...), :meth:`result` gives the medians."""

    def __init__(
        self,
        impls: Mapping[str, Factory],
        names: list[str],
        scenario: Scenario,
        warm: tuple[SchedulerCore, int],
        with_probe: bool,
    ) -> None:
        source, self.now = warm
        base = copy.deepcopy(source)
        _set_probe_state(base, with_probe)
        self.names, self.scenario, self.with_probe = names, scenario, with_probe
        self.prepared: dict[str, SchedulerCore] = {}
        self.external: dict[str, Any] = {}
        self.state = bench_state(base)
        for name in names:
            instance = construct(name, impls[name], scenario)
            if getattr(instance, "benchable", False):
                self.external[name] = Guarded(instance, name)
                continue
            if not isinstance(instance, SchedulerCore) or not callable(
                getattr(instance, "plan", None)
            ):
                raise ImplementationError(
                    f"bench: {name} is not a scheduler built on SchedulerCore with a plan() "
                    "method, nor an exec: implementation offering the 'bench' message; the "
                    "bench prepares its state through SchedulerCore's fields"
                )
            for field in _STATE_FIELDS:
                setattr(instance, field, copy.deepcopy(getattr(base, field)))
            self.prepared[name] = instance
        self.samples: dict[str, list[int]] = {name: [] for name in names}
        self.cpu_samples: dict[str, list[int]] = {name: [] for name in names}
        self.first: dict[str, bytes] = {}

    def time_once(self) -> None:
        now, scenario = self.now, self.scenario
        for name in self.names:
            if name in self.external:
                record, elapsed, cpu_elapsed = self.external[name].bench(self.state, now)
            else:
                plan = cast(_Planner, copy.deepcopy(self.prepared[name])).plan
                enabled = gc.isenabled()
                gc.disable()
                try:
                    cpu_start = time.thread_time_ns()
                    start = time.perf_counter_ns()
                    record = plan(now)
                    elapsed = time.perf_counter_ns() - start
                    cpu_elapsed = time.thread_time_ns() - cpu_start
                except BaseException as exc:  # noqa: BLE001 - user code: tracediff.executor.call's rule
                    if passes_through(exc):
                        raise
                    raise ImplementationFailed(name, PLAN, exc) from exc
                finally:
                    if enabled:
                        gc.enable()
            self.samples[name].append(elapsed)
            self.cpu_samples[name].append(cpu_elapsed)
            if name not in self.first:
                self.first[name] = msgpack.packb(packed_record(record), use_bin_type=True)
                _check_path(name, record, len(scenario.requests), scenario, self.with_probe)

    def result(self) -> BenchCell:
        names, first = self.names, self.first
        reference = rows_view(msgpack.unpackb(first[names[0]], raw=False, strict_map_key=False))
        return BenchCell(
            requests=len(self.scenario.requests),
            allocation=self.scenario.params.allocation,
            probe=self.with_probe,
            timings=tuple(
                ImplTiming(
                    impl=name,
                    median_us=statistics.median(self.samples[name]) / 1000.0,
                    min_us=min(self.samples[name]) / 1000.0,
                    cpu_median_us=statistics.median(self.cpu_samples[name]) / 1000.0,
                    samples=len(self.samples[name]),
                )
                for name in names
            ),
            candidates=len(reference["candidates"]),
            probe_rows=len(reference["probes"]),
            probe_chosen=reference["probe"] >= 0,
            records_equal=len(set(first.values())) == 1,
        )


def bench_state(scheduler: SchedulerCore) -> dict[str, Any]:
    """A scheduler's state between events as plain data (the protocol's ``bench`` message):
    requests in the scheduler's order (phase as its number in ``core``), rounds in flight in
    submission order, the round table in insertion order, credit, plan counter, free slots."""
    return {
        "requests": [
            {
                "id": s.spec.id,
                "phase": s.phase,
                "slot": s.slot,
                "prefilled": s.prefilled,
                "prefill_in_flight": s.prefill_in_flight,
                "generated": s.generated,
                "pending_count": s.pending_count,
                "last_served": s.last_served,
                "offer": s.offer,
                "trials": list(s.trials),
                "accepts": list(s.accepts),
            }
            for s in scheduler.requests.values()
        ],
        "submitted": [
            {
                "plan": r.plan,
                "kind": r.kind,
                "b_pad": r.b_pad,
                "width": r.width,
                "lanes": [[ln.request, ln.slot, ln.prefix, ln.alloc] for ln in r.lanes],
                "prefill_request": r.prefill_request,
                "prefill_tokens": r.prefill_tokens,
                "duration": r.duration,
            }
            for r in scheduler.submitted.values()
        ],
        "table": [[*key, value[0], value[1]] for key, value in scheduler.table.items()],
        "credit": scheduler.credit,
        "plan_number": scheduler.plan_number,
        "free_slots": list(scheduler.free_slots),
    }


def load_bench_state(scheduler: SchedulerCore, scenario: Scenario, state: dict[str, Any]) -> None:
    """Put :func:`bench_state`'s data into a fresh scheduler built on SchedulerCore."""
    from tracediff.models.specdec.sched.core import RequestState, SubmittedLane, SubmittedRound

    specs = {spec.id: spec for spec in scenario.requests}
    requests: dict[int, RequestState] = {}
    for row in state["requests"]:
        requests[row["id"]] = RequestState(
            spec=specs[row["id"]],
            phase=row["phase"],
            slot=row["slot"],
            prefilled=row["prefilled"],
            prefill_in_flight=row["prefill_in_flight"],
            generated=row["generated"],
            pending_count=row["pending_count"],
            last_served=row["last_served"],
            offer=row["offer"],
            trials=list(row["trials"]),
            accepts=list(row["accepts"]),
        )
    submitted: dict[int, SubmittedRound] = {}
    for row in state["submitted"]:
        lanes = tuple(SubmittedLane(*lane) for lane in row["lanes"])
        submitted[row["plan"]] = SubmittedRound(
            row["plan"],
            row["kind"],
            row["b_pad"],
            row["width"],
            lanes,
            row["prefill_request"],
            row["prefill_tokens"],
            row["duration"],
        )
        for lane in lanes:
            requests[lane.request].tracked_advance += 1 + lane.prefix
    scheduler.requests = requests
    scheduler.submitted = submitted
    scheduler.table = {(k, b, w): [estimate, seen] for k, b, w, estimate, seen in state["table"]}
    scheduler.credit = state["credit"]
    scheduler.plan_number = state["plan_number"]
    scheduler.free_slots = list(state["free_slots"])


def _check_path(
    name: str, record: dict[str, Any], requests: int, scenario: Scenario, with_probe: bool
) -> None:
    """The cell must exercise what it claims: probe rows with a probe, none without."""
    cell = f"bench cell {requests} {scenario.params.allocation} probe={with_probe}"
    record = rows_view(packed_record(record))
    if len(record["eligible"]) != requests:
        raise SchedulerFault(
            f"{cell}: {name} saw {len(record['eligible'])} eligible lanes, not {requests}"
        )
    if with_probe and not record["probes"]:
        raise SchedulerFault(
            f"{cell}: {name} built no acceptance-probe candidate; with few requests every "
            "lane may already verify its cap: bench 8 or more requests"
        )
    if not with_probe and record["probes"]:
        raise SchedulerFault(
            f"{cell}: {name} built acceptance probes without trials below probe_min_trials"
        )


def _growth(names: list[str], cells: list[BenchCell]) -> tuple[Growth, ...]:
    out = []
    groups: dict[tuple[str, bool], list[BenchCell]] = {}
    for cell in cells:
        groups.setdefault((cell.allocation, cell.probe), []).append(cell)
    for (allocation, with_probe), group in groups.items():
        smallest = min(group, key=lambda c: c.requests)
        largest = max(group, key=lambda c: c.requests)
        if smallest is largest:
            continue
        for name in names:
            out.append(
                Growth(
                    impl=name,
                    allocation=allocation,
                    probe=with_probe,
                    smallest=smallest.requests,
                    largest=largest.requests,
                    factor=largest.median(name) / smallest.median(name),
                )
            )
    return tuple(out)


__all__ = [
    "BENCH_FORMAT",
    "BENCH_VERSION",
    "BenchCell",
    "BenchResult",
    "Growth",
    "ImplTiming",
    "bench_from_dict",
    "bench_scenario",
    "bench_state",
    "bench_to_dict",
    "default_impls",
    "load_bench_state",
    "run_bench",
]
