"""The server side: an in-process implementation answering the protocol on stdin/stdout.

:func:`serve_loop` is every layout's loop (framing, replies written as soon as they are
made, an exception answered with an ``error`` and the traceback); a *handler* is what a
layout answers: :class:`GenericServer` for the generic layout (:mod:`tracediff.process.generic`),
specdec's ``Server`` for its own. ``tracediff serve [--model M] IMPL`` (:func:`main`)
picks the model's handler, or the generic one.

The protocol owns file descriptor 1: Python's ``sys.stdout`` is pointed at stderr before
the implementation is loaded, so a stray ``print`` in it shows up in the finding instead of
corrupting the stream.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from tracediff import __version__
from tracediff.model import claim
from tracediff.process.framing import (
    ERROR,
    HELLO,
    LENGTH,
    OK,
    RESET,
    SHUTDOWN,
    ProtocolError,
    frame,
    message_length,
    parse,
)
from tracediff.process.generic import CALL, LAYOUT, RETURN, STATE, VERSIONS


class Channel:
    """Framed messages on two file descriptors."""

    def __init__(
        self, read_fd: int, write_fd: int, framer: Callable[[dict[str, Any]], bytes] = frame
    ) -> None:
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.framer = framer
        # read in large chunks: a harness may write a whole step's requests at once
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
        data = memoryview(self.framer(message))
        while data:
            data = data[os.write(self.write_fd, data) :]


class Handler(Protocol):
    """What a layout's server answers (one handler per process)."""

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (raises when the implementation does)."""

    def replies(self, message: dict[str, Any]) -> int:
        """How many replies the request asks for at most (specdec's ``plan`` with a
        ``count``); 1 for most."""

    def more(self, reply: dict[str, Any]) -> bool:
        """Whether another reply may follow ``reply`` to the same request."""

    def failed(self, message: dict[str, Any]) -> None:
        """The implementation raised on ``message``."""


def error(text: str) -> dict[str, Any]:
    return {"type": ERROR, "message": text}


def serve_loop(
    handler: Handler,
    read_fd: int,
    write_fd: int,
    *,
    label: str = "tracediff serve",
    framer: Callable[[dict[str, Any]], bytes] = frame,
) -> int:
    """Answer messages until ``shutdown`` or end of input; returns the exit status. Each
    reply is written as soon as it is made, so a failure is pinned to its own request."""
    channel = Channel(read_fd, write_fd, framer)
    while True:
        try:
            message = channel.receive()
        except ProtocolError as exc:
            print(f"{label}: {exc}", file=sys.stderr)
            return 2
        if message is None or message["type"] == SHUTDOWN:
            return 0
        for _ in range(handler.replies(message)):
            try:
                reply = handler.handle(message)
            except Exception as exc:  # noqa: BLE001 - the implementation's failure is the answer
                handler.failed(message)
                reply = error("".join(traceback.format_exception(exc)).rstrip())
            try:
                channel.send(reply)
            except (TypeError, ValueError, OverflowError, ProtocolError) as exc:
                reply = error(f"the reply cannot be encoded: {type(exc).__name__}: {exc}")
                channel.send(reply)
            except BrokenPipeError:
                return 0
            if not handler.more(reply):
                break


def packages(*modules: str) -> dict[str, str]:
    """The versions of what decides a served implementation's answers: Python, tracediff
    and the distributions holding ``modules`` (the model's, the implementation's), for
    fingerprints of results made with them."""
    found = {"python": platform.python_version(), "tracediff": __version__}
    if not modules:
        return found
    try:
        owners = importlib.metadata.packages_distributions()
    except Exception:  # noqa: BLE001 - broken metadata: the versions above still tell
        owners = {}
    for module in modules:
        top = module.split(".", 1)[0]
        for dist in owners.get(top, ()) or ((top,) if _installed(top) else ()):
            try:
                found[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
    return found


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


class GenericServer:
    """The generic layout's handler around one implementation factory of one model."""

    def __init__(self, model: Any, factory: Any, name: str, modules: tuple[str, ...]) -> None:
        self.model = model
        self.factory = factory
        self.name = name
        self.modules = modules
        self.impl: Any = None

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        kind = message["type"]
        if kind == CALL:
            if self.impl is None:
                return error("a 'call' message before any 'reset'")
            method = message.get("method")
            if not isinstance(method, str) or method not in self.model.methods:
                return error(f"the model {self.model.name!r} has no method {method!r}")
            args = message.get("args", [])
            if not isinstance(args, list):
                return error(f"a 'call' whose 'args' is {type(args).__name__}, not a list")
            return {"type": RETURN, "value": getattr(self.impl, method)(*args)}
        if kind == RESET:
            self.impl = None
            scenario = claim(self.model, self.model.scenario_from_dict(message.get("scenario")))
            self.impl = self.factory(scenario)
            return {"type": OK}
        if kind == HELLO:
            return self.hello(message)
        if kind == STATE:
            state = getattr(self.impl, "state", None)
            if state is None:
                return error(f"{self.name} has no state()")
            return {"type": STATE, "state": state()}
        return error(f"unknown message type {kind!r}")

    def hello(self, message: dict[str, Any]) -> dict[str, Any]:
        offered = message.get("versions", [])
        common = [v for v in VERSIONS if isinstance(offered, list) and v in offered]
        if not common:
            return error(f"no common protocol version: offered {offered!r}, served {VERSIONS}")
        asked = message.get("model")
        if asked is not None and asked != self.model.name:
            return error(
                f"this server serves the model {self.model.name!r}, not {asked!r}; start it "
                f"with --model {asked}"
            )
        return {
            "type": HELLO,
            "version": max(common),
            "layout": LAYOUT,
            "name": self.name,
            "model": self.model.name,
            "tracediff": __version__,
            "packages": packages(*self.modules),
            "capabilities": [STATE] if hasattr(self.factory, "state") else [],
        }

    def replies(self, message: dict[str, Any]) -> int:
        return 1

    def more(self, reply: dict[str, Any]) -> bool:
        return False

    def failed(self, message: dict[str, Any]) -> None:
        if message["type"] == RESET:
            self.impl = None


