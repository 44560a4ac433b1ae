"""Self-check: does an implementation decide the same way twice?

Byte-for-byte comparison assumes each implementation is deterministic: the same scenario
gives the same trace. An implementation that is not (it reads a global random generator,
keeps state in a class attribute or module cache that outlives an instance, orders by
``id()``...) makes divergences come and go, and a divergence it causes says nothing about
the other implementation. The self-check runs each implementation twice per scenario, in
one worker process, through two fresh instances one after the other, and compares the two
traces' body digests. When they differ, the record hashes kept on the way give the first
record where they part, so the report points at a plan just as a divergence does.

It reports *nondeterminism* apart from divergence: a scenario that is nondeterministic for
one implementation is a finding about that implementation alone. An implementation that
fails (raises, times out, kills its worker) the same way twice is an ``error`` or
``timeout`` finding: not nondeterminism, but not a clean bill of health either.

What it cannot see: nondeterminism that is constant within one process, e.g. iterating a
set of strings (string hashing is randomised per process by ``PYTHONHASHSEED``). Golden
digests catch that one, since the manifest was written by another process.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff import model as models
from tracediff.errors import SchedulerFault
from tracediff.executor import (
    DONE,
    KILLED,
    Executor,
    Notify,
    Outcome,
    ScenarioTimeout,
    grace,
    open_executor,
    time_limit,
)
from tracediff.executor.call import passes_through
from tracediff.model import Scenario
from tracediff.project.impls import ImplSpec
from tracediff.running.record import Recording, start

DETERMINISTIC, NONDETERMINISTIC, ERROR, TIMEOUT = (
    "deterministic",
    "nondeterministic",
    "error",
    "timeout",
)


@dataclass(frozen=True)
class _Pass:
    """One run of one fresh instance: digest, a hash per record, where it stopped."""

    digest: str
    hashes: list[bytes]
    types: list[str]
    plans_at: list[int]  # plan number at (or last before) each record
    status: str  # "ok", ERROR or TIMEOUT
    message: str = ""


def _one_pass(scenario: Scenario, spec: ImplSpec, timeout_s: float | None) -> _Pass:
    hashes: list[bytes] = []
    types: list[str] = []
    plans_at: list[int] = []
    status, message = "ok", ""
    recording = Recording(iter(()))
    try:
        with time_limit(timeout_s):
            recording = Recording(start(scenario, spec))
            for _index, record, payload in recording:
                hashes.append(hashlib.blake2b(payload, digest_size=16).digest())
                types.append(str(record.get("t", "header")))
                plans_at.append(recording.last_plan)
    except ScenarioTimeout:
        status, message = TIMEOUT, f"exceeded the {timeout_s:g} s scenario time limit"
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - an implementation failing is a finding
        status = ERROR
        message = (
            str(exc)
            if isinstance(exc, SchedulerFault)
            else "".join(traceback.format_exception_only(exc)).strip()
        )
    return _Pass(recording.hexdigest(), hashes, types, plans_at, status, message)


@dataclass(frozen=True)
class SelfCheckResult:
    profile: str
    seed: int
    impl: str
    status: str  # DETERMINISTIC, NONDETERMINISTIC, ERROR or TIMEOUT (both runs failed alike)
    digests: tuple[str, str]
    plans: int
    divergence: int | None = None  # body index where the two runs first differ
    plan: int | None = None
    record_type: str | None = None
    message: str = ""
    seconds: float = 0.0

    @property
    def label(self) -> str:
        return f"{self.profile}:{self.seed}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "seed": self.seed,
            "impl": self.impl,
            "status": self.status,
            "digests": list(self.digests),
            "plans": self.plans,
            "divergence": self.divergence,
            "plan": self.plan,
            "record_type": self.record_type,
            "message": self.message,
        }


def self_check_scenario(
    scenario: Scenario, spec: ImplSpec, timeout_s: float | None = None
) -> SelfCheckResult:
    """Run ``spec`` twice on ``scenario`` (two fresh instances, this process) and compare."""
    started = time.perf_counter()
    first = _one_pass(scenario, spec, timeout_s)
    second = _one_pass(scenario, spec, timeout_s)
    plans = first.plans_at[-1] if first.plans_at else 0
    base: dict[str, Any] = {
        "profile": scenario.profile,
        "seed": scenario.seed,
        "impl": spec.name,
        "digests": (first.digest, second.digest),
        "plans": plans,
    }
    same = first.hashes == second.hashes and first.status == second.status
    if same:
        status = DETERMINISTIC if first.status == "ok" else first.status
        return SelfCheckResult(
            **base,
            status=status,
            message=first.message,
            seconds=time.perf_counter() - started,
        )
    shorter = min(len(first.hashes), len(second.hashes))
    if TIMEOUT in (first.status, second.status) and (
        first.hashes[:shorter] == second.hashes[:shorter]
    ):
        # One run ran out of time (a loaded machine, a slow path) where the other did not:
        # every record both made agrees, so that is a timeout, not nondeterminism.
        notes = [m for m in (first.message, second.message) if m]
        return SelfCheckResult(
            **base,
            status=TIMEOUT,
            message="; ".join([f"first run: {first.status}, second run: {second.status}", *notes]),
            seconds=time.perf_counter() - started,
        )
    index = next(
        (i for i, (a, b) in enumerate(zip(first.hashes, second.hashes, strict=False)) if a != b),
        min(len(first.hashes), len(second.hashes)),
    )
    longer = first if len(first.hashes) > index else second
    record_type = longer.types[index] if index < len(longer.types) else "end"
    plan = longer.plans_at[index] if index < len(longer.plans_at) else None
    notes = [m for m in (first.message, second.message) if m]
    if first.status != second.status:
        notes.insert(0, f"first run: {first.status}, second run: {second.status}")
    return SelfCheckResult(
        **base,
        status=NONDETERMINISTIC,
        divergence=index,
        plan=plan,
        record_type=record_type,
        message="; ".join(notes),
        seconds=time.perf_counter() - started,
    )


@dataclass(frozen=True)
class SelfCheckWork:
    """One implementation on one scenario for :func:`_task` to self-check on an executor's
    worker (:func:`self_check_scenario`'s arguments); ``timeout_s`` limits each of the two
    runs."""

    scenario: Scenario
    spec: ImplSpec
    timeout_s: float | None = None


def _task(work: SelfCheckWork, progress: Any, _notify: Notify) -> SelfCheckResult:
    try:
        return self_check_scenario(work.scenario, work.spec, work.timeout_s)
    except KeyboardInterrupt as exc:
        if progress is None and passes_through(exc):
            raise  # in this process, a real Ctrl-C is the user's
        return _failed(
            work.scenario, work.spec, ERROR, "the implementation raised KeyboardInterrupt"
        )


def _failed(scenario: Scenario, spec: ImplSpec, status: str, message: str) -> SelfCheckResult:
    return SelfCheckResult(
        profile=scenario.profile,
        seed=scenario.seed,
        impl=spec.name,
        status=status,
        digests=("", ""),
        plans=0,
        message=message,
    )


def _from_outcome(outcome: Outcome, work: SelfCheckWork) -> SelfCheckResult:
    if outcome.kind == DONE:
        result: SelfCheckResult = outcome.value
        return result
    scenario, spec, timeout_s = work.scenario, work.spec, work.timeout_s
    status = TIMEOUT if outcome.kind == KILLED else ERROR
    limit = None if timeout_s is None else 2 * timeout_s
    return _failed(scenario, spec, status, f"{spec.name}: {outcome.failure(limit)}")


@dataclass(frozen=True)
class SelfCheckSummary:
    impls: tuple[str, ...]
    results: tuple[SelfCheckResult, ...]
    wall_seconds: float

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def nondeterministic(self) -> tuple[SelfCheckResult, ...]:
        return tuple(r for r in self.results if r.status == NONDETERMINISTIC)

    @property
    def errors(self) -> tuple[SelfCheckResult, ...]:
        """Scenarios on which an implementation failed (alike on both runs, or its worker)."""
        return tuple(r for r in self.results if r.status in (ERROR, TIMEOUT))

    @property
    def deterministic(self) -> bool:
        """No implementation decided differently on a second run."""
        return not self.nondeterministic

    @property
    def ok(self) -> bool:
        """Deterministic, and no implementation failed."""
        return self.deterministic and not self.errors

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "tracediff-selfcheck",
            "version": 1,
            "impls": list(self.impls),
            "ok": self.ok,
            "scenarios": len({(r.profile, r.seed) for r in self.results}),
            "nondeterministic": self.count(NONDETERMINISTIC),
            "errors": self.count(ERROR) + self.count(TIMEOUT),
            "wall_seconds": round(self.wall_seconds, 3),
            "results": [r.to_dict() for r in self.results if r.status != DETERMINISTIC],
        }


def self_check(
    scenarios: Sequence[Scenario],
    specs: Sequence[ImplSpec],
    *,
    jobs: int = 1,
    timeout_s: float | None = None,
    on_result: Callable[[SelfCheckResult], None] | None = None,
    executor: Executor | None = None,
) -> SelfCheckSummary:
    """Self-check every implementation on every scenario (scenario-major order), on
    ``executor`` (else worker processes when ``jobs`` > 1, else this process).
    ``timeout_s`` limits each of the two runs."""
    started = time.perf_counter()
    work = [SelfCheckWork(scenario, spec, timeout_s) for scenario in scenarios for spec in specs]
    # The largest first, so that long scenarios do not start last.
    sizes = [models.of(w.scenario).size(w.scenario) for w in work]
    order = sorted(range(len(work)), key=lambda i: -sizes[i])
    deadline = None if timeout_s is None else 2 * timeout_s + grace(timeout_s)
    chosen = executor
    if chosen is None:
        chosen = open_executor("local" if jobs > 1 else "inline", jobs=min(jobs, len(work) or 1))

    def report(outcome: Outcome) -> None:
        if on_result is not None:
            on_result(_from_outcome(outcome, work[outcome.index]))

    try:
        outcomes = chosen.map(_task, work, deadline_s=deadline, on_outcome=report, order=order)
    finally:
        if executor is None:
            chosen.close()
    results = [_from_outcome(o, w) for o, w in zip(outcomes, work, strict=True)]
    return SelfCheckSummary(
        impls=tuple(s.name for s in specs),
        results=tuple(results),
        wall_seconds=time.perf_counter() - started,
    )
