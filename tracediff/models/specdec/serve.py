"""specdec's layout, served: ``tracediff serve --model specdec NAME`` (and, as an alias,
``python -m tracediff.models.specdec.serve NAME|module:attr``).

Serves any implementation tracediff can load (a built-in name, ``package.module:attr``, an
entry point) on stdin/stdout in specdec's own layout (docs/protocol.md), so that
``--impl 'exec:tracediff serve NAME'`` runs it in another process. It is the protocol's
executable example and its test: served and in-process traces must be identical. The loop,
the framing and the stdout discipline are the core's (:mod:`tracediff.process.server`);
:class:`Server` is what this layout answers. An exception in the implementation is answered
with an ``error`` message carrying its traceback; the server then waits for the next
``reset``.
"""

from __future__ import annotations

import copy
import sys
import time
from typing import Any

from tracediff import __version__
from tracediff.models.specdec.protocol import (
    ARRIVE,
    BENCH,
    COMPLETE,
    ERROR,
    HELLO,
    OK,
    PLAN,
    PROTOCOL_VERSIONS,
    RESET,
    RETIRED,
    STATE,
    frame,
)
from tracediff.models.specdec.scenario.model import RequestSpec, Scenario
from tracediff.process.server import packages, protocol_stdout, serve_loop

USAGE = "usage: python -m tracediff.models.specdec.serve NAME|package.module:attr"


class Server:
    """The protocol's state machine around one implementation factory."""

    def __init__(self, factory: Any, name: str) -> None:
        self.factory = factory
        self.name = name
        self.scheduler: Any = None
        self.specs: dict[int, RequestSpec] = {}
        self.scenario: Scenario | None = None
        self.version = 1  # the protocol version agreed in the hello

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message["type"]
        if kind == HELLO:
            offered = message.get("versions", [])
            common = [v for v in PROTOCOL_VERSIONS if v in offered]
            if not common:
                return _error(f"no common protocol version: offered {offered!r}")
            self.version = max(common)
            return {
                "type": HELLO,
                "version": self.version,
                "name": self.name,
                "capabilities": [STATE, BENCH],
                # what fingerprints read (tracediff.process); a harness needs none of it
                "model": "specdec",
                "tracediff": __version__,
                "packages": packages(),
            }
        if kind == RESET:
            self.scenario = Scenario.from_dict(message["scenario"])
            self.specs = {spec.id: spec for spec in self.scenario.requests}
            self.scheduler = self.factory(self.scenario)
            return {"type": OK}
        if self.scheduler is None:
            return _error(f"a {kind!r} message before any 'reset'")
        if kind == ARRIVE:
            request = message["request"]
            spec = self.specs.get(request["id"]) or RequestSpec(**request)
            self.scheduler.arrive(spec, message["now"])
            return {"type": OK}
        if kind == PLAN:
            start = time.perf_counter_ns()
            record = self.scheduler.plan(message["now"])
            took = time.perf_counter_ns() - start
            return {"type": PLAN, "record": record, "plan_ns": took}
        if kind == COMPLETE:
            ids = self.scheduler.complete(message["event"], message["now"])
            return {"type": RETIRED, "ids": list(ids)}
        if kind == STATE:
            state = getattr(self.scheduler, "state", None)
            if state is None:
                return _error(f"{self.name} has no state()")
            return {"type": STATE, "state": state()}
        if kind == BENCH:
            return self.bench(message["state"], message["now"])
        return _error(f"unknown message type {kind!r}")

    def replies(self, message: dict[str, Any]) -> int:
        """Version 2: a plan with a count is answered by one plan reply per plan, up to the
        count, ending after a plan that chooses no round or at an error."""
        if self.version < 2 or message["type"] != PLAN:
            return 1
        count = message.get("count", 1)
        return count if type(count) is int and count >= 1 else 1

    def more(self, reply: dict[str, Any]) -> bool:
        record = reply.get("record")
        chose = isinstance(record, dict) and record.get("round") is not None
        return reply["type"] == PLAN and chose

    def failed(self, message: dict[str, Any]) -> None:
        if message["type"] == RESET:
            self.scheduler = None

    def bench(self, state: dict[str, Any], now: int) -> dict[str, Any]:
        from tracediff.models.specdec.bench import load_bench_state

        assert self.scenario is not None
        instance = self.factory(self.scenario)
        load_bench_state(instance, self.scenario, copy.deepcopy(state))
        cpu = time.thread_time_ns()
        start = time.perf_counter_ns()
        record = instance.plan(now)
        took = time.perf_counter_ns() - start
        cpu = time.thread_time_ns() - cpu
        return {"type": BENCH, "record": record, "plan_ns": took, "cpu_ns": cpu}


def _error(text: str) -> dict[str, Any]:
    return {"type": ERROR, "message": text}


def serve(factory: Any, name: str, read_fd: int, write_fd: int) -> int:
    """Answer messages until ``shutdown`` or end of input; returns the exit status."""
    # Server and frame are read here, when called: tests serve variants of both
    return serve_loop(
        Server(factory, name),
        read_fd,
        write_fd,
        label="tracediff.models.specdec.serve",
        framer=lambda message: frame(message),
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    # The protocol owns fd 1; everything the implementation prints goes to stderr.
    protocol_out = protocol_stdout()
    from tracediff.errors import TracediffError
    from tracediff.project.impls import load, parse_impl

    try:
        spec = parse_impl(args[0])
        if spec.target.startswith("exec:"):
            print(
                "tracediff.models.specdec.serve: serves Python implementations, not exec: ones",
                file=sys.stderr,
            )
            return 2
        factory = load(spec)
    except TracediffError as exc:
        print(f"tracediff.models.specdec.serve: {exc}", file=sys.stderr)
        return 2
    return serve(factory, spec.name, 0, protocol_out)


if __name__ == "__main__":
    sys.exit(main())
