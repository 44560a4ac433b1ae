"""The generic layout: any model's implementation in another process, with no code from the
model (docs/protocol.md, "The generic layout").

A call is its method name and its arguments; the reply is the value the in-process method
would return. A scenario starts with a ``reset`` carrying the scenario's ``to_dict()``,
which the server turns back into the model's scenario (``scenario_from_dict``) for the
implementation's factory. So every model whose driver passes plain msgpack values (None,
bool, int, float, str, bytes, lists, maps with string or integer keys) runs its
implementations in another process, another interpreter or another revision as they run
in this one; a driver that passes anything else gets a clear error naming the method and
the value (a model with richer arguments gives its own layout, as specdec does).

Messages, after the hello (``versions``, ``tracediff``, ``model`` and ``layout: "calls"``;
the reply adds ``name``, ``tracediff``, ``packages`` and ``capabilities``)::

    {"type": "reset", "scenario": {...}}              -> {"type": "ok"}
    {"type": "call", "method": "plan", "args": [7]}   -> {"type": "return", "value": {...}}
    {"type": "state"}                                 -> {"type": "state", "state": {...}}

and ``error`` in place of any reply (the implementation raised; the process waits for the
next ``reset``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from tracediff import __version__
from tracediff.errors import UsageError
from tracediff.process.framing import HELLO, RESET
from tracediff.process.framing import parse as _framing_parse
from tracediff.process.pipes import (
    ExternalFault,
    ExternalProcess,
    ProcessPool,
    check_versions,
    scenario_label,
)
from tracediff.trace.codec import encode

LAYOUT: Final = "calls"
VERSIONS: Final = (1,)  # the generic layout's versions, oldest first
CALL, RETURN, STATE = "call", "return", "state"

# The reply to a call that returns None (most calls but the decision): recognised by its
# bytes, not decoded.
RETURN_NONE: Final = encode({"type": RETURN, "value": None})


def parse(payload: bytes) -> dict[str, Any]:
    """Decode one reply of the generic layout."""
    if payload == RETURN_NONE:
        return {"type": RETURN, "value": None}
    return _framing_parse(payload)


_SCALARS: Final = frozenset({type(None), bool, int, float, str, bytes})


def plain_problem(value: Any, depth: int = 0) -> str | None:
    """What makes ``value`` not a plain msgpack value (None when it is one): the generic
    layout carries nothing else, so that both sides see the same value."""
    kind = type(value)
    if kind in _SCALARS:
        return None
    if depth > 32:
        return "nested deeper than 32 levels"
    if kind is list or kind is tuple:
        for item in value:
            problem = plain_problem(item, depth + 1)
            if problem is not None:
                return problem
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) not in (str, int):
                return f"a map key {key!r:.40} of type {type(key).__name__}"
            problem = plain_problem(item, depth + 1)
            if problem is not None:
                return problem
        return None
    return f"a {kind.__module__}.{kind.__qualname__} ({value!r:.60})"


def hello_request(model: str) -> dict[str, Any]:
    return {
        "type": HELLO,
        "versions": sorted(VERSIONS, reverse=True),
        "tracediff": __version__,
        "model": model,
        "layout": LAYOUT,
    }


class ProcessImpl:
    """The driver interface of one model over one process: each of the model's methods is
    a ``call``; ``state()`` too where the implementation has one."""

    def __init__(self, process: ExternalProcess, model: str) -> None:
        self.process = process
        self.model = model

    def call(self, method: str, args: Sequence[Any]) -> Any:
        problem = plain_problem(list(args))
        if problem is not None:
            raise UsageError(
                f"the model {self.model!r} calls {method}() with {problem}: an implementation "
                "in another process (the generic layout) takes plain msgpack values only "
                "(None, bool, int, float, str, bytes, lists, maps); pass plain values from the "
                "model's driver, or give the model a process layout of its own (docs/models.md)"
            )
        reply = self.process.request(
            {"type": CALL, "method": method, "args": list(args)}, RETURN, f"the call {method}()"
        )
        return reply.get("value")

    def end_scenario(self) -> None:
        """The driver's end of the scenario: a reply sent after the last one asked for is
        this scenario's finding, not the next scenario's."""
        self.process.check_unasked("after the scenario's last reply")

    def state(self) -> Any:
        if STATE not in self.process.capabilities:
            return {"note": f"{self.process.name} does not report its state"}
        reply = self.process.request({"type": STATE}, STATE)
        value = reply.get("state")
        return value if isinstance(value, dict) else {"state": value}


def _method(name: str) -> Callable[..., Any]:
    def call(self: ProcessImpl, *args: Any) -> Any:
        return self.call(name, args)

    call.__name__ = call.__qualname__ = name
    return call


_CLASSES: dict[tuple[str, ...], type[ProcessImpl]] = {}


def impl_class(methods: Sequence[str]) -> type[ProcessImpl]:
    """A :class:`ProcessImpl` with a method per name (so ``getattr(impl, "begin_step",
    None)`` is None unless the model names it, as for an in-process implementation)."""
    key = tuple(methods)
    cls = _CLASSES.get(key)
    if cls is None:
        body = {name: _method(name) for name in key if name not in ("call", "state")}
        cls = _CLASSES[key] = type("ProcessImpl", (ProcessImpl,), body)
    return cls


class GenericFactory:
    """Called with a scenario, like an implementation class: a reset :class:`ProcessImpl`."""

    def __init__(
        self,
        model: Any,
        name: str,
        argv: list[str],
        *,
        env: Mapping[str, str] | None = None,
        strict: bool = False,
    ) -> None:
        self.name = name
        self.argv = argv
        self.model_name = str(model.name)
        self.cls = impl_class(tuple(model.methods))
        self.strict = strict
        self.hello: dict[str, Any] = {}

        def start() -> ExternalProcess:
            process = ExternalProcess(
                name, argv, hello_request(self.model_name), VERSIONS, parser=parse, env=env
            )
            check_versions(process, strict)
            served = process.hello.get("model")
            if served is not None and served != self.model_name:
                process.close()
                raise ExternalFault(
                    f"{name}: the server serves the model {served!r}, not {self.model_name!r}; "
                    f"give it --model {self.model_name}"
                )
            self.hello = process.hello
            return process

        self.pool = ProcessPool(start)

    def __call__(self, scenario: Any) -> ProcessImpl:
        process = self.pool.take()
        process.reset({"type": RESET, "scenario": scenario.to_dict()}, scenario_label(scenario))
        impl = self.cls(process, self.model_name)
        weakref.finalize(impl, self.pool.give_back, process)
        return impl

    def probe(self) -> None:
        self.pool.probe()
