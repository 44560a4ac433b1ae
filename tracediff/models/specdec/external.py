"""``--impl 'exec:COMMAND ARGS'`` under specdec: its own message layout (docs/protocol.md).

specdec speaks a layout of its own, older than the generic one, that the Rust port
(examples/native) and implementations written against docs/protocol.md speak: typed
messages (``arrive``, ``plan``, ``complete``, ``state``, ``bench``) under protocol versions
1 and 2, framed as every layout is (:mod:`tracediff.process.framing`). This module is only
that layout's client side: the process, its pipes, timeouts, stderr, CPU pinning and
lifetime across scenarios are the core's (:mod:`tracediff.process.pipes`).

:class:`ExecFactory` is what ``impls.load`` returns for such a spec: like a scheduler class
it is called once per scenario, and it hands back an :class:`ExternalScheduler` with the
driver interface. Under protocol version 1 every call is one request and one reply on the
pipes. Under version 2 the driver announces each step (``begin_step``) and the adapter
writes the step's requests at once, ``plan`` with a ``count``; the calls then read their
replies one by one, so every reply, error and failure is still pinned to its own request,
and the process is woken once per step instead of once per call.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from tracediff import __version__
from tracediff.models.specdec.protocol import (
    ARRIVE,
    BENCH,
    COMPLETE,
    HELLO,
    OK,
    PLAN,
    PROTOCOL_VERSIONS,
    RESET,
    RETIRED,
    STATE,
    parse,
    parse_plan,
)
from tracediff.models.specdec.scenario.model import RequestSpec, Scenario
from tracediff.process.pipes import (
    PIN_ENV,
    Ahead,
    ExternalFault,
    ExternalProcess,
    ProcessPool,
    check_versions,
    scenario_label,
)
from tracediff.process.pipes import parse_command as _parse_command

__all__ = ["PIN_ENV", "ExecFactory", "ExternalFault", "ExternalScheduler", "parse_command"]

EXAMPLE = "'exec:python -m tracediff.models.specdec.serve reference'"


def parse_command(text: str) -> list[str]:
    """The argv of an ``exec:`` spec; raises ImplementationError when it cannot run."""
    return _parse_command(text, EXAMPLE)


def _chose_nothing(reply: dict[str, Any]) -> bool:
    """A plan reply that ends its ``count``: its record chooses no round."""
    record = reply.get("record")
    return not isinstance(record, dict) or record.get("round") is None


def start_process(
    name: str, argv: list[str], env: Mapping[str, str] | None = None, strict: bool = False
) -> ExternalProcess:
    """One process speaking specdec's layout, after its hello (``strict``: it must run this
    tracediff version, see :func:`tracediff.process.pipes.check_versions`)."""
    offered = sorted(PROTOCOL_VERSIONS, reverse=True)
    process = ExternalProcess(
        name,
        argv,
        {"type": HELLO, "versions": offered, "tracediff": __version__, "model": "specdec"},
        PROTOCOL_VERSIONS,
        parser=parse,
        fast_parser=parse_plan,
        env=env,
    )
    check_versions(process, strict)
    return process


class ExecFactory:
    """Called with a scenario, like a scheduler class: returns a reset ExternalScheduler."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: Mapping[str, str] | None = None,
        strict: bool = False,
    ) -> None:
        self.name = name
        self.argv = argv
        self.pool = ProcessPool(lambda: start_process(name, argv, env, strict))

    def __call__(self, scenario: Scenario) -> ExternalScheduler:
        process = self.pool.take()
        process.keep_bytes = ""  # until this scenario's recording asks for them
        payload = reset_payload(scenario)
        process.reset({"type": RESET, "scenario": payload}, scenario_label(scenario))
        scheduler = ExternalScheduler(process, payload["requests"])
        weakref.finalize(scheduler, self.pool.give_back, process)
        return scheduler

    def probe(self) -> None:
        """Start one process now and stop it after its hello (ProcessPool.probe)."""
        self.pool.probe()


