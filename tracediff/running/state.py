"""State diff: the first event after which two implementations' states already disagreed.

A differing record is often a symptom, plans after its cause: a table entry updated
differently, a pending advance that forgot a round, a slot assigned to another request.
Every implementation that has ``state()`` (docs/implementations.md: a map of named fields)
can be asked what it holds; this module drives the implementations again, side by side, and
compares their states after every event (an arrival, a completion, a plan), stopping at the
first event after which they differ and naming the first field that does.

:func:`first_state_difference` is a pure function of the scenario and the implementations'
factories, so it can run wherever scenarios run (a worker process, another executor). It
never raises for what an implementation does: a method that raises or a missing ``state()``
ends the comparison with a reason instead.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff import model as models
from tracediff.compare.model import StateDiff
from tracediff.compare.readable import readable
from tracediff.model import DecisionModel, Scenario
from tracediff.running.record import drive
from tracediff.trace import encode

Factory = Callable[[Scenario], Any]
# List items that are maps are named by one of these keys when they carry it, so that
# ``requests[id=3]`` names request 3 whatever its position in the list.
NAMING_KEYS = ("id", "plan")


@dataclass(frozen=True)
class _Snapshot:
    event: str
    index: int  # the record index of the event
    plan: int | None
    state: Any


class _Observed:
    """Forwards the model's driver interface and keeps the inner ``state()`` after every
    call, named by the model (:meth:`~tracediff.model.DecisionModel.state_event`)."""

    def __init__(self, inner: Any, model: DecisionModel) -> None:
        self.inner = inner
        self.model = model
        self.snapshots: list[_Snapshot] = []
        self.index = 0  # the record index the driver last yielded
        self.plan_number: int | None = None
        for name in model.methods:
            setattr(self, name, self._observed(name))

    def _observed(self, name: str) -> Callable[..., Any]:
        method = getattr(self.inner, name)
        decides = name == self.model.decide

        def observed(*args: Any) -> Any:
            result = method(*args)
            if decides:
                number = result.get("plan") if isinstance(result, dict) else None
                self.plan_number = number if isinstance(number, int) else self.plan_number
            event, index = self.model.state_event(name, args, result, self.index)
            self.snapshots.append(
                _Snapshot(event, index, self.plan_number, copy.deepcopy(self.inner.state()))
            )
            return result

        return observed


def first_state_difference(
    scenario: Scenario,
    factories: Sequence[Factory],
    *,
    until: int | None = None,
    divergence_plan: int | None = None,
) -> StateDiff | str:
    """Drive the implementations side by side and compare their ``state()`` after every
    event before record ``until`` (the first differing record; None: the whole scenario).

    Returns the first difference, or a sentence saying why there is none to show.
    ``divergence_plan`` (the plan of the first differing record) sets ``plans_before``.
    """
    if len(factories) < 2:
        return "state needs two implementations"
    model = models.of(scenario)
    observed: list[_Observed] = []
    drivers: list[Iterator[dict[str, Any]]] = []
    try:
        for factory in factories:
            # private copies, as the runner makes: an implementation cannot change what the
            # driver or the other implementation reads
            inner = factory(model.private_copy(scenario))
            if not callable(getattr(inner, "state", None)):
                return f"{type(inner).__name__} has no state() method"
            watcher = _Observed(inner, model)
            observed.append(watcher)
            drivers.append(drive(scenario, watcher))
    except Exception as exc:  # noqa: BLE001 - an implementation failing ends the comparison
        return f"could not start the implementations: {type(exc).__name__}: {exc}"
    compared = 0
    index = 0
    # States are compared after the events *before* record ``until``: a state that differs
    # only after the differing record's own call is its consequence, not its cause. The
    # step to record ``until`` still runs: it applies the completion yielded just before.
    while until is None or index <= until:
        ended = False
        for watcher, driver in zip(observed, drivers, strict=True):
            watcher.index = index
            try:
                if next(driver, None) is None:
                    ended = True
            except (Exception, SystemExit):  # noqa: BLE001 - the state diff stops where one fails
                ended = True
        found, compared = _compare_new(observed, compared, until)
        if found is not None:
            if divergence_plan is not None and found.plan is not None:
                found = _with_plans_before(found, divergence_plan)
            return found
        if ended:
            break
        index += 1
    return "the states agree after every event before the first differing record"


def _with_plans_before(found: StateDiff, divergence_plan: int) -> StateDiff:
    assert found.plan is not None
    return StateDiff(
        event=found.event,
        index=found.index,
        plan=found.plan,
        field=found.field,
        a=found.a,
        b=found.b,
        plans_before=max(divergence_plan - found.plan, 0),
    )


def _compare_new(
    observed: Sequence[_Observed], compared: int, until: int | None
) -> tuple[StateDiff | None, int]:
    """Compare the snapshots every implementation has taken since ``compared``."""
    common = min(len(w.snapshots) for w in observed)
    first = observed[0]
    for position in range(compared, common):
        base = first.snapshots[position]
        if until is not None and base.index >= until:
            return None, common
        for other in observed[1:]:
            theirs = other.snapshots[position]
            if theirs.event != base.event:
                return None, common  # the event sequences part: the records say it
            path = state_difference(base.state, theirs.state)
            if path is not None:
                name, a, b = path
                # a state may hold typed columns (bytes): shown as rows, never as bytes
                found = StateDiff(base.event, base.index, base.plan, name, readable(a), readable(b))
                return found, common
    return None, common


def state_difference(a: Any, b: Any) -> tuple[str, Any, Any] | None:
    """The first field at which two states differ, as (path, A's value, B's value).

    Maps are walked in A's key order (then keys only B has), lists item by item, list items
    that are maps named by their ``id`` (or ``plan``) when both carry the same one; scalars
    compare by their canonical bytes, so ``0`` and ``0.0`` differ as in a trace.
    """
    return _walk(a, b, "")


def _walk(a: Any, b: Any, path: str) -> tuple[str, Any, Any] | None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in [*a, *(k for k in b if k not in a)]:
            here = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                return here, a.get(key), b.get(key)
            inner = _walk(a[key], b[key], here)
            if inner is not None:
                return inner
        return None
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        for position, (left, right) in enumerate(zip(a, b, strict=False)):
            inner = _walk(left, right, f"{path}{_item_name(left, right, position)}")
            if inner is not None:
                return inner
        if len(a) != len(b):
            return f"{path}.length" if path else "length", len(a), len(b)
        return None
    return None if _same(a, b) else (path, a, b)


def flatten_state(state: Any, path: str = "") -> list[tuple[str, Any]]:
    """A state as (path, value) rows in the state diff's notation; lists of scalars (a
    curve, counters) stay one row, lists of maps and rows are split."""
    if isinstance(state, Mapping):
        rows: list[tuple[str, Any]] = []
        for key, value in state.items():
            rows += flatten_state(value, f"{path}.{key}" if path else str(key))
        return rows
    if isinstance(state, list | tuple) and any(
        isinstance(v, Mapping | list | tuple) for v in state
    ):
        rows = []
        for position, value in enumerate(state):
            rows += flatten_state(value, f"{path}{_item_name(value, value, position)}")
        return rows
    return [(path, state)]


def _item_name(left: Any, right: Any, position: int) -> str:
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        for key in NAMING_KEYS:
            if key in left and left.get(key) == right.get(key):
                return f"[{key}={left[key]}]"
    return f"[{position}]"


def _same(a: Any, b: Any) -> bool:
    try:
        return encode(a) == encode(b)
    except (TypeError, ValueError):
        return bool(a == b)
