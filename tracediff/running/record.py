"""The one way tracediff drives an implementation through a scenario, and records it.

Every command that runs an implementation starts it with :func:`start`: the factory is
loaded once per spec, the implementation gets a private copy of the scenario and the model's
driver another (an implementation may change what it is handed without changing what the
driver or the others run), and the records come from the scenario's own model
(:func:`tracediff.model.of`). :class:`Recording` is the recording primitive on top of it:
each record encoded canonically, fed to the compared-body digest, counted (records, plans,
bytes) and handed to an optional observer, so that golden digests, the self-check, trace
files and the runner's lockstep count and hash the same way. The runner's lockstep walk
(:func:`tracediff.running.runner.run_scenario`) drives several recordings side by side.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from tracediff import model as models
from tracediff.executor.call import CONSTRUCT, Guarded, construct, keep_exit
from tracediff.model import DECISION, DecisionModel, Encoded, Record
from tracediff.project.impls import Factory, ImplSpec, load
from tracediff.trace import BodyDigest, encode

Observer = Callable[[int, Record, bytes], None]


@functools.lru_cache(maxsize=32)
def factory(spec: ImplSpec) -> Factory:
    """The implementation factory a spec names, imported once per process."""
    return load(spec)


def instance(scenario: Any, spec: ImplSpec, *, guarded: bool = False) -> Any:
    """An implementation for ``scenario``, built from a private copy of it. ``guarded``:
    what its constructor and methods raise is ImplementationFailed."""
    model = models.of(scenario)
    mine = models.claim(model, model.private_copy(scenario))
    if not guarded:
        try:
            return factory(spec)(mine)
        finally:
            keep_exit(spec.name, CONSTRUCT)  # ExitPatched: its finding, wherever it runs
    return Guarded(construct(spec.name, factory(spec), mine), spec.name)


def drive(scenario: Any, impl: Any, *, check: bool = True) -> Iterator[Record]:
    """The records ``impl`` (an implementation instance, or a wrapper of one) produces for
    ``scenario``, header first, from the scenario's model; the driver reads its own copy."""
    model = models.of(scenario)
    records = model.drive(model.private_copy(scenario), impl, check=check)
    end = getattr(impl, "end_scenario", None)
    return records if end is None else _ended(records, end)


def _ended(records: Iterator[Record], end: Callable[[], Any]) -> Iterator[Record]:
    """``records``, then ``end()`` once the driver finished the scenario (not when it is
    stopped part-way): the optional hook of an implementation that checks something at the
    end, like one in another process that sent a reply nobody asked for. What it raises is
    a finding pinned to the scenario's last decision."""
    yield from records
    end()


def start(
    scenario: Any, spec: ImplSpec, *, guarded: bool = False, check: bool = True
) -> Iterator[Record]:
    """The records one implementation produces for a scenario (header first)."""
    return drive(scenario, instance(scenario, spec, guarded=guarded), check=check)


def keep_decision_bytes(impl: Any) -> None:
    """Ask ``impl`` to hand over its decision records with the bytes they came in
    (:class:`tracediff.model.Encoded`), if it can (an implementation in another process,
    which would otherwise have each record decoded, checked and encoded again). Only for a
    recording judged by its digest against a known good one, run again in full on a
    mismatch: the bytes are not checked to be canonical."""
    if not type(impl).__module__.startswith("tracediff."):
        return  # a user's implementation is called only through executor/call.py
    ask = getattr(impl, "keep_decision_bytes", None)
    if callable(ask):
        ask()


_DECIDING: dict[tuple[type[Any], str], type[Any]] = {}


def _deciding(cls: type[Any], name: str) -> type[Any]:
    """``cls`` with its ``_decide`` also called ``name`` (the model's decision method): one
    class per wrapper class and name, made once."""
    found = _DECIDING.get((cls, name))
    if found is None:
        body = {name: cls._decide, "__module__": cls.__module__}
        found = _DECIDING[(cls, name)] = type(cls.__name__, (cls,), body)
    return found


class TimedScheduler:
    """An implementation's driver interface (its model's ``methods``), forwarded, with the
    decision method timed (kept out of the compared bytes) and counted. The other methods
    are the implementation's own bound methods, set on the instance: no cost per call."""

    def __init__(self, inner: Any, model: DecisionModel) -> None:
        self.inner = inner
        self.plan_ns = 0
        self.plans = 0
        for name in model.methods:
            if name != model.decide:
                setattr(self, name, self._forward(name))
        # the decision method under the model's name, on a class (a bound method of self
        # kept on self would be a reference cycle: the wrapper, its implementation and a
        # process adapter's process would outlive the scenario until a garbage collection)
        self.__class__ = _deciding(type(self), model.decide)
        self._decision = getattr(inner, model.decide)
        if callable(getattr(inner, "begin_step", None)):
            # the driver's optional announcement of a step's calls (an implementation in
            # another process writes them at once): forwarded, or it would never be seen
            self.begin_step = self._forward("begin_step")
        if callable(getattr(inner, "end_scenario", None)):
            self.end_scenario = self._forward("end_scenario")  # see drive()

    def _forward(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _decide(self, *args: Any) -> Any:
        self.plans += 1  # first, so that a decision that raises or hangs is counted as the one
        start = time.perf_counter_ns()
        record = self._decision(*args)
        self.plan_ns += time.perf_counter_ns() - start
        return record


class Recording:
    """Records of one drive, encoded, digested and counted as they are read.

    Iterating yields ``(index, record, payload)``: the body index (header 0), the record
    and its canonical bytes. ``digest``, ``records``, ``plans``, ``bytes`` and
    ``header_sha256`` describe what was read so far, also after a failure part-way.
    ``observer``, if given, sees every record after it was counted.
    """

    def __init__(self, records: Iterator[Record], observer: Observer | None = None) -> None:
        self._source = records
        self._observer = observer
        self.digest = BodyDigest()
        self.records = 0
        self.plans = 0
        self.bytes = 0
        self.last_plan = 0  # the plan number at (or last before) the last record read
        self.header_sha256 = ""  # of the header payload: what scenario was run

    def __iter__(self) -> Iterator[tuple[int, Record, bytes]]:
        source = iter(self._source)
        header = next(source, None)
        if header is None:
            return
        payload = encode(header)
        self.digest.add_header(payload)
        self.header_sha256 = hashlib.sha256(payload).hexdigest()
        self.records += 1
        self.bytes += len(payload)
        observer = self._observer
        if observer is not None:
            observer(0, header, payload)
        yield 0, header, payload
        add = self.digest.add_record
        index = 0
        for record in source:
            index += 1
            payload = record.payload if type(record) is Encoded else encode(record)
            add(payload)
            if record.get("t") == DECISION:
                self.plans += 1
                number = record.get("plan")
                if isinstance(number, int):
                    self.last_plan = number
            self.records += 1
            self.bytes += len(payload)
            if observer is not None:
                observer(index, record, payload)
            yield index, record, payload

    def hexdigest(self) -> str:
        return self.digest.hexdigest()
