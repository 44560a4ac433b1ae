"""Explain a finding: re-run (or re-read) both sides up to the first divergence and describe it.

The runner only knows *that* two implementations differ and at which record; explaining is
a second, deterministic pass over the same records:

1. Walk the implementations in lockstep (as the runner does), comparing encoded bytes and
   keeping only what the explanation shows: the last K records, the previous plan record
   and the events since, and the last rounds for the timeline. Memory stays bounded by K whatever
   the scenario's length; records are kept as their encoded bytes (immutable, so an
   implementation that reuses its buffers cannot change them) and decoded at the end.
2. At the first differing record, diff the two decoded records field by field
   (:mod:`tracediff.compare.fields`), classify the divergence and name its headline field.
3. Follow each side a few plans further, so the timeline shows how they drift apart.
4. Drive both once more comparing their ``state()`` after every event before the
   differing record (:mod:`tracediff.running.state`): where the cause already showed.

Failures are explained from the :class:`~tracediff.running.runner.ScenarioResult`: an error keeps
the
runner's traceback and is re-run to find the record it happened at, the driver call it
raised in (its signature) and the context; a timeout is not re-run (it would hang again).
A divergence followed by a failure is a divergence: the failure is context (``later``).

Re-runs happen on the run's executor, under the run's isolation, time and memory limits,
never in the tracediff process itself: an implementation that exits, kills its process or
eats memory on the re-run costs a worker, not the report. A re-run that fails for such a
reason says so ("could not explain: ..."); only a re-run that completes without the finding
is called not deterministic.
"""

from __future__ import annotations

import os
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tracediff import model as models
from tracediff.compare.fields import (
    classify,
    record_changes,
    record_label,
    without_knock_on_ulps,
)
from tracediff.compare.model import (
    DEFAULT_CONTEXT,
    DIVERGED,
    ERROR,
    IDENTICAL,
    STRUCTURE,
    TIMEOUT,
    ContextRow,
    DiffReport,
    Divergence,
    FieldChange,
    RoundMark,
    ScenarioOutcome,
)
from tracediff.compare.readable import readable
from tracediff.compare.signature import Condenser
from tracediff.compare.timeline import round_mark
from tracediff.errors import ScenarioError
from tracediff.executor import DONE, Executor, Notify, ScenarioTimeout, open_executor, time_limit
from tracediff.model import DecisionModel, Scenario
from tracediff.process.framing import STRAY_BEFORE_RESET
from tracediff.project import current_model
from tracediff.project.impls import ImplSpec, load
from tracediff.running import record as record_module
from tracediff.running.runner import (
    LEFT_RUNNING,
    WORKER_DIED,
    ScenarioResult,
    checked_recording,
)
from tracediff.running.state import first_state_difference
from tracediff.trace import TraceReader, decode, provenance
from tracediff.trace.checked import checked_records, trace_checker, trace_model

MAX_EVENTS = 32  # the previous plan and the events since, kept (beyond K) for context
MAX_CHANGES = 50  # field changes kept per divergence (the total is counted)
TIMELINE_BEFORE = 24  # plans drawn before the divergence
TIMELINE_AFTER = 12  # plans drawn after it, per implementation

# One record as a source produces it: its canonical bytes and the record itself (read only
# to follow the walk: its type, plan number, round; never kept).
Item = tuple[bytes, Mapping[str, Any]]


@dataclass(frozen=True)
class _Failed:
    """An implementation raised while producing the record at this index."""

    type_name: str
    text: str
    raised_in: str = ""  # the driver method it raised in: "plan()", "complete()", ...


def _step(
    source: Iterator[Item], catch: bool, model: DecisionModel | None = None
) -> Item | _Failed | None:
    try:
        return next(source)
    except StopIteration:
        return None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - an implementation failing is what we explain
        if not catch:
            raise
        text = "".join(traceback.format_exception(exc)).rstrip()
        return _Failed(type(exc).__name__, text, raised_in(exc, model))


