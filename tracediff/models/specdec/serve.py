"""``python -m tracediff.models.specdec.serve NAME|module:attr``: a Python implementation over the
protocol.

Serves any implementation tracediff can load (a built-in name, ``package.module:attr``, an
entry point) on stdin/stdout as docs/protocol.md describes, so that
``--impl 'exec:python -m tracediff.models.specdec.serve NAME'`` runs it in another process. It is
the
protocol's executable example and its test: served and in-process traces must be identical.

The protocol owns file descriptor 1: Python's ``sys.stdout`` is pointed at stderr before the
implementation is loaded, so a stray ``print`` in it shows up in the finding instead of
corrupting the stream. An exception in the implementation is answered with an ``error``
message carrying its traceback; the server then waits for the next ``reset``.
"""

from __future__ import annotations

import copy
import os
import sys
import time
import traceback
from typing import Any

from tracediff.models.specdec.protocol import (
    ARRIVE,
    BENCH,
    COMPLETE,
    ERROR,
    HELLO,
    LENGTH,
    OK,
    PLAN,
    PROTOCOL_VERSIONS,
    RESET,
    RETIRED,
    SHUTDOWN,
    STATE,
    ProtocolError,
    frame,
    message_length,
    parse,
)
from tracediff.models.specdec.scenario.model import RequestSpec, Scenario

USAGE = "usage: python -m tracediff.models.specdec.serve NAME|package.module:attr"


class _Channel:
    """Framed messages on two file descriptors."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        # read in large chunks: a version 2 harness writes a whole step's requests at once
        self._buffer = bytearray()

    def _read_exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            chunk = os.read(self.read_fd, max(65536, size - len(self._buffer)))
            if not chunk:
                if self._buffer:
                    raise ProtocolError(f"stdin ended inside a message ({len(self._buffer)} bytes)")
                return None
            self._buffer += chunk
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def receive(self) -> dict[str, Any] | None:
        prefix = self._read_exactly(LENGTH.size)
        if prefix is None:
            return None
        payload = self._read_exactly(message_length(prefix))
        if payload is None:
            raise ProtocolError("stdin ended inside a message")
        return parse(payload)

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(frame(message))
        while data:
            data = data[os.write(self.write_fd, data) :]


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
    channel = _Channel(read_fd, write_fd)
    server = Server(factory, name)
    while True:
        try:
            message = channel.receive()
        except ProtocolError as exc:
            print(f"tracediff.models.specdec.serve: {exc}", file=sys.stderr)
            return 2
        if message is None or message["type"] == SHUTDOWN:
            return 0
        # Version 2: a plan with a count is answered by one plan reply per plan, up to the
        # count, ending after a plan that chooses no round or at an error. Each reply is
        # written as soon as it is made, so a failure is pinned to its own plan.
        count = _count(message) if server.version >= 2 else 1
        for _ in range(count):
            try:
                reply = server.handle(message)
            except Exception as exc:  # noqa: BLE001 - the implementation's failure is the answer
                server.scheduler = None if message["type"] == RESET else server.scheduler
                reply = _error("".join(traceback.format_exception(exc)).rstrip())
            try:
                channel.send(reply)
            except (TypeError, ValueError, OverflowError, ProtocolError) as exc:
                reply = _error(f"the reply cannot be encoded: {type(exc).__name__}: {exc}")
                channel.send(reply)
            except BrokenPipeError:
                return 0
            record = reply.get("record")
            if reply["type"] != PLAN or not isinstance(record, dict) or record.get("round") is None:
                break


def _count(message: dict[str, Any]) -> int:
    """How many plans a ``plan`` message asks for (1 for every other message)."""
    count = message.get("count", 1) if message["type"] == PLAN else 1
    return count if type(count) is int and count >= 1 else 1


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    # The protocol owns fd 1; everything the implementation prints goes to stderr.
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
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
