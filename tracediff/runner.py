"""Run scenarios through implementations in lockstep and compare their traces byte for byte.

Design: *lockstep comparison*, with per-scenario digests as a by-product. Each worker
process drives every implementation of one scenario side by side, one record at a time:
each record is encoded canonically, fed to that implementation's body digest and compared
with the other implementations' bytes for the same record index. Memory stays bounded
(one record per implementation at a time, whatever the run's size), the first divergence
is found without decoding anything twice, and a failure or hang is pinned to a plan. The
digests are what golden manifests store, so CI can check one implementation alone.

Diverging scenarios are re-run (deterministically) to write full trace files into an
artifacts directory when one is given; identical scenarios write nothing.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import os
import platform
import signal
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracediff import __version__
from tracediff.engine.driver import drive
from tracediff.errors import SchedulerFault
from tracediff.impls import ImplSpec, load
from tracediff.scenario.model import RequestSpec, Scenario
from tracediff.trace import BodyDigest, TraceWriter, encode

IDENTICAL, DIVERGED, ERROR, TIMEOUT = "identical", "diverged", "error", "timeout"


@dataclass(frozen=True)
class RunOptions:
    impls: tuple[ImplSpec, ...]
    jobs: int = 1
    artifacts: str | None = None  # keep diverging traces here
    timeout_s: float | None = None  # per scenario, all implementations together


@dataclass(frozen=True)
class ImplStats:
    name: str
    records: int
    plans: int
    digest: str
    seconds: float  # driving this implementation (scheduler + simulated engine)
    plan_seconds: float  # inside plan() alone


@dataclass(frozen=True)
class ScenarioResult:
    profile: str
    seed: int
    features: str
    status: str
    impls: tuple[ImplStats, ...]
    divergence: int | None = None  # body index of the first differing record (header = 0)
    plan: int | None = None  # plan number at (or last before) the divergence or failure
    record_type: str | None = None
    failed_impl: str | None = None
    message: str = ""
    harness_seconds: float = 0.0  # encoding, digesting and comparing
    artifacts: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.profile}:{self.seed}"


@dataclass(frozen=True)
class RunSummary:
    impls: tuple[str, ...]
    results: tuple[ScenarioResult, ...]
    wall_seconds: float
    interrupted: bool = False
    skipped: int = 0
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def scenarios(self) -> int:
        return len(self.results)

    @property
    def plans(self) -> int:
        return sum(r.impls[0].plans for r in self.results if r.impls)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(r.status == IDENTICAL for r in self.results)


class _Timed:
    """Forwards the driver interface, timing plan() (kept out of the compared bytes)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.plan_ns = 0
        self.plans = 0

    def arrive(self, spec: RequestSpec, now: int) -> None:
        self.inner.arrive(spec, now)

    def plan(self, now: int) -> dict[str, Any]:
        start = time.perf_counter_ns()
        record: dict[str, Any] = self.inner.plan(now)
        self.plan_ns += time.perf_counter_ns() - start
        self.plans += 1
        return record

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        result: list[int] = self.inner.complete(event, now)
        return result


class ScenarioTimeout(Exception):
    """Raised inside a worker when a scenario exceeds its time limit."""


@functools.lru_cache(maxsize=32)
def _factory(spec: ImplSpec) -> Callable[[Scenario], Any]:
    return load(spec)