def raised_in(exc: BaseException, model: DecisionModel | None = None) -> str:
    """Where an implementation raised, as the driver call it was in: ``plan()``,
    ``complete()``, ``arrive()``; ``engine`` when the driver or engine refused what it
    returned (a malformed plan, a round the engine cannot run); ``driver`` when the driver
    itself stopped it (stopped planning, runaway); ``encode`` for an unencodable record;
    ``end_scenario()`` for what its end-of-scenario hook raised (a process's reply too many).

    Read from the traceback: the frame after the driver's ``drive`` is the call it made
    (the model's :meth:`~tracediff.model.DecisionModel.engine_files` say where its driver
    and engine are). Which plan or record it happened at is left out on purpose: one bug,
    one signature.
    """
    chosen = model or current_model()
    driver_file, *engine_dirs = chosen.engine_files()
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "encode"  # raised where no driver ran (a record that could not be encoded)
    for position, frame in enumerate(frames[:-1]):
        # the timed decision (running/record.py) calls the implementation's own method
        if frame.name == "_decide" and frame.filename == _RECORD_FILE:
            return f"{frames[position + 1].name}()"
        # the end of the scenario (running/record.py): what the implementation sent unasked
        if frame.name == "_ended" and frame.filename == _RECORD_FILE:
            if any(later.name == "end_scenario" for later in frames[position + 1 :]):
                return "end_scenario()"
    at = None
    for position, frame in enumerate(frames):
        if frame.name == "drive" and frame.filename.endswith(driver_file):
            at = position
    if at is None:
        # a driver whose drive lives elsewhere (an engine module of its own): the outermost
        # call of a driver method outside tracediff and the driver's file is the call
        methods = set(chosen.methods)
        for frame in frames:
            if (
                frame.name in methods
                and not frame.filename.endswith(driver_file)
                and not _in_tracediff(frame.filename)
            ):
                return f"{frame.name}()"
        if any(frame.name == "encode" and _in_tracediff(frame.filename) for frame in frames):
            return "encode"
        return "driver"
    if at + 1 >= len(frames):
        return "driver"
    called = frames[at + 1]
    if any(part in called.filename for part in engine_dirs):
        return "engine"
    return f"{called.name}()"


_RECORD_FILE = record_module.__file__
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _in_tracediff(filename: str) -> bool:
    """Whether a frame is tracediff's own core (a built-in model's is not)."""
    path = os.path.abspath(filename)
    return path.startswith(_PACKAGE_DIR + os.sep) and not path.startswith(
        os.path.join(_PACKAGE_DIR, "models") + os.sep
    )


@dataclass
class _Walk:
    """Where a lockstep walk stopped and what it kept on the way."""

    index: int | None = None  # the record index it stopped at; None: all sources ended equal
    items: list[Item | _Failed | None] = field(default_factory=list)
    pair: tuple[int, int] = (0, 1)  # the sources explained: baseline, differing (or failed)
    failed: bool = False
    context: list[tuple[int, tuple[bytes | None, ...]]] = field(default_factory=list)
    columns: dict[str, list[str]] = field(default_factory=dict)
    last_plan: int | None = None
    timeline: list[RoundMark] = field(default_factory=list)
    first_difference: int | None = None  # when walking on past differences (error walks)


def _walk(
    sources: Sequence[Iterator[Item]],
    *,
    context: int,
    model: DecisionModel | None = None,
    stop_on_difference: bool = True,
    catch: bool = True,
    limit: int | None = None,
    stop_from: int = 0,
) -> _Walk:
    recent: deque[tuple[int, tuple[bytes | None, ...]]] = deque(maxlen=max(context, 0))
    events: deque[tuple[int, tuple[bytes | None, ...]]] = deque(maxlen=MAX_EVENTS)
    timeline: deque[RoundMark] = deque(maxlen=TIMELINE_BEFORE)
    walk = _Walk()
    index = 0
    while limit is None or index <= limit:
        items = [_step(source, catch, model) for source in sources]
        failed = next((i for i, item in enumerate(items) if isinstance(item, _Failed)), None)
        payloads = tuple(item[0] if isinstance(item, tuple) else None for item in items)
        same = all(p == payloads[0] for p in payloads)
        if failed is not None or (not same and stop_on_difference and index >= stop_from):
            differing = (
                failed
                if failed is not None
                else next(i for i, p in enumerate(payloads) if p != payloads[0])
            )
            walk.index, walk.items, walk.failed = index, items, failed is not None
            walk.pair = (0 if differing != 0 else 1, differing)
            break
        if all(p is None for p in payloads):
            break
        if not same and walk.first_difference is None:
            walk.first_difference = index
        record = next(item[1] for item in items if isinstance(item, tuple))
        if index == 0:
            walk.columns = _columns(record)
        elif record.get("t") == "plan":
            plan = record.get("plan")
            walk.last_plan = plan if isinstance(plan, int) else walk.last_plan
            events.clear()  # the context keeps the previous plan and the events since
            mark = round_mark(record, walk.columns)
            if mark is not None:
                timeline.append(mark)
        events.append((index, payloads))
        recent.append((index, payloads))
        index += 1
    kept = dict(events)
    kept.update(recent)
    walk.context = sorted(kept.items())
    walk.timeline = list(timeline)
    return walk