class ExternalScheduler:
    """The driver interface over one process (docs/implementations.md, docs/protocol.md)."""

    def __init__(self, process: ExternalProcess, requests: Sequence[dict[str, Any]] = ()) -> None:
        self.process = process
        self.last_plan_ns: int | None = None  # what the implementation measured, if it did
        # the scenario's request specs as sent in the reset: an arrival sends its own
        self._specs = {request["id"]: request for request in requests}
        self._unsent: ExternalFault | None = None  # a step that could not be written

    def keep_decision_bytes(self) -> None:
        """Hand plan records over with the bytes the process sent (tracediff.model.Encoded):
        asked by a recording judged by its digest alone (running.record.keep_decision_bytes),
        which then spares each record's nesting walk, column check and encoding."""
        self.process.keep_bytes = PLAN

    def _raise_unsent(self) -> None:
        if self._unsent is not None:
            fault, self._unsent = self._unsent, None
            raise fault

    def begin_step(self, now: int, events: list[tuple[str, Any]], plans: int) -> None:
        """Version 2: write the step's requests at once (the driver's announcement)."""
        if self.process.version < 2:
            return
        messages: list[dict[str, Any]] = []
        ahead: list[Ahead] = []
        for kind, item in events:
            if kind == COMPLETE:
                messages.append({"type": COMPLETE, "now": now, "event": item})
            else:
                messages.append({"type": ARRIVE, "now": now, "request": self._spec(item)})
            ahead.append(Ahead(kind))
        if plans > 0:
            message: dict[str, Any] = {"type": PLAN, "now": now}
            if plans > 1:
                message["count"] = plans
            messages.append(message)
            ahead.append(Ahead(PLAN, plans, _chose_nothing))
        if messages:
            try:
                self.process.post(messages, ahead)
            except ExternalFault as exc:
                # raised by the step's first call, whose request could not be written: the
                # finding's plan number and text are those of version 1
                self._unsent = exc

    def _spec(self, spec: RequestSpec) -> dict[str, Any]:
        sent = self._specs.get(spec.id)
        return sent if sent is not None else _spec_dict(spec)

    def arrive(self, spec: RequestSpec, now: int) -> None:
        self._raise_unsent()
        if self.process.take(ARRIVE, OK) is None:
            self.process.request({"type": ARRIVE, "now": now, "request": self._spec(spec)}, OK)

    def plan(self, now: int) -> dict[str, Any]:
        self._raise_unsent()
        reply = self.process.take(PLAN, PLAN) or self.process.request(
            {"type": PLAN, "now": now}, PLAN
        )
        record = reply.get("record")
        if not isinstance(record, dict):
            self.process.fail("sent a plan reply without a 'record' map")
        took = reply.get("plan_ns")
        self.last_plan_ns = took if isinstance(took, int) else None
        return record

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        self._raise_unsent()
        reply = self.process.take(COMPLETE, RETIRED) or self.process.request(
            {"type": COMPLETE, "now": now, "event": event}, RETIRED
        )
        ids = reply.get("ids")
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            self.process.fail(f"sent retired ids that are not a list of integers: {ids!r}")
        return ids

    def end_scenario(self) -> None:
        """The driver's end of the scenario: a reply sent after the last one asked for is
        this scenario's finding (pinned to its last plan), not the next scenario's."""
        self.process.check_unasked("after the scenario's last reply")

    def state(self) -> dict[str, Any]:
        if STATE not in self.process.capabilities:
            return {"note": f"{self.process.name} does not report its state"}
        reply = self.process.request({"type": STATE}, STATE)
        value = reply.get("state")
        return value if isinstance(value, dict) else {"state": value}

    @property
    def benchable(self) -> bool:
        return BENCH in self.process.capabilities

    def bench(self, state: dict[str, Any], now: int) -> tuple[dict[str, Any], int, int]:
        """One timed plan() from a prepared state: (record, wall ns, CPU ns), as measured by
        the implementation itself (the pipe's cost is not in it)."""
        reply = self.process.request({"type": BENCH, "state": state, "now": now}, BENCH)
        record, wall, cpu = reply.get("record"), reply.get("plan_ns"), reply.get("cpu_ns")
        if not isinstance(record, dict) or type(wall) is not int or type(cpu) is not int:
            self.process.fail("sent a bench reply without 'record', 'plan_ns' and 'cpu_ns'")
        return record, wall, cpu


# A request spec's fields are all scalars: a shallow dict is what dataclasses.asdict gives,
# at a twentieth of its cost (a reset sends every request of the scenario).
_SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(RequestSpec))


def _spec_dict(spec: RequestSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in _SPEC_FIELDS}


def reset_payload(scenario: Scenario) -> dict[str, Any]:
    """``scenario.to_dict()`` (tuples as lists), built without ``dataclasses.asdict``,
    whose deep copies cost a millisecond per scenario: more than the rest of a reset."""
    return {
        "profile": scenario.profile,
        "seed": scenario.seed,
        "params": _plain_data(scenario.params),
        "truth": _plain_data(scenario.truth),
        "requests": [_spec_dict(spec) for spec in scenario.requests],
    }


_SCALARS = frozenset({int, float, str, bool, type(None)})


def _plain_data(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain_data(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain_data(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain_data(item) for key, item in value.items()}
    return value


_FACTORIES: dict[str, ExecFactory] = {}


def factory_for(
    name: str, text: str, *, env: Mapping[str, str] | None = None, strict: bool = False
) -> ExecFactory:
    """The factory of an ``exec:`` spec, one per process and command (its idle processes
    are shared by every caller in this process)."""
    argv = parse_command(text)
    key = "\0".join([*argv, *sorted(f"{k}={v}" for k, v in (env or {}).items())])
    factory = _FACTORIES.get(key)
    if factory is None:
        factory = _FACTORIES[key] = ExecFactory(name, argv, env, strict)
    return factory