def protocol_stdout() -> int:
    """Take file descriptor 1 for the protocol: returns a duplicate of it to write messages
    to, and points fd 1 and ``sys.stdout`` at stderr, so that whatever the implementation
    prints shows up in a finding instead of corrupting the stream."""
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def served_spec(text: str) -> Any:
    """The spec ``tracediff serve`` serves (an ImplSpec), checked before stdout is taken
    (nothing is imported): ImplementationError for one it cannot serve."""
    from tracediff.errors import ImplementationError
    from tracediff.project.impls import EXEC_PREFIX, parse_impl

    spec = parse_impl(text)
    if spec.target.startswith(EXEC_PREFIX):
        raise ImplementationError(
            f"tracediff serve serves Python implementations, not exec: ones ({text!r}); "
            "name a built-in, package.module:attr or an entry point"
        )
    return spec


def serve_impl(model: Any, spec: Any, out: int) -> int:
    """Serve the implementation ``spec`` (:func:`served_spec`) of ``model`` on fd 0 and
    ``out``; returns the exit status. The model's own layout where it has one
    (``serve_impl``), else the generic one."""
    from tracediff.project.impls import load

    return serve_factory(model, spec, load(spec), out)


def serve_factory(model: Any, spec: Any, factory: Any, out: int) -> int:
    """:func:`serve_impl` with the implementation's factory already loaded."""
    own = getattr(model, "serve_impl", None)
    if own is not None:
        return int(own(factory, spec.name, 0, out))
    module = getattr(type(model), "__module__", "")
    # and the distributions the model names (optional ``served_packages``: its engine's
    # libraries, say), whose versions decide answers as much as the code does
    named = tuple(p for p in getattr(model, "served_packages", ()) if isinstance(p, str))
    modules = (module, spec.target.partition(":")[0], *named)
    server = GenericServer(model, factory, spec.name, modules)
    return serve_loop(server, 0, out)


# -- the quick start: ``tracediff serve`` without the command line ---------------------------
def serve_arguments(args: list[str]) -> tuple[str | None, str] | None:
    """``(model, impl)`` when ``args`` (the command line after the program) are a plain
    ``[--model M] serve [--model M] IMPL`` (``--model`` anywhere, as the command line takes
    it), else None: help, ``--debug``, anything else is the command line's."""
    model: str | None = None
    impl: str | None = None
    command = False
    items = iter(args)
    for arg in items:
        if arg == "--model":
            model = next(items, None)
            if model is None:
                return None
        elif arg.startswith("--model="):
            model = arg.removeprefix("--model=")
        elif not command and arg == "serve":
            command = True
        elif command and impl is None and not arg.startswith("-"):
            impl = arg
        else:
            return None
    if impl is None:
        return None
    return model, impl


def quick_serve(args: list[str]) -> None:
    """``tracediff serve`` started without importing the command line (click, rich, the
    commands' options): a server is started once per worker and implementation, and what
    it imports is start-up time of every run, shrink and gate over a process. Returns when
    ``args`` are not a plain serve (:func:`serve_arguments`) or when something goes wrong
    before the protocol starts: the command line then runs the same command and reports
    the failure as it reports any (exit 2 naming the model or the implementation, exit 3
    for a bug in tracediff). Exits with the server's status otherwise."""
    parsed = serve_arguments(args)
    if parsed is None:
        return
    name, impl = parsed
    from tracediff.executor.call import real_interrupts

    with real_interrupts():
        try:
            model, spec, out, factory = _prepare(name, impl)
        except Exception:  # noqa: BLE001 - the command line runs it again and reports it
            return
        try:
            status = serve_factory(model, spec, factory, out)
        except KeyboardInterrupt as exc:  # Ctrl-C (Interrupted), or the implementation's
            print("tracediff: error: interrupted", file=sys.stderr)
            _end(128 + int(getattr(exc, "signum", signal.SIGINT)))
        except Exception as exc:  # noqa: BLE001 - as the command line's last line of defence
            print(
                f"tracediff: error: internal error: {type(exc).__name__}: {exc} (a bug in "
                "tracediff; rerun with --debug for the traceback and report it)",
                file=sys.stderr,
            )
            _end(3)
    _end(status)


def _end(status: int) -> NoReturn:
    """End the server process with ``status``. Not through ``sys.exit``: the implementation
    it served runs in this process and may have replaced it (``sys.exit = ...``), which
    would end the server with a traceback instead; its output is flushed first, as the
    interpreter's exit would."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def _prepare(name: str | None, impl: str) -> tuple[Any, Any, int, Any]:
    """The model, the spec, the protocol's stdout and the loaded factory; on a failure,
    stdout is given back before the exception goes on."""
    from tracediff import model as models
    from tracediff.project import MODEL_ENV, current_model
    from tracediff.project.impls import load

    if name is not None:
        models.get(name)  # an unknown model: the command line says so, with the choices
        os.environ[MODEL_ENV] = name  # as --model does: workers and resolutions see it
    model = current_model()
    spec = served_spec(impl)
    out = protocol_stdout()
    try:
        return model, spec, out, load(spec)
    except BaseException:
        os.dup2(out, 1)
        os.close(out)
        sys.stdout = sys.__stdout__
        raise