def _columns(header: Mapping[str, Any]) -> dict[str, list[str]]:
    """The header's column names (rows are lists); an unknown schema simply has none."""
    columns = header.get("columns")
    if not isinstance(columns, dict):
        return {}
    return {
        str(name): [str(c) for c in cols]
        for name, cols in columns.items()
        if isinstance(cols, list) and all(isinstance(c, str) for c in cols)
    }


def _follow(
    source: Iterator[Item], first: Item | _Failed | None, columns: Mapping[str, Any]
) -> list[RoundMark]:
    """Rounds from ``first`` on, up to TIMELINE_AFTER plans; a failure just ends them."""
    marks: list[RoundMark] = []
    item = first
    while isinstance(item, tuple) and len(marks) < TIMELINE_AFTER:
        mark = round_mark(item[1], columns)
        if mark is not None:
            marks.append(mark)
        item = _step(source, catch=True)
    return marks


@dataclass(frozen=True)
class _Base:
    """What a divergence says about its scenario and implementations."""

    profile: str
    seed: int
    features: str
    requests: int
    plans: int
    names: tuple[str, ...]
    model: DecisionModel  # the scenario's: its records' shape and choice fields


def _decoded(payload: bytes | None, model: DecisionModel) -> dict[str, Any] | None:
    if payload is None:
        return None
    value = readable(decode(payload), model)
    return value if isinstance(value, dict) else {"value": value}


def _divergence(
    walk: _Walk,
    base: _Base,
    sources: Sequence[Iterator[Item]],
    *,
    message: str = "",
    notes: tuple[str, ...] = (),
    fallback_plan: int | None = None,
) -> Divergence:
    """Build the explanation from a walk that stopped at a difference or a failure."""
    assert walk.index is not None
    i_a, i_b = walk.pair
    index = walk.index
    item_a, item_b = walk.items[i_a], walk.items[i_b]
    payload_a = item_a[0] if isinstance(item_a, tuple) else None
    payload_b = item_b[0] if isinstance(item_b, tuple) else None
    model = base.model
    a, b = _decoded(payload_a, model), _decoded(payload_b, model)
    rows = [
        ContextRow(i, _decoded(p[i_a], model), _decoded(p[i_b], model)) for i, p in walk.context
    ]
    rows.append(ContextRow(index, a, b))
    timeline_a = walk.timeline + _follow(sources[i_a], item_a, walk.columns)
    timeline_b = walk.timeline + _follow(sources[i_b], item_b, walk.columns)
    present = a if a is not None else b
    label = record_label(present, index)
    plan = _plan_of(present, walk.last_plan)
    clock = present.get("now") if present is not None else None
    record_type = "header" if index == 0 else (str(present.get("t")) if present else "end")
    common = Divergence(
        kind=STRUCTURE,
        profile=base.profile,
        seed=base.seed,
        features=base.features,
        requests=base.requests,
        plans=base.plans,
        impls=(base.names[i_a], base.names[i_b]),
        index=index,
        plan=plan,
        clock=clock if isinstance(clock, int) else None,
        record_type=record_type,
        path=(label,),
        context=tuple(rows),
        timeline_a=tuple(timeline_a),
        timeline_b=tuple(timeline_b),
    )
    if walk.failed:
        failure = item_b if isinstance(item_b, _Failed) else None
        type_name = failure.type_name if failure else "error"
        if a is None:  # the baseline has no record there either: name the last plan
            label = f"after plan {walk.last_plan}" if walk.last_plan is not None else label
            plan = walk.last_plan if walk.last_plan is not None else fallback_plan
        return replace(
            common,
            kind=ERROR,
            plan=plan,
            path=(label, f"raised {type_name}"),
            failed_impl=base.names[i_b],
            message=message or (failure.text if failure else ""),
            notes=notes,
            raised_in=(failure.raised_in if failure else "") or None,
        )
    changes, kind, path, extra = _compare(
        a, b, index, label, walk.columns, base.model.choice_fields
    )
    return replace(
        common,
        kind=kind,
        path=path,
        changes=tuple(changes[:MAX_CHANGES]),
        total_changes=len(changes),
        message=message,
        notes=notes + extra,
    )


