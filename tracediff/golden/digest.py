"""Digesting one implementation alone: its body digest and counts per scenario."""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
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
from tracediff.golden.manifest import OK, SCENARIO_HASH_CHARS, Entry
from tracediff.model import Scenario
from tracediff.project.impls import ImplSpec
from tracediff.running.record import (
    Recording,
    TimedScheduler,
    drive,
    factory,
    instance,
    keep_decision_bytes,
)


@dataclass(frozen=True)
class Digested:
    """One scenario through one implementation: its digest and counts, or its failure."""

    seed: int
    status: str  # "ok", "error" or "timeout"
    digest: str
    plans: int
    records: int
    bytes: int
    seconds: float
    message: str = ""
    scenario: str = ""  # sha256 (16 hex) of the header payload
    plan_seconds: float = 0.0  # inside the implementation's decisions alone

    def entry(self) -> Entry:
        return Entry(self.seed, self.digest, self.plans, self.records, self.bytes, self.scenario)


def digest_scenario(
    scenario: Scenario,
    spec: ImplSpec,
    timeout_s: float | None = None,
    expected: str | None = None,
) -> Digested:
    """Drive one implementation through a scenario and digest its compared body.

    The digest, plan and record counts equal ``run_scenario``'s ``ImplStats`` for it.
    With the ``expected`` digest (a golden manifest's), plan records skip the schema check:
    a body with that digest is the golden trace, whose records were checked when it was
    recorded. Anything else (another digest, a failure) is digested again with every plan
    checked, so a malformed record is reported as such.
    """
    if expected is not None:
        found = _digest(scenario, spec, timeout_s, check=False)
        if found.status == OK and found.digest == expected:
            return found
    return _digest(scenario, spec, timeout_s, check=True)


def _digest(scenario: Scenario, spec: ImplSpec, timeout_s: float | None, check: bool) -> Digested:
    with contextlib.suppress(Exception):
        # import the implementation before the clock starts (once per process): its
        # seconds are the scenario's driving; a failure to load is the scenario's, below
        factory(spec)
    started = time.perf_counter()
    status, message = OK, ""
    recording = Recording(iter(()))
    timed: TimedScheduler | None = None
    try:
        with time_limit(timeout_s):
            timed = TimedScheduler(instance(scenario, spec), models.of(scenario))
            if not check:
                # the first pass, judged by its digest alone: an implementation in another
                # process may hand over the bytes it sent (a mismatch runs it again in full)
                keep_decision_bytes(timed.inner)
            recording = Recording(drive(scenario, timed, check=check))
            for _ in recording:
                pass
    except ScenarioTimeout:
        status = "timeout"
        message = (
            f"{spec.name} exceeded the {timeout_s:g} s scenario time limit at plan "
            f"{recording.plans}"
        )
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - an implementation failing is a finding
        status = "error"
        message = (
            str(exc)
            if isinstance(exc, SchedulerFault)
            else (
                "".join(traceback.format_exception_only(exc)).strip()
                + f" (at plan {recording.plans + 1})"
            )
        )
    return Digested(
        seed=scenario.seed,
        status=status,
        digest=recording.hexdigest(),
        plans=recording.plans,
        records=recording.records,
        bytes=recording.bytes,
        seconds=time.perf_counter() - started,
        message=message,
        scenario=recording.header_sha256[:SCENARIO_HASH_CHARS],
        plan_seconds=timed.plan_ns / 1e9 if timed is not None else 0.0,
    )


@dataclass(frozen=True)
class DigestWork:
    """One scenario for :func:`_digest_task` to digest through one implementation on an
    executor's worker (:func:`digest_scenario`'s arguments): the time limit of the run and
    the digest expected of it, if known (which spares a reproducing run the schema check)."""

    scenario: Scenario
    spec: ImplSpec
    timeout_s: float | None = None
    expected: str | None = None


def _digest_task(work: DigestWork, progress: Any, _notify: Notify) -> Digested:
    try:
        return digest_scenario(work.scenario, work.spec, work.timeout_s, work.expected)
    except KeyboardInterrupt as exc:
        if progress is None and passes_through(exc):
            raise  # in this process, a real Ctrl-C is the user's
        return _failed_digest(work.scenario, "error", f"{work.spec.name} raised KeyboardInterrupt")


def _failed_digest(scenario: Scenario, status: str, message: str) -> Digested:
    return Digested(scenario.seed, status, "", 0, 0, 0, 0.0, message)


def _digested(outcome: Outcome, work: DigestWork) -> Digested:
    """A worker's outcome as a Digested: a killed or dead worker is a failed scenario."""
    if outcome.kind == DONE:
        result: Digested = outcome.value
        return result
    status = "timeout" if outcome.kind == KILLED else "error"
    why = outcome.failure(work.timeout_s)
    return _failed_digest(work.scenario, status, f"{work.spec.name}: {why}")


def deadline(timeout_s: float | None, runs: int = 1) -> float | None:
    """When a worker still on one task of ``runs`` limited runs is killed."""
    return None if timeout_s is None else runs * timeout_s + grace(timeout_s)


def executor_for(executor: Executor | None, jobs: int, tasks: int) -> Executor:
    if executor is not None:
        return executor
    return open_executor("local" if jobs > 1 else "inline", jobs=max(1, min(jobs, tasks)))


def digest_scenarios(
    scenarios: Sequence[Scenario],
    spec: ImplSpec,
    *,
    jobs: int = 1,
    timeout_s: float | None = None,
    on_result: Callable[[Digested], None] | None = None,
    executor: Executor | None = None,
    expected: Mapping[int, str] | None = None,
) -> list[Digested]:
    """Digest every scenario through ``spec`` on ``executor`` (else worker processes when
    ``jobs`` > 1, else this process); results in input order. ``expected`` (digests by
    seed) lets a scenario that reproduces its digest skip the schema check
    (:func:`digest_scenario`)."""
    known = expected or {}
    work = [DigestWork(s, spec, timeout_s, known.get(s.seed)) for s in scenarios]
    order = sorted(range(len(work)), key=lambda i: -models.of(scenarios[i]).size(scenarios[i]))
    chosen = executor_for(executor, jobs, len(work))

    def report(outcome: Outcome) -> None:
        if on_result is not None:
            on_result(_digested(outcome, work[outcome.index]))

    try:
        outcomes = chosen.map(
            _digest_task, work, deadline_s=deadline(timeout_s), on_outcome=report, order=order
        )
    finally:
        if executor is None:
            chosen.close()
    return [_digested(o, w) for o, w in zip(outcomes, work, strict=True)]
