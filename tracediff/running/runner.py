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

Reliability (docs/errors.md has the user's view):

- An implementation that raises, returns a malformed plan or an unencodable value is a
  finding (``error``) of its scenario, with the plan number and traceback; the run goes on.
- Scenarios run on an executor (:mod:`tracediff.executor`): isolated worker processes
  here, or a Dask cluster. A scenario whose worker dies runs once more on a fresh worker;
  one that kills two is an ``error`` finding. A hang is stopped in the worker by ``SIGALRM``
  at the limit (encoding and comparing count against it), and, if it is stuck in C code
  where that cannot reach, killed by the parent at the limit plus a grace period
  (``timeout`` finding, with the stack faulthandler saw).
- Each implementation gets a private copy of the scenario (one it may even mutate without
  changing what the others run), and the result carries the scenario that was asked for.
- SIGINT and SIGTERM stop the run: workers stop, finished results are kept and the summary
  says which signal stopped it. With a journal (``resume``), each finished result is written
  durably as it arrives and a later run skips it (:mod:`tracediff.running.journal`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import signal
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NotRequired, TypedDict

from tracediff import __version__
from tracediff import model as models
from tracediff.compare.equivalence import Equivalence, FloatTally, within
from tracediff.errors import ModelFailed, SchedulerFault
from tracediff.executor import Executor, Limits, Outcome, ScenarioTimeout, open_executor, time_limit
from tracediff.executor.call import ExitPatched, Interrupted, passes_through
from tracediff.filenames import component, inside, scenario_tag
from tracediff.model import DecisionModel, Scenario
from tracediff.outcomes import Status
from tracediff.project.impls import ImplSpec
from tracediff.running.conventions import Conventions, fault, rejected
from tracediff.running.record import TimedScheduler, drive, instance
from tracediff.trace import LockstepDigests, TraceWriter, decode, encode
from tracediff.trace.checked import MODEL_KEY

IDENTICAL, DIVERGED, ERROR, TIMEOUT = (
    Status.IDENTICAL,
    Status.DIVERGED,
    Status.ERROR,
    Status.TIMEOUT,
)
WORKER_DIED = "worker died twice"  # in the message of a scenario that killed two workers
LEFT_RUNNING = "left processes running"  # in the message of one that leaked processes


@dataclass(frozen=True, init=False)
class RunOptions:
    """How :func:`run_scenarios` runs. ``limits`` holds the time limit, the memory cap and the
    grace; ``timeout_s=``, ``memory_limit_mb=`` and ``grace_s=`` may be given instead of it
    (keywords, read back as properties of the same names)."""

    impls: tuple[ImplSpec, ...]
    jobs: int = 1
    artifacts: str | None = None  # keep diverging traces here
    limits: Limits = Limits()  # per scenario, all implementations together
    resume: str | None = None  # journal directory: keep finished results, skip them next time
    # local (isolated worker processes), dask://HOST:PORT, dask-local:N; None: local, or
    # this process when there is one job and neither a time nor a memory limit
    executor: str | None = None
    equivalence: Equivalence = Equivalence()  # byte identity unless decisions mode is asked

    def __init__(
        self,
        impls: tuple[ImplSpec, ...],
        jobs: int = 1,
        artifacts: str | None = None,
        limits: Limits | None = None,
        resume: str | None = None,
        executor: str | None = None,
        equivalence: Equivalence | None = None,
        *,
        timeout_s: float | None = None,
        memory_limit_mb: int | None = None,
        grace_s: float | None = None,
    ) -> None:
        loose = (timeout_s, memory_limit_mb, grace_s) != (None, None, None)
        if limits is not None and loose:
            raise TypeError("RunOptions: give limits, or timeout_s, memory_limit_mb and grace_s")
        if limits is None:
            limits = Limits(timeout_s, memory_limit_mb, grace_s)
        for name, value in (
            ("impls", impls),
            ("jobs", jobs),
            ("artifacts", artifacts),
            ("limits", limits),
            ("resume", resume),
            ("executor", executor),
            ("equivalence", Equivalence() if equivalence is None else equivalence),
        ):
            object.__setattr__(self, name, value)

    @property
    def timeout_s(self) -> float | None:
        return self.limits.timeout_s

    @property
    def memory_limit_mb(self) -> int | None:
        return self.limits.memory_limit_mb

    @property
    def grace_s(self) -> float | None:
        return self.limits.grace_s

    @property
    def isolated(self) -> bool:
        """Whether scenarios must run in worker processes even with one job."""
        return self.limits.isolated

    @property
    def kill_after_s(self) -> float | None:
        """Wall time after which the parent kills a worker still on one scenario."""
        return self.limits.kill_after_s

    def open_executor(self, tasks: int | None = None) -> Executor:
        """The executor these options name (``tasks``: how many there are to run, which
        bounds the local pool's size)."""
        jobs = self.jobs if tasks is None else max(1, min(self.jobs, tasks))
        spec = self.executor
        if spec is None:
            spec = "local" if self.isolated or jobs > 1 else "inline"
        return open_executor(spec, jobs=jobs, memory_limit_mb=self.memory_limit_mb)

    def outcome_options(self) -> dict[str, object]:
        """The options a stored result depends on (tracediff.running.fingerprint): how records are
        compared and the limits that turn a slow or greedy run into a finding."""
        return {
            "equivalence": (self.equivalence.mode, self.equivalence.ulps),
            "timeout_s": self.timeout_s,
            "memory_limit_mb": self.memory_limit_mb,
        }

    def work(self, scenario: Scenario) -> ScenarioWork:
        """What :func:`run_task` is given to run ``scenario`` under these options."""
        return ScenarioWork(scenario, self.impls, self.limits, self.artifacts, self.equivalence)


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
    harness_seconds: float = 0.0  # checking (where needed), encoding, digesting, comparing
    artifacts: tuple[str, ...] = ()
    resumed: bool = False  # loaded from a --resume journal, not run this time
    # The model's own code was at fault, not an implementation (its driver recorded a record
    # that breaks the trace conventions): the one line that names it; the command exits 2.
    model_fault: str = ""
    # Decision equivalence only: floats that differed within the tolerance, and by how much.
    floats_within: int = 0
    max_ulps: int = 0

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
    interrupt_signal: int | None = None  # signal.SIGINT or SIGTERM when interrupted
    resumed: int = 0  # results taken from the --resume journal
    notes: tuple[str, ...] = ()  # things the user should know (journal repairs, ...)
    equivalence: Equivalence = Equivalence()

    @property
    def scenarios(self) -> int:
        return len(self.results)

    @property
    def plans(self) -> int:
        return sum(r.impls[0].plans for r in self.results if r.impls)

    @property
    def simulation_share(self) -> float | None:
        """What the simulated engine and the driver cost on top of the implementations' own
        plan() time (0.25: a quarter more), or None when no plan() was timed."""
        plan = sum(stats.plan_seconds for r in self.results for stats in r.impls)
        driving = sum(stats.seconds for r in self.results for stats in r.impls)
        return (driving - plan) / plan if plan > 0 else None

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def within_ulps(self) -> list[ScenarioResult]:
        """Identical scenarios that are so only under decision equivalence."""
        return [r for r in self.results if r.status == IDENTICAL and r.floats_within]

    @property
    def max_ulps(self) -> int:
        return max((r.max_ulps for r in self.results), default=0)

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(r.status == IDENTICAL for r in self.results)


class ImplDocument(TypedDict):
    """One implementation's counts in a result of the run summary JSON."""

    name: str
    plans: int
    records: int
    digest: str


class ResultDocument(TypedDict):
    """One scenario's result in the run summary JSON."""

    profile: str
    seed: int
    status: str
    features: str
    divergence: int | None
    plan: int | None
    record_type: str | None
    failed_impl: str | None
    message: str
    artifacts: list[str]
    resumed: bool
    floats_within_ulps: int
    max_ulps: int
    impls: list[ImplDocument]


class EquivalenceDocument(TypedDict):
    """How a run compared records, and what decision equivalence let through."""

    mode: str
    ulps: int
    label: str
    byte_identical: int
    equal_within_ulps: int
    floats_within_ulps: int
    max_ulps: int


class RunDocument(TypedDict):
    """The run summary JSON (``"format": "tracediff-run"``), keys in their written order."""

    format: str
    version: int
    impls: list[str]
    ok: bool
    interrupted: bool
    signal: int | None
    scenarios: int
    not_run: int
    resumed: int
    plans: int
    identical: int
    diverged: int
    errors: int
    timeouts: int
    wall_seconds: float
    simulation_share: float | None
    equivalence: EquivalenceDocument
    notes: list[str]
    results: list[ResultDocument]
    # added by ``tracediff run --json``: the explanations, their groups, the self-check
    explained: NotRequired[bool]
    findings: NotRequired[list[dict[str, Any]]]
    groups: NotRequired[list[dict[str, Any]]]
    self_check: NotRequired[dict[str, Any]]


class _Watched(TimedScheduler):
    """A :class:`TimedScheduler` that also leaves (implementation index, plan number) in shared
    memory, so that the parent can say where a worker was when it had to kill it. Used only
    in worker processes: two integer stores per call (``progress`` is a memoryview)."""

    def __init__(self, inner: Any, model: DecisionModel, index: int, progress: Any) -> None:
        self.index = index
        self.progress = progress
        super().__init__(inner, model)

    def _forward(self, name: str) -> Any:
        method = getattr(self.inner, name)
        progress, index = self.progress, self.index

        def watched(*args: Any) -> Any:
            progress[0] = index
            return method(*args)

        return watched

    def _decide(self, *args: Any) -> Any:
        self.progress[0] = self.index
        self.progress[1] = self.plans + 1  # the decision about to be made
        return TimedScheduler._decide(self, *args)


def run_scenario(
    scenario: Scenario,
    specs: Sequence[ImplSpec],
    *,
    artifacts: str | None = None,
    timeout_s: float | None = None,
    progress: Any = None,
    equivalence: Equivalence | None = None,
) -> ScenarioResult:
    """Drive every implementation of one scenario in lockstep and compare their records.

    Never raises for what an implementation does (raising, ``sys.exit``, malformed or
    unencodable records, a hang past ``timeout_s``): that is the result's ``status``. Only
    KeyboardInterrupt (and the worker's stop signal) propagate, and in a worker not even
    KeyboardInterrupt: a worker ignores SIGINT, so one there was raised by an implementation.
    ``progress``, in a worker, is the shared array :class:`_Watched` writes to. With a
    tolerant ``equivalence``, records whose bytes differ still count as the same when
    :func:`within` accepts them.
    """
    # Read before any implementation holds the scenario: the result names what was asked.
    profile, seed, features = scenario.profile, scenario.seed, scenario.features()
    model = models.of(scenario)
    tolerance = equivalence if equivalence is not None and equivalence.tolerant else None
    tally = FloatTally()
    names = [s.name for s in specs]
    timed: list[TimedScheduler] = []
    drivers: list[Iterator[dict[str, Any]]] = []
    digests = LockstepDigests(len(specs))  # hashed once while the bodies agree
    payloads: list[bytes | None] = []  # this index's records, as encoded so far
    fed = -1  # the last index whose records were digested
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
    model_fault = ""
    current = 0
    index = 0
    conventions = Conventions(model, len(specs))  # what show and diff check, checked here
    try:
        with time_limit(timeout_s):
            for spec in specs:
                current = len(timed)
                # Private copies: one for the implementation, one the driver reads events
                # from (it hands the implementation parts of it that it could change).
                inner = instance(scenario, spec)
                scheduler = (
                    TimedScheduler(inner, model)
                    if progress is None
                    else _Watched(inner, model, current, progress)
                )
                timed.append(scheduler)
                drivers.append(drive(scenario, scheduler, check=False))
            index = 0
            while True:
                payloads = []
                decoded: list[dict[str, Any] | None] = []
                decided: list[bool] = []  # whether each decided since its record before
                for current, driver in enumerate(drivers):
                    before = timed[current].plans
                    start = time.perf_counter()
                    record = next(driver, None)
                    decided.append(timed[current].plans != before)
                    seconds[current] += time.perf_counter() - start
                    decoded.append(record)
                    if record is None:
                        payloads.append(None)
                        continue
                    start_ns = time.perf_counter_ns()
                    try:
                        payload = encode(record)
                    except Exception as exc:  # noqa: BLE001 - an unencodable record is a finding
                        if record.get("t") == "plan":
                            # the schema check names the field that cannot be encoded
                            model.check_record(record, timed[current].plans)
                        raise SchedulerFault(
                            f"record {index}: cannot be encoded: {type(exc).__name__}: {exc}"
                        ) from None
                    payloads.append(payload)  # digested with the others of this index, below
                    # The schema check of a plan record (the driver leaves it to us):
                    # bytes equal to a record already checked need none.
                    if index and record["t"] == "plan" and (current == 0 or payload != payloads[0]):
                        made_up = rejected(
                            model, record, timed[current].plans, decided=decided[-1], driver=driver
                        )
                        if made_up is not None:
                            raise made_up
                        model.check_record(record, timed[current].plans)
                    harness_ns += time.perf_counter_ns() - start_ns
                    records[current] += 1
                start_ns = time.perf_counter_ns()
                broken = (
                    conventions.start(decoded, payloads)
                    if index == 0
                    else conventions.feed(decoded, payloads, index)
                )
                if broken is not None:
                    current, problem = broken
                    raise fault(
                        model,
                        names[current],
                        decoded[current],
                        index,
                        problem,
                        decided=decided[current],
                        driver=drivers[current],
                    )
                digests.feed(payloads, header=index == 0)
                fed = index
                same = all(p == payloads[0] for p in payloads)
                if not same and tolerance is not None and divergence is None:
                    found = _tolerated(decoded, tolerance.ulps, model)
                    if found is not None:
                        same, tally = True, tally + found
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
    except ScenarioTimeout as exc:
        status, failed = TIMEOUT, names[current]
        plan_number = timed[current].plans if current < len(timed) else 0
        frames = traceback.extract_tb(exc.__traceback__)[:-1]  # not the alarm handler's
        where = "".join(traceback.format_list(frames))
        message = (
            f"Traceback (most recent call last):\n{where}"
            f"timeout: {names[current]} exceeded the {timeout_s:g} s scenario time limit "
            f"at plan {plan_number}"
        )
    except ModelFailed as exc:  # not the implementations': no finding of theirs
        status, model_fault = ERROR, str(exc)
        message = model_fault
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001 - a finding
        if progress is None and passes_through(exc):
            raise  # in this process, a real Ctrl-C is the user's
        if len(timed) == len(specs):  # driving (constructing one is the implementation's)
            model_fault = _drivers_fault(exc, [t.inner for t in timed])
        failed = None if model_fault else names[current] if current < len(names) else None
        if model_fault:
            divergence = record_type = plan_number = None  # no finding of theirs
        # The first divergence is the finding (still DIVERGED, at its plan) and a failure
        # after it is context, kept in failed_impl and message; unless the driver refused
        # the differing record itself (a malformed round, found one step later).
        refused = isinstance(exc, SchedulerFault) and index <= (divergence or 0) + 1
        if divergence is None or refused:
            status = ERROR
            plan_number = timed[current].plans if current < len(timed) else 0
        message = "".join(traceback.format_exception(exc)).rstrip()
        if model_fault:
            message = model_fault
        elif isinstance(exc, SchedulerFault | ExitPatched):
            message = str(exc)
        elif isinstance(exc, SystemExit):
            message += f"\nSystemExit: the implementation called sys.exit({exc.code!r})"
        elif isinstance(exc, KeyboardInterrupt):
            message += "\nKeyboardInterrupt: raised by the implementation, not by Ctrl-C"
    if fed < index and payloads:
        # the step a failure cut short: what was recorded of it belongs to the bodies
        digests.feed(payloads + [None] * (len(specs) - len(payloads)), header=index == 0)
    stats = tuple(
        ImplStats(
            name=names[i],
            records=records[i],
            plans=timed[i].plans if i < len(timed) else 0,
            digest=digests.hexdigest(i),
            seconds=seconds[i],
            plan_seconds=(timed[i].plan_ns / 1e9) if i < len(timed) else 0.0,
        )
        for i in range(len(specs))
    )
    result = ScenarioResult(
        profile=profile,
        seed=seed,
        features=features,
        status=status,
        impls=stats,
        divergence=divergence,
        plan=plan_number,
        record_type=record_type,
        failed_impl=failed,
        message=message,
        harness_seconds=harness_ns / 1e9,
        floats_within=tally.floats,
        max_ulps=tally.max_ulps,
        model_fault=model_fault,
    )
    if artifacts and status == DIVERGED:
        result = keep_artifacts(result, scenario, specs, artifacts)
    return result


def _tolerated(
    records: list[dict[str, Any] | None], ulps: int, model: DecisionModel
) -> FloatTally | None:
    """How the records differ from the first one's in floats alone, or None."""
    first = records[0]
    if first is None:
        return None
    total = FloatTally()
    for other in records[1:]:
        if other is None:
            return None
        found = within(model.rows_view(first), model.rows_view(other), ulps)
        if found is None:
            return None
        total = total + found
    return total


def keep_artifacts(
    result: ScenarioResult, scenario: Scenario, specs: Sequence[ImplSpec], directory: str
) -> ScenarioResult:
    """Re-run a diverged scenario into trace files; a failure to write them is noted in the
    result's message, never raised (the divergence is the finding, the files a courtesy)."""
    kept: list[str] = []
    # named for the scenario's content too: a finding never overwrites another's traces
    tag = scenario_tag(scenario)
    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for spec in specs:
            name = component(scenario.profile, scenario.seed, tag, spec.name)
            path = str(inside(directory, f"{name}.trace", what="trace"))
            kept.append(write_trace(scenario, spec, directory, path))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - disk full, or a flaky implementation
        note = f"could not keep the traces in {directory}: {type(exc).__name__}: {exc}"
        message = f"{result.message}\n{note}" if result.message else note
        return dataclasses.replace(result, artifacts=tuple(kept), message=message)
    return dataclasses.replace(result, artifacts=tuple(kept))


def _drivers_fault(exc: BaseException, inners: Sequence[Any]) -> str:
    """The one line naming the model (exit 2) when ``exc`` was raised by its driver's own
    code and not by an implementation (tracediff.blame's rule), else "".

    The frames of a built-in model's implementations live in the model's package too, so
    the rule alone would blame the model for its reference's bug: a traceback that passes
    through an implementation (a frame of a method of one of ``inners``' classes, or with one
    of them as ``self``) is the implementation's. What a driver does with a value an
    implementation returned is the driver's: it must check it before it uses it."""
    if isinstance(exc, SchedulerFault | ExitPatched | ScenarioTimeout):
        return ""
    from tracediff.blame import model_fault

    found = model_fault(exc)
    if found is None:
        return ""
    codes = {
        code
        for inner in inners
        for klass in type(inner).__mro__
        if klass is not object
        for attribute in vars(klass).values()
        if (code := getattr(getattr(attribute, "__func__", attribute), "__code__", None))
    }
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code in codes or any(frame.f_locals.get("self") is i for i in inners):
            return ""
        tb = tb.tb_next
    return str(ModelFailed(found.message()))


def _record_type(record: dict[str, Any] | None) -> str:
    if record is None:
        return "end"
    return str(record.get("t", "header"))


def trace_records(
    scenario: Scenario, spec: ImplSpec, *, guarded: bool = False
) -> Iterator[dict[str, Any]]:
    """The records one implementation produces for a scenario (header first), checked as
    :func:`checked_recording` checks them."""
    return (record for record, _payload in checked_recording(scenario, spec, guarded=guarded))


def checked_recording(
    scenario: Scenario, spec: ImplSpec, *, guarded: bool = False
) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Each record one implementation produces for a scenario (header first) with its
    canonical bytes, checked before it is handed on as the runner checks it: the model's
    ``check_record`` on decisions and the trace conventions every reader of a trace file
    checks (:mod:`tracediff.running.conventions`), on the record as a reader decodes it. A
    record that breaks them raises SchedulerFault (the implementation's) or ModelFailed
    (the model's driver's). ``guarded``: what the implementation raises is
    :class:`~tracediff.executor.call.ImplementationFailed` (told apart from the errors of
    writing the trace)."""
    model = models.of(scenario)
    timed = TimedScheduler(instance(scenario, spec, guarded=guarded), model)
    source = drive(scenario, timed)
    conventions = Conventions(model, 1)
    index = 0
    while True:
        before = timed.plans
        record = next(source, None)
        if record is None:
            return
        decided = timed.plans != before
        payload = encode(record)
        read = decode(payload)  # what a reader of the file will check
        if index and isinstance(record, dict) and record.get("t") == "plan":
            made_up = rejected(model, record, timed.plans, decided=decided, driver=source)
            if made_up is not None:
                raise made_up
            model.check_record(record, timed.plans)
        refused = (
            conventions.start([read], [payload])
            if index == 0
            else conventions.feed([read], [payload], index)
        )
        if refused is not None:
            raise fault(model, spec.name, read, index, refused[1], decided=decided, driver=source)
        yield record, payload
        index += 1


def write_trace(
    scenario: Scenario,
    spec: ImplSpec,
    directory: str,
    path: str | None = None,
    *,
    guarded: bool = False,
) -> str:
    """Record one scenario through one implementation into a trace file; returns its path.
    ``guarded``: as for :func:`trace_records`."""
    if path is None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        # the profile comes from data (a scenario file's "profile"): a plain name, kept inside
        name = component(scenario.profile, scenario.seed, spec.name)
        path = str(inside(directory, f"{name}.trace", what="trace"))
    # checked as every reader checks a trace: no command writes what another refuses
    records = checked_recording(scenario, spec, guarded=guarded)
    header, _payload = next(records)
    started = time.time()
    with TraceWriter(path, header) as writer:
        for _record, payload in records:
            writer.write_record(payload)
        writer.write_provenance(
            {
                MODEL_KEY: models.of(scenario).name,
                "implementation": spec.name,
                "target": spec.target,
                "tracediff": __version__,
                "python": platform.python_version(),
                "host": platform.node(),
                "wall_seconds": round(time.time() - started, 6),
            }
        )
    return path


# -- many scenarios --------------------------------------------------------------------------
@dataclass(frozen=True)
class ScenarioWork:
    """One scenario for :func:`run_task` to run in lockstep on an executor's worker: the
    implementations, the limits it runs under (``memory_limit_mb`` only names the cap in
    the message of a MemoryError; the executor enforces it), where to keep the traces of a
    divergence (none: ``None``) and how records are compared."""

    scenario: Scenario
    specs: tuple[ImplSpec, ...]
    limits: Limits = Limits()
    artifacts: str | None = None
    equivalence: Equivalence = Equivalence()

    @property
    def artifacts_s(self) -> float | None:
        """The deadline for writing a divergence's traces, which re-runs each implementation
        once more (``None``: no limit)."""
        kill_after = self.limits.kill_after_s
        return None if kill_after is None else kill_after * len(self.specs)


def run_task(work: ScenarioWork, progress: Any, notify: Callable[[float], None]) -> ScenarioResult:
    """One scenario on an executor's worker (see :mod:`tracediff.executor`)."""
    scenario, specs, memory_limit_mb = work.scenario, work.specs, work.limits.memory_limit_mb
    result = run_scenario(
        scenario,
        specs,
        timeout_s=work.limits.timeout_s,
        progress=progress,
        equivalence=work.equivalence,
    )
    if (
        result.status == ERROR
        and memory_limit_mb is not None
        and result.message.rstrip().endswith("MemoryError")
    ):
        result = dataclasses.replace(
            result,
            message=f"{result.message}\nMemoryError: {result.failed_impl} exceeded the "
            f"--memory-limit of {memory_limit_mb} MB",
        )
    if work.artifacts and result.status == DIVERGED:
        artifacts_s = work.artifacts_s
        if artifacts_s is not None:
            notify(artifacts_s)  # writing the traces re-runs every implementation: not timed
        result = keep_artifacts(result, scenario, specs, work.artifacts)
    return result


def outcome_result(outcome: Outcome, scenario: Scenario, options: RunOptions) -> ScenarioResult:
    """A worker's outcome as a ScenarioResult; timeouts and deaths become findings."""
    from tracediff.executor import DIED, DONE, KILLED

    if outcome.kind == DONE:
        result: ScenarioResult = outcome.value
        if result.model_fault:
            raise ModelFailed(result.model_fault)  # the model's to fix: exit 2, one line
        if (result.profile, result.seed) != (scenario.profile, scenario.seed):
            result = dataclasses.replace(result, profile=scenario.profile, seed=scenario.seed)
        if outcome.leftovers:
            note = (
                f"an implementation {LEFT_RUNNING} after the scenario: "
                f"{', '.join(outcome.leftovers)}; tracediff killed them (an implementation must "
                "stop the processes it starts)"
            )
            status = ERROR if result.status == IDENTICAL else result.status
            message = f"{result.message}\n{note}" if result.message else note
            result = dataclasses.replace(result, status=status, message=message)
        return result
    names = [spec.name for spec in options.impls]
    impl_index, plan = (outcome.progress + (-1, 0))[:2]
    failed = names[impl_index] if 0 <= impl_index < len(names) else None
    who = failed or "an implementation"
    stack = f"{outcome.stack}\n" if outcome.stack else ""
    if outcome.kind == KILLED:
        status = TIMEOUT
        limit = (
            f"the {options.timeout_s:g} s scenario time limit"
            if options.timeout_s
            else "its time limit"
        )
        message = (
            f"{stack}timeout: {who} exceeded {limit} "
            f"at plan {plan} and did not stop (stuck outside Python code, e.g. in C code or "
            f"a lock); its worker was killed after {outcome.seconds:.1f} s"
        )
    elif outcome.kind == DIED:
        status = ERROR
        died = WORKER_DIED if outcome.attempts > 1 else "worker died"
        message = (
            f"{stack}{died}: {outcome.death()} while {who} ran plan {plan} "
            "(os._exit, a crash in C code, or the system's out-of-memory killer); "
            "the scenario ran on a fresh worker each time"
        )
    elif outcome.tampered:
        status = ERROR
        message = f"{outcome.detail} (while {who} ran plan {plan})"
    else:
        status = ERROR
        message = f"{outcome.detail}\nworker failed: the harness raised while running it"
    return ScenarioResult(
        profile=scenario.profile,
        seed=scenario.seed,
        features=scenario.features(),
        status=status,
        impls=(),
        plan=plan,
        failed_impl=failed,
        message=message,
    )


class StopSignals:
    """SIGINT and SIGTERM raise :class:`Interrupted` while a run is in progress, except
    inside :meth:`deferred` (recording a finished result), where the signal waits for the end
    of the block: a result that finished is never lost between the worker and the journal.
    After the first, further signals are ignored until the run has stopped its workers.
    Installed only in the main thread (elsewhere the caller's handlers stay)."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self._previous: dict[int, Any] = {}
        self._depth = 0
        self._pending: int | None = None
        self._stopping = False

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *_exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        if self._stopping:
            return
        self._pending = signum
        if self._depth == 0:
            self._stopping = True
            raise Interrupted(signum)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0 and self._pending is not None and not self._stopping:
                self._stopping = True
                raise Interrupted(self._pending)


def run_scenarios(
    scenarios: Sequence[Scenario],
    options: RunOptions,
    on_result: Callable[[ScenarioResult], None] | None = None,
    executor: Executor | None = None,
) -> RunSummary:
    """Run scenarios; results in input order.

    On ``executor`` when given (the caller keeps it, e.g. for the explanations), else on
    the one ``options`` name (see :meth:`RunOptions.open_executor`). ``on_result`` is called
    for each result as it is known (resumed ones first). SIGINT/SIGTERM end the run early
    with ``interrupted`` set; with ``options.resume``, finished results are journaled as
    they arrive and skipped next time.
    """
    started = time.perf_counter()
    results: dict[int, ScenarioResult] = {}
    notes: list[str] = []
    interrupted: int | None = None
    journal, digests, todo = _open_journal(scenarios, options, results, notes)
    resumed = len(results)
    try:
        if on_result:
            for i in sorted(results):
                on_result(results[i])
        stop = StopSignals()

        def finish(index: int, result: ScenarioResult) -> None:
            nonlocal journal
            with stop.deferred():
                results[index] = result
                if journal is not None:
                    try:
                        journal.append(scenarios[index], result_to_dict(result), digests[index])
                    except OSError as exc:  # a full disk: go on, without the journal
                        notes.append(
                            f"{journal.path}: cannot append ({exc.strerror}); results after "
                            f"{len(results) - 1} finished scenarios are not journaled"
                        )
                        journal.close()
                        journal = None
            if on_result:
                on_result(result)

        try:
            with stop:
                if todo:
                    _run_on(executor, scenarios, todo, options, finish, stop.deferred)
        except KeyboardInterrupt as exc:
            interrupted = getattr(exc, "signum", signal.SIGINT)
    finally:
        if journal is not None:
            journal.close()
            if journal.stale:
                notes.append(
                    f"{journal.path}: {journal.stale} entries no longer match their scenarios "
                    "(was the profile edited?); those scenarios ran again"
                )
    ordered = tuple(results[i] for i in sorted(results))
    return RunSummary(
        impls=tuple(s.name for s in options.impls),
        results=ordered,
        wall_seconds=time.perf_counter() - started,
        interrupted=interrupted is not None,
        skipped=len(scenarios) - len(ordered),
        interrupt_signal=interrupted,
        resumed=resumed,
        notes=tuple(notes),
        equivalence=options.equivalence,
    )


def _run_on(
    executor: Executor | None,
    scenarios: Sequence[Scenario],
    todo: list[int],
    options: RunOptions,
    finish: Callable[[int, ScenarioResult], None],
    guard: Callable[[], contextlib.AbstractContextManager[None]],
) -> None:
    kill_after = options.kill_after_s
    tasks = ((i, options.work(scenarios[i])) for i in todo)
    chosen = executor if executor is not None else options.open_executor(len(todo))
    try:
        chosen.stream(
            run_task,
            tasks,
            lambda outcome: finish(
                outcome.index, outcome_result(outcome, scenarios[outcome.index], options)
            ),
            deadline_s=kill_after,
            guard=guard,
        )
    finally:
        if executor is None:
            chosen.close()


def _open_journal(
    scenarios: Sequence[Scenario],
    options: RunOptions,
    results: dict[int, ScenarioResult],
    notes: list[str],
) -> tuple[Any, list[str], list[int]]:
    """Open the --resume journal (if any), fill ``results`` with what it already holds;
    returns the journal, each scenario's digest, and the indices still to run."""
    if options.resume is None:
        return None, [], list(range(len(scenarios)))
    from tracediff.running.fingerprint import fingerprint
    from tracediff.running.journal import Journal, identity_for, scenario_digest

    identity = identity_for(
        [s.name for s in options.impls],
        [s.target for s in options.impls],
        scenarios,
        fingerprint(options.impls, options.outcome_options()),
    )
    journal = Journal.open(options.resume, identity)
    notes.extend(journal.notes)
    digests = [scenario_digest(s) for s in scenarios]
    todo: list[int] = []
    try:
        for i, scenario in enumerate(scenarios):
            stored = journal.lookup(scenario, digests[i])
            if stored is None:
                todo.append(i)
            else:
                results[i] = result_from_dict(stored, resumed=True)
    except BaseException:
        journal.close()
        raise
    return journal, digests, todo


def result_to_dict(result: ScenarioResult) -> dict[str, Any]:
    """A ScenarioResult as plain JSON data (the journal's form; see result_from_dict)."""
    data = dataclasses.asdict(result)
    data.pop("resumed")
    return data


def result_from_dict(data: dict[str, Any], *, resumed: bool = False) -> ScenarioResult:
    """The inverse of :func:`result_to_dict`; raises JournalError on a malformed entry."""
    from tracediff.errors import JournalError

    try:
        fields = dict(data)
        fields["impls"] = tuple(ImplStats(**stats) for stats in fields["impls"])
        fields["artifacts"] = tuple(fields.get("artifacts", ()))
        return ScenarioResult(**fields, resumed=resumed)
    except (TypeError, KeyError) as exc:
        raise JournalError(f"a journal entry is not a scenario result: {exc}") from None


def default_jobs() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