def _plan_of(record: Mapping[str, Any] | None, last_plan: int | None) -> int | None:
    if record is not None and record.get("t") == "plan" and isinstance(record.get("plan"), int):
        plan: int = record["plan"]
        return plan
    return last_plan


def _compare(
    a: dict[str, Any] | None,
    b: dict[str, Any] | None,
    index: int,
    label: str,
    columns: Mapping[str, Sequence[str]],
    choices: Mapping[str, frozenset[str]],
) -> tuple[list[FieldChange], str, tuple[str, ...], tuple[str, ...]]:
    """Changes, kind, headline path and notes for the two records at the divergence."""
    if a is None or b is None:
        side = "B" if b is None else "A"
        present = a if a is not None else b
        kind_name = str(present.get("t", "header")) if present else "record"
        change = FieldChange(("t",), STRUCTURE, kind_name if a else None, kind_name if b else None)
        return (
            [change],
            STRUCTURE,
            (label, f"absent in {side}"),
            (f"implementation {side}'s trace ends before record {index}",),
        )
    if index > 0 and a.get("t") != b.get("t"):
        change = FieldChange(("t",), STRUCTURE, a.get("t"), b.get("t"))
        return [change], STRUCTURE, (f"{a.get('t')} vs {b.get('t')}",), ()
    choice = None if index == 0 else choices.get(str(a.get("t")))
    changes = record_changes(a, b, {} if index == 0 else columns, choice)
    if not changes:
        reason = (
            "key order"
            if list(a) != list(b)
            else "encoding (the values are equal but their bytes differ)"
        )
        return (
            [],
            STRUCTURE,
            (label, reason),
            (f"deepdiff finds no differing value; the records differ in {reason}",),
        )
    kind = STRUCTURE if index == 0 else classify(changes)
    headline = next(c for c in changes if c.kind == kind) if index > 0 else changes[0]
    return without_knock_on_ulps(changes, kind), kind, (label, *headline.path), ()


# -- entry points -------------------------------------------------------------------------


def _driver_source(scenario: Scenario, spec: ImplSpec) -> Iterator[Item]:
    # checked as the runner checked it (check_record, the trace conventions): a record it
    # refused is refused again here, never "not reproduced"
    for record, payload in checked_recording(scenario, spec):
        yield payload, record


def _base_of(scenario: Scenario, result: ScenarioResult, specs: Sequence[ImplSpec]) -> _Base:
    return _Base(
        profile=scenario.profile,
        seed=scenario.seed,
        features=scenario.features(),
        requests=models.of(scenario).size(scenario),
        plans=result.impls[0].plans if result.impls else 0,
        names=tuple(spec.name for spec in specs),
        model=models.of(scenario),
    )