def run_scenario(
    scenario: Scenario,
    specs: Sequence[ImplSpec],
    *,
    artifacts: str | None = None,
    timeout_s: float | None = None,
) -> ScenarioResult:
    """Drive every implementation of one scenario in lockstep and compare their records."""
    names = [s.name for s in specs]
    timed: list[_Timed] = []
    drivers: list[Iterator[dict[str, Any]]] = []
    digests = [BodyDigest() for _ in specs]
    seconds = [0.0] * len(specs)
    records = [0] * len(specs)
    harness_ns = 0
    divergence: int | None = None
    record_type: str | None = None
    plan_number: int | None = None
    last_plan = 0
    status = IDENTICAL
    failed: str | None = None
    message = ""
    current = 0
    alarm = _start_alarm(timeout_s)
    try:
        for spec in specs:
            current = len(timed)
            scheduler = _Timed(_factory(spec)(scenario))
            timed.append(scheduler)
            drivers.append(drive(scenario, scheduler))
        index = 0
        while True:
            payloads: list[bytes | None] = []
            decoded: list[dict[str, Any] | None] = []
            for current, driver in enumerate(drivers):
                start = time.perf_counter()
                record = next(driver, None)
                seconds[current] += time.perf_counter() - start
                decoded.append(record)
                if record is None:
                    payloads.append(None)
                    continue
                start_ns = time.perf_counter_ns()
                try:
                    payload = encode(record)
                except Exception as exc:  # noqa: BLE001 - an unencodable record is a finding
                    raise SchedulerFault(
                        f"record {index}: cannot be encoded: {type(exc).__name__}: {exc}"
                    ) from None
                if index == 0:
                    digests[current].add_header(payload)
                else:
                    digests[current].add_record(payload)
                harness_ns += time.perf_counter_ns() - start_ns
                records[current] += 1
                payloads.append(payload)
            start_ns = time.perf_counter_ns()
            same = all(p == payloads[0] for p in payloads)
            harness_ns += time.perf_counter_ns() - start_ns
            first = decoded[0] or next((d for d in decoded if d is not None), None)
            if first is not None and first.get("t") == "plan":
                last_plan = first["plan"]
            if not same and divergence is None:
                divergence = index
                record_type = _record_type(first)
                plan_number = last_plan
                status = DIVERGED
            if all(p is None for p in payloads):
                break
            index += 1
    except ScenarioTimeout:
        status, failed = TIMEOUT, names[current]
        plan_number = timed[current].plans if current < len(timed) else 0
        message = f"{names[current]} exceeded the {timeout_s:g} s scenario time limit"
    except Exception as exc:  # noqa: BLE001 - an implementation failing is a finding
        status, failed = ERROR, names[current] if current < len(names) else None
        plan_number = timed[current].plans if current < len(timed) else 0
        message = "".join(traceback.format_exception(exc)).rstrip()
        if isinstance(exc, SchedulerFault):
            message = str(exc)
    finally:
        _stop_alarm(alarm)
    stats = tuple(
        ImplStats(
            name=names[i],
            records=records[i],
            plans=timed[i].plans if i < len(timed) else 0,
            digest=digests[i].hexdigest(),
            seconds=seconds[i],
            plan_seconds=(timed[i].plan_ns / 1e9) if i < len(timed) else 0.0,
        )
        for i in range(len(specs))
    )
    kept: tuple[str, ...] = ()
    if artifacts and status == DIVERGED:
        kept = tuple(write_trace(scenario, spec, artifacts) for spec in specs)
    return ScenarioResult(
        profile=scenario.profile,
        seed=scenario.seed,
        features=scenario.features(),
        status=status,
        impls=stats,
        divergence=divergence,
        plan=plan_number,
        record_type=record_type,
        failed_impl=failed,
        message=message,
        harness_seconds=harness_ns / 1e9,
        artifacts=kept,
    )


def _record_type(record: dict[str, Any] | None) -> str:
    if record is None:
        return "end"
    return str(record.get("t", "header"))


def trace_records(scenario: Scenario, spec: ImplSpec) -> Iterator[dict[str, Any]]:
    """The records one implementation produces for a scenario (header first)."""
    return drive(scenario, _factory(spec)(scenario))


def write_trace(scenario: Scenario, spec: ImplSpec, directory: str, path: str | None = None) -> str:
    """Record one scenario through one implementation into a trace file; returns its path."""
    if path is None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        safe = spec.name.replace(":", "_").replace("/", "_")
        path = os.path.join(directory, f"{scenario.profile}-{scenario.seed}-{safe}.trace")
    records = trace_records(scenario, spec)
    header = next(records)
    started = time.time()
    with TraceWriter(path, header) as writer:
        for record in records:
            writer.write_record(encode(record))
        writer.write_provenance(
            {
                "implementation": spec.name,
                "target": spec.target,
                "tracediff": __version__,
                "python": platform.python_version(),
                "host": platform.node(),
                "wall_seconds": round(time.time() - started, 6),
            }
        )
    return path


def _start_alarm(timeout_s: float | None) -> bool:
    if not timeout_s or os.name != "posix":
        return False

    def _expired(_signum: int, _frame: Any) -> None:
        raise ScenarioTimeout()

    signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    return True


def _stop_alarm(active: bool) -> None:
    if active:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)


def _worker(
    args: tuple[Scenario, tuple[ImplSpec, ...], str | None, float | None],
) -> ScenarioResult:
    scenario, specs, artifacts, timeout_s = args
    return run_scenario(scenario, specs, artifacts=artifacts, timeout_s=timeout_s)


def _init_worker() -> None:
    # The parent handles Ctrl-C and stops the pool; workers must not print tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_scenarios(
    scenarios: Sequence[Scenario],
    options: RunOptions,
    on_result: Callable[[ScenarioResult], None] | None = None,
) -> RunSummary:
    """Run scenarios (in worker processes when ``jobs`` > 1); results in input order."""
    started = time.perf_counter()
    results: dict[int, ScenarioResult] = {}
    interrupted = False
    work = [(s, options.impls, options.artifacts, options.timeout_s) for s in scenarios]
    try:
        if options.jobs <= 1 or len(work) <= 1:
            for i, item in enumerate(work):
                results[i] = _worker(item)
                if on_result:
                    on_result(results[i])
        else:
            with cf.ProcessPoolExecutor(
                max_workers=min(options.jobs, len(work)), initializer=_init_worker
            ) as pool:
                futures = {pool.submit(_worker, item): i for i, item in enumerate(work)}
                try:
                    for future in cf.as_completed(futures):
                        results[futures[future]] = future.result()
                        if on_result:
                            on_result(results[futures[future]])
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
    except KeyboardInterrupt:
        interrupted = True
    ordered = tuple(results[i] for i in sorted(results))
    return RunSummary(
        impls=tuple(s.name for s in options.impls),
        results=ordered,
        wall_seconds=time.perf_counter() - started,
        interrupted=interrupted,
        skipped=len(work) - len(ordered),
    )


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