def explain(
    scenario: Scenario,
    specs: Sequence[ImplSpec],
    result: ScenarioResult,
    context: int = DEFAULT_CONTEXT,
    *,
    state: bool = True,
) -> Divergence:
    """Explain a finding of :func:`~tracediff.running.runner.run_scenario` by re-running it.

    The implementations are driven again (deterministically) only as far as the divergence
    or failure, plus a few plans for the timeline; with ``state``, once more to compare
    their states after every event (:mod:`tracediff.running.state`). Raises ValueError for
    an identical result.
    """
    if result.status == IDENTICAL:
        raise ValueError(f"{result.label}: identical, nothing to explain")
    if len(specs) < 2:
        raise ValueError("explain needs at least two implementations")
    base = _base_of(scenario, result, specs)
    if result.status == TIMEOUT:
        return _timeout(base, result)
    if result.status == ERROR and WORKER_DIED in result.message:
        why = "not re-run: the implementation killed its worker twice, and would again"
        return _not_reproduced(base, result, why)
    if result.status == ERROR and STRAY_BEFORE_RESET in result.message:
        why = (
            "not re-run: the served process's reply too many came from the scenario it served "
            "before, so this scenario run alone would pass; run that one (and the two in a row) "
            "to see it"
        )
        return _not_reproduced(base, result, why)
    if result.status == ERROR and LEFT_RUNNING in result.message and result.impls:
        if all(s.digest == result.impls[0].digest for s in result.impls):
            why = "not re-run: the decisions were identical; the processes left running are it"
            return _not_reproduced(base, result, why)
    sources = [_driver_source(scenario, spec) for spec in specs]
    if result.status == ERROR:
        # The runner decided it is an error (it raised before any record differed, or the
        # engine refused the differing record itself); a difference on the way is a note.
        walk = _walk(sources, context=context, stop_on_difference=False, model=base.model)
        notes: tuple[str, ...] = ()
        if walk.first_difference is not None:
            notes = (f"the records already differed at record {walk.first_difference}",)
        if walk.index is None or not walk.failed:
            return _not_reproduced(base, result)
        found = _divergence(
            walk, base, sources, message=result.message, notes=notes, fallback_plan=result.plan
        )
        return _with_state(found, scenario, specs) if state else found
    # Under decision equivalence the runner reports the first difference it did not tolerate;
    # earlier records may differ in floats within --ulps, and are walked past.
    walk = _walk(
        sources,
        context=context,
        limit=result.divergence,
        stop_from=result.divergence or 0,
        model=base.model,
    )
    if walk.index is None:
        return _not_reproduced(base, result)
    if walk.failed:
        failure = walk.items[walk.pair[1]]
        text = failure.text.splitlines()[-1] if isinstance(failure, _Failed) else "failed"
        name = base.names[walk.pair[1]]
        return _not_reproduced(base, result, f"could not explain: on a second run {name}: {text}")
    tolerated: tuple[str, ...] = ()
    if walk.first_difference is not None:
        tolerated = (
            f"records from {walk.first_difference} on already differed, in floats within the "
            "--ulps tolerance of decision equivalence; this is the first difference beyond it",
        )
    found = _divergence(walk, base, sources, notes=tolerated)
    if result.failed_impl and result.message:
        # The first divergence is the finding; a failure after it is context.
        last = [line for line in result.message.splitlines() if line.strip()]
        found = replace(
            found,
            later=f"{result.failed_impl} then failed: {last[-1].strip() if last else 'error'}",
            message=result.message,
        )
    return _with_state(found, scenario, specs) if state else found


def _with_state(
    divergence: Divergence, scenario: Scenario, specs: Sequence[ImplSpec]
) -> Divergence:
    """The divergence with its state diff: both implementations driven again, their states
    compared after every event up to the divergence (see :mod:`tracediff.running.state`)."""
    if divergence.index is None:
        return divergence
    try:
        by_name = {spec.name: spec for spec in specs}
        pair = [load(by_name[name]) for name in divergence.impls]
        found = first_state_difference(
            scenario, pair, until=divergence.index, divergence_plan=divergence.plan
        )
    except Exception as exc:  # noqa: BLE001 - the finding stands without its state diff
        found = f"could not compare states: {type(exc).__name__}: {exc}"
    if isinstance(found, str):
        return replace(divergence, state_note=found)
    return replace(divergence, state=found)


def unexplained(
    scenario: Scenario, result: ScenarioResult, specs: Sequence[ImplSpec], why: str
) -> Divergence:
    """A finding whose explanation could not be made (``why`` says so), without a re-run."""
    return _not_reproduced(_base_of(scenario, result, specs), result, why)


def _timeout(base: _Base, result: ScenarioResult) -> Divergence:
    failed = result.failed_impl or base.names[-1]
    other = next((n for n in base.names if n != failed), base.names[0])
    return Divergence(
        kind=TIMEOUT,
        profile=base.profile,
        seed=base.seed,
        features=base.features,
        requests=base.requests,
        plans=base.plans,
        impls=(other, failed),
        index=result.divergence,
        plan=result.plan,
        clock=None,
        record_type=result.record_type,
        path=(f"after plan {result.plan}", "timed out"),
        failed_impl=failed,
        message=result.message,
        notes=("not re-run: the implementation would hang again, so no records are shown",),
    )


def _not_reproduced(base: _Base, result: ScenarioResult, why: str = "") -> Divergence:
    """A finding that the second run does not show (or that could not be explained)."""
    kind = result.status if result.status in (ERROR, TIMEOUT) else STRUCTURE
    note = why or (
        "the finding did not reproduce when the scenario was run again: an implementation "
        "is not deterministic"
    )
    return Divergence(
        kind=kind,
        profile=base.profile,
        seed=base.seed,
        features=base.features,
        requests=base.requests,
        plans=base.plans,
        impls=(base.names[0], result.failed_impl or base.names[1]),
        index=result.divergence,
        plan=result.plan,
        clock=None,
        record_type=result.record_type,
        path=(
            f"record {result.divergence}" if result.divergence is not None else "scenario",
            "unexplained" if why else "not reproduced",
        ),
        failed_impl=result.failed_impl,
        message=result.message,
        notes=(note,),
    )


def explain_many(
    work: Sequence[tuple[Scenario, ScenarioResult]],
    specs: Sequence[ImplSpec],
    *,
    context: int = DEFAULT_CONTEXT,
    jobs: int = 1,
    condense: bool = False,
    executor: Executor | None = None,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
    on_explained: Callable[[], None] | None = None,
) -> list[Divergence]:
    """:func:`explain` each finding on ``executor`` (else on worker processes when ``jobs``
    > 1, else here); in input order. ``timeout_s`` limits each re-run (as the run's limit
    did), ``deadline_s`` is when its worker is killed; ``on_explained`` is called as each
    one finishes (progress).

    A finding that cannot be explained (a re-run that fails, times out or kills its worker,
    a bug in tracediff) still gets a divergence, with a note saying why. With ``condense``,
    only the smallest scenario of each signature keeps its context and timeline (see
    :class:`~tracediff.compare.signature.Condenser`), which bounds memory on large runs.
    """
    kept = Condenser()
    found: list[Divergence] = []
    add = kept.add if condense else found.append
    if not work:
        return []
    chosen = executor
    if chosen is None:
        chosen = open_executor("local" if jobs > 1 else "inline", jobs=min(jobs, len(work)))
    payloads = [
        ExplainWork(scenario, tuple(specs), result, context, timeout_s) for scenario, result in work
    ]
    try:
        outcomes = chosen.map(
            explain_task,
            payloads,
            deadline_s=deadline_s,
            on_outcome=None if on_explained is None else (lambda _outcome: on_explained()),
        )
    finally:
        if executor is None:
            chosen.close()
    for (scenario, result), outcome in zip(work, outcomes, strict=True):
        if outcome.kind == DONE:
            add(outcome.value)
        else:
            base = _base_of(scenario, result, specs)
            why = f"could not explain: on the re-run, {outcome.failure(timeout_s)}"
            add(_not_reproduced(base, result, why))
    return kept.items if condense else found


@dataclass(frozen=True)
class ExplainWork:
    """A finding for :func:`explain_task` to explain on an executor's worker: its scenario,
    the implementations, the runner's result, how many records of context to keep and the
    time limit of the re-run (``None``: none)."""

    scenario: Scenario
    specs: tuple[ImplSpec, ...]
    result: ScenarioResult
    context: int = DEFAULT_CONTEXT
    timeout_s: float | None = None


def explain_task(work: ExplainWork, progress: Any, _notify: Notify) -> Divergence:
    """One explanation on an executor's worker, under the run's time limit."""
    scenario, specs, result = work.scenario, work.specs, work.result
    context, timeout_s = work.context, work.timeout_s
    try:
        with time_limit(timeout_s):
            return _explain_or_say_why(scenario, specs, result, context)
    except ScenarioTimeout:
        why = f"could not explain: the re-run exceeded the {timeout_s:g} s time limit"
    except KeyboardInterrupt:
        if progress is None:
            raise  # in this process, Ctrl-C is the user's
        why = "could not explain: an implementation raised KeyboardInterrupt on the re-run"
    return _not_reproduced(_base_of(scenario, result, specs), result, why)


def _explain_or_say_why(
    scenario: Scenario, specs: Sequence[ImplSpec], result: ScenarioResult, context: int
) -> Divergence:
    try:
        return explain(scenario, specs, result, context)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the finding stands; its explanation failed
        base = _base_of(scenario, result, specs)
        return _not_reproduced(base, result, f"could not explain: {_describe(exc)}")


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def explain_results(
    scenarios: Sequence[Scenario],
    results: Sequence[ScenarioResult],
    specs: Sequence[ImplSpec],
    *,
    suite: str,
    context: int = DEFAULT_CONTEXT,
    jobs: int = 1,
    executor: Executor | None = None,
    timeout_s: float | None = None,
    deadline_s: float | None = None,
    on_explained: Callable[[], None] | None = None,
) -> list[ScenarioOutcome]:
    """A run's results as report outcomes, each finding explained (condensed, see
    :func:`explain_many`, which takes the other arguments). ``results`` are the runner's,
    in input order, possibly fewer than ``scenarios`` when the run was interrupted."""
    if len(results) == len(scenarios):
        pairs = list(zip(scenarios, results, strict=True))
    else:
        by_label = {(s.profile, s.seed): s for s in scenarios}
        pairs = [(by_label[(r.profile, r.seed)], r) for r in results]
    found = explain_many(
        [(s, r) for s, r in pairs if r.status != IDENTICAL],
        specs,
        context=context,
        jobs=jobs,
        condense=True,
        executor=executor,
        timeout_s=timeout_s,
        deadline_s=deadline_s,
        on_explained=on_explained,
    )
    divergences = iter(found)
    return [
        outcome(r, None if r.status == IDENTICAL else next(divergences), suite) for r in results
    ]


def outcome(result: ScenarioResult, divergence: Divergence | None, suite: str) -> ScenarioOutcome:
    """A runner result as a report's scenario outcome."""
    return ScenarioOutcome(
        suite=suite,
        profile=result.profile,
        seed=result.seed,
        features=result.features,
        status=result.status,
        plans=result.impls[0].plans if result.impls else 0,
        seconds=sum(s.seconds for s in result.impls) + result.harness_seconds,
        divergence=divergence,
    )


# -- trace files --------------------------------------------------------------------------


def _file_source(reader: TraceReader) -> Iterator[Item]:
    """The header and every record, each checked against the trace schema as it is read."""
    yield reader.header_payload, reader.header
    for checked in checked_records(reader):
        yield checked.payload, checked.record


def _file_name(reader: TraceReader, other: TraceReader) -> str:
    """The implementation that wrote a trace (from provenance), else the file's name."""
    mine = (reader.provenance or {}).get("implementation")
    theirs = (other.provenance or {}).get("implementation")
    if isinstance(mine, str) and mine and mine != theirs:
        return provenance.text(mine, 80)  # a column title: the file's writer chose it
    return Path(reader.name).name


def explain_traces(path_a: str, path_b: str, context: int = DEFAULT_CONTEXT) -> DiffReport:
    """Compare two trace files and explain their first difference, as a one-scenario report.

    Raises TraceFormatError for a file that cannot be read (up to the divergence).
    """
    reader_a, reader_b = TraceReader(path_a), TraceReader(path_b)
    for reader in (reader_a, reader_b):
        trace_checker(reader)  # a file that is no trace fails first
    names = (_file_name(reader_a, reader_b), _file_name(reader_b, reader_a))
    if names[0] == names[1]:
        names = (f"A: {names[0]}", f"B: {names[1]}")
    scenario = _scenario_of(reader_a)
    plans = sum(1 for _payload, record in _file_source(reader_a) if record.get("t") == "plan")
    base = _Base(
        profile=scenario.profile if scenario else "trace",
        seed=scenario.seed if scenario else 0,
        features=scenario.features() if scenario else "unknown scenario (header has none)",
        requests=models.of(scenario).size(scenario) if scenario else 0,
        plans=plans,
        names=names,
        model=trace_model(reader_a),
    )
    sources = [_file_source(reader_a), _file_source(reader_b)]
    walk = _walk(sources, context=context, catch=False, model=base.model)
    divergence = None if walk.index is None else _divergence(walk, base, sources)
    if divergence is not None and divergence.plan is not None:
        divergence = replace(
            divergence,
            state_note=(
                "not compared: two trace files hold no implementations to drive; "
                f"tracediff replay {path_a} --impl A --impl B --until {divergence.plan} --state "
                "shows both states there"
            ),
        )
    return DiffReport(
        title=f"tracediff diff {path_a} {path_b}",
        impls=names,
        outcomes=(
            ScenarioOutcome(
                suite="diff",
                profile=base.profile,
                seed=base.seed,
                features=base.features,
                status=IDENTICAL if divergence is None else DIVERGED,
                plans=plans,
                divergence=divergence,
            ),
        ),
    )


def _scenario_of(reader: TraceReader) -> Scenario | None:
    try:
        found: Scenario = trace_checker(reader).scenario
        return found
    except (ScenarioError, TypeError, AttributeError):
        return None
