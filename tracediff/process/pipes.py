"""Implementations in other processes: the generic machinery every layout shares.

One :class:`ExternalProcess` is one running implementation and its pipes: started with a
hello (the layout's), then requests and replies in the framing of
:mod:`tracediff.process.framing`. What the messages hold is the layout's (the generic one
of :mod:`tracediff.process.generic`, or a model's own, like specdec's); what is here holds
for all of them:

* lifetime: a :class:`ProcessPool` keeps one process per worker process and concurrent
  use, started on first need and reused across scenarios (the layout sends a ``reset``); a
  scenario ends when its adapter is garbage collected, which hands the process back. A
  process that died, hung or spoke garbage is killed and the next scenario starts a fresh
  one. A worker's clean-up of its children spares the kept ones (:func:`live_pids`).
* timeouts: every wait for a reply is a ``poll`` that the runner's alarm interrupts (the
  scenario time limit); without one a reply still has :data:`REPLY_TIMEOUT_S`.
* blame: requests sent ahead (a step's, written at once) are answered in order, and each
  reply, error or death is pinned to its own request.
* stderr: read by a thread into a bounded buffer (the last :data:`STDERR_KEEP` bytes) and
  attached to every finding about the process; never parsed.
* CPUs: the worker and its processes share one pinned CPU while any runs (:class:`_Pin`).

It inherits the worker's memory limit (``RLIMIT_AS``).
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import select
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from tracediff import __version__
from tracediff.errors import ImplementationError, SchedulerFault
from tracediff.executor.call import TEXT_LIMIT, bounded
from tracediff.process.framing import (
    ERROR,
    HELLO,
    MAX_MESSAGE_BYTES,
    OK,
    SHUTDOWN,
    STRAY_BEFORE_RESET,
    ProtocolError,
    frame,
    message_length,
    parse,
)

PREFIX = "exec:"
STDERR_KEEP = TEXT_LIMIT  # bytes of stderr kept: as much as of any implementation text
EXIT_CHECK_S = 0.25  # while waiting for a reply, how often to check that the process lives
# The longest wait for one reply when the run sets no scenario time limit (a hello
# included: a process that never answers is a finding, not a hang). TRACEDIFF_EXEC_REPLY_S
# overrides it.
REPLY_TIMEOUT_S = 60.0
_SHUTDOWN_WAIT_S = 1.0
# TRACEDIFF_EXEC_PIN=0 leaves the worker and its implementation processes where the kernel
# puts them (see _Pin).
PIN_ENV = "TRACEDIFF_EXEC_PIN"

Parser = Callable[[bytes], dict[str, Any]]
FastParser = Callable[[bytes], "dict[str, Any] | None"]


class ExternalFault(SchedulerFault):
    """An external implementation died, hung, spoke garbage or reported an error."""


def parse_command(text: str, example: str = "'exec:tracediff serve NAME'") -> list[str]:
    """The argv of an ``exec:`` spec; raises ImplementationError when it cannot run."""
    command = text[len(PREFIX) :].strip() if text.startswith(PREFIX) else text.strip()
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ImplementationError(
            f"implementation {text!r}: cannot split the command: {exc}"
        ) from None
    if not argv:
        raise ImplementationError(
            f"implementation {text!r}: give a command after 'exec:', e.g. {example}"
        )
    if shutil.which(argv[0]) is None:
        raise ImplementationError(
            f"implementation {text!r}: command {argv[0]!r} not found (not on PATH or not "
            "executable); give its path"
        )
    return argv


def _reply_timeout() -> float:
    try:
        seconds = float(os.environ.get("TRACEDIFF_EXEC_REPLY_S", REPLY_TIMEOUT_S))
    except ValueError:
        return REPLY_TIMEOUT_S
    return seconds if 0 < seconds <= 1e6 else REPLY_TIMEOUT_S  # nan too: refused by impls.py


class _StderrTail:
    """The last STDERR_KEEP bytes a process wrote to stderr, read by a daemon thread."""

    def __init__(self, stream: Any) -> None:
        self._data = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(stream,), daemon=True)
        self._thread.start()

    def _pump(self, stream: Any) -> None:
        try:
            with contextlib.suppress(OSError, ValueError):
                while chunk := os.read(stream.fileno(), 65536):
                    with self._lock:
                        self._data += chunk
                        if len(self._data) > STDERR_KEEP:
                            cut = len(self._data) - STDERR_KEEP
                            del self._data[:cut]
                            self._dropped += cut
        finally:
            stream.close()  # at end of file: the process (and any child) closed it

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def text(self, settle_s: float = 0.0) -> str:
        if settle_s:
            self._thread.join(settle_s)  # a dying process's last words
        with self._lock:
            data, dropped = bytes(self._data), self._dropped
        if not data:
            return ""
        body = data.decode("utf-8", "replace").rstrip()
        head = f"stderr (last {len(data)} bytes, {dropped} before cut):" if dropped else "stderr:"
        return f"{head}\n{body}"


@dataclass
class Ahead:
    """The replies still due to one request sent ahead: ``left`` of them at most (a
    request the layout answers with several replies, like specdec's ``plan`` with a
    ``count``); ``ends``, when given, says of a reply that no more follow it."""

    request: str
    left: int = 1
    ends: Callable[[dict[str, Any]], bool] | None = None


class _Pin:
    """One CPU for this worker and its implementation processes, while any is running.

    The harness and the implementation take turns (a step's requests, then its replies):
    only one of them runs at a time. On different CPUs every turn is a wake-up of an idle
    CPU, which on a virtual machine costs more than the turn's work (tracediff's quick
    golden check through the Rust port: about twice the time). So the first implementation
    process a worker starts pins the worker to the CPU it is on, if that CPU is not claimed
    by another tracediff worker, else to the first unclaimed CPU it may use, and the process
    inherits the pin. A claim is an abstract Unix socket named after the CPU, released by
    the kernel when its process ends: two workers of ``-j 2`` take a CPU each. With no CPU
    left to claim, on one allowed CPU, off Linux or with ``TRACEDIFF_EXEC_PIN=0`` nothing
    is pinned. The worker's own CPU set comes back when its last process is closed; a
    forked child starts from it too.
    """

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.saved: set[int] | None = None  # the CPUs this process may use unpinned
        self.claim: socket.socket | None = None

    def take(self) -> None:
        if self.pid != os.getpid():
            self.forked()
        if self.saved is not None or os.environ.get(PIN_ENV, "1") == "0":
            return
        if not hasattr(os, "sched_setaffinity") or not hasattr(socket, "AF_UNIX"):
            return
        try:
            allowed = os.sched_getaffinity(0)
            if len(allowed) < 2:
                return
            here = _current_cpu()
            order = ([here] if here in allowed else []) + sorted(allowed - {here})
            for cpu in order:
                claim = _claim(cpu)
                if claim is not None:
                    os.sched_setaffinity(0, {cpu})
                    self.saved, self.claim = allowed, claim
                    return
        except OSError:
            return

    def release(self) -> None:
        if self.pid != os.getpid():
            self.forked()
        if self.saved is None:
            return
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, self.saved)
        self._drop()

    def forked(self) -> None:
        """In a child forked while pinned: the parent's CPU set back, not its claim."""
        self.pid = os.getpid()
        if self.saved is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self.saved)
        self._drop()

    def _drop(self) -> None:
        if self.claim is not None:
            self.claim.close()
        self.saved, self.claim = None, None


def _current_cpu() -> int:
    """The CPU this process runs on (field 39 of /proc/self/stat); -1 when unknown."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            return int(stat.read().rsplit(b")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return -1


def _claim(cpu: int) -> socket.socket | None:
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(f"\0tracediff-exec-cpu-{cpu}")
    except OSError:
        claim.close()
        return None
    return claim


_PIN = _Pin()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PIN.forked)


# The last hello of each command this process started (its probe's, before a run): what a
# fingerprint reads of a server's environment (tracediff.running.fingerprint).
HELLOS: dict[tuple[str, ...], dict[str, Any]] = {}


def served_environment(argv: list[str]) -> dict[str, Any] | None:
    """What the server of ``argv`` said of its environment in its hello (its tracediff
    and package versions), None when this process never started it."""
    hello = HELLOS.get(tuple(argv))
    if hello is None:
        return None
    return {"tracediff": hello.get("tracediff"), "packages": hello.get("packages")}


class ExternalProcess:
    """One running implementation process and its pipes."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        hello: Mapping[str, Any],
        versions: Collection[int],
        *,
        parser: Parser = parse,
        fast_parser: FastParser | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Start ``argv`` and exchange the hello: ``hello`` is the request (its
        ``versions`` are offered), ``versions`` what the reply's ``version`` may be.
        ``parser`` decodes every reply; ``fast_parser``, when the layout has one, a reply
        whose decision keeps its bytes (:attr:`keep_bytes`)."""
        self.name = name
        self.argv = argv
        self.owner = os.getpid()  # a forked child inherits the object, not the process
        self.broken = False
        self.capabilities: frozenset[str] = frozenset()
        self.version = 0
        self.hello: dict[str, Any] = {}
        self._parser = parser
        self._fast_parser = fast_parser
        self._buffer = bytearray()
        self._ahead: deque[Ahead] = deque()  # replies due to requests sent ahead, in order
        # the reply type whose decision is parsed keeping its bytes (the layout's
        # keep_decision_bytes), "" for none
        self.keep_bytes = ""
        # the scenario this process serves (profile:seed), since its last reset: a reply
        # too many that the next reset reads is most likely that scenario's last one's
        self.scenario: str | None = None
        _PIN.take()  # before the start: the process inherits the pin
        try:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                close_fds=True,
                env=None if env is None else dict(env),
            )
        except OSError as exc:
            _unpin_if_idle()
            reason = exc.strerror or exc
            raise ExternalFault(f"{name}: cannot start {argv[0]!r}: {reason}") from None
        assert self.popen.stdin and self.popen.stdout and self.popen.stderr
        self._in = self.popen.stdin.fileno()
        self._out = self.popen.stdout.fileno()
        # our ends only (the process's ends are other file descriptions): see _send, _read
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        # poll, not select: no FD_SETSIZE limit on the descriptor numbers
        self._writable = select.poll()
        self._writable.register(self._in, select.POLLOUT)
        self._readable = select.poll()
        self._readable.register(self._out, select.POLLIN)
        self._both = select.poll()
        self._both.register(self._in, select.POLLOUT)
        self._both.register(self._out, select.POLLIN)
        self.stderr = _StderrTail(self.popen.stderr)
        _LIVE.add(self)
        offered = sorted(versions, reverse=True)
        reply = self.request(dict(hello), HELLO)
        version = reply.get("version")
        if version not in versions:
            self.fail(
                f"speaks protocol version {version!r}; this tracediff speaks "
                f"{offered} (see docs/protocol.md)"
            )
        self.version = int(version or 0)
        caps = reply.get("capabilities", [])
        if not isinstance(caps, list) or not all(isinstance(c, str) for c in caps):
            self.fail(
                f"sent a hello whose 'capabilities' is {bounded(repr(caps), 80)}, expected a "
                "list of names (docs/protocol.md)"
            )
        self.capabilities = frozenset(caps)
        self.hello = reply
        HELLOS[tuple(argv)] = reply

    @property
    def alive(self) -> bool:
        return not self.broken and self.popen.poll() is None

    # -- one request, one reply ---------------------------------------------------------
    def request(
        self, message: dict[str, Any], expect: str, what: str | None = None, stray: str = ""
    ) -> dict[str, Any]:
        """Send ``message`` and return the reply of type ``expect``; ``what`` names the
        request in findings (default: its type, ``the 'plan' request``); ``stray`` says,
        after a reply of another type, what that reply is (:meth:`reset`).

        Anything else (death, garbage, a reply of another type, no reply in time) raises
        ExternalFault and kills the process; an ``error`` reply raises ExternalFault with the
        implementation's text and leaves the process for the next ``reset``. Whatever
        interrupts the wait (the scenario's time limit, Ctrl-C) kills it too: its state is
        unknown from then on. Replies still due to requests sent ahead are read and dropped
        first.
        """
        if self._ahead:
            self.settle(quiet=False)
        if what is None:
            what = f"the {message['type']!r} request"
        try:
            self._send(frame(message), what)
        except BaseException:
            self.kill()
            raise
        return self._answer(what, expect, stray)

    def reset(self, message: dict[str, Any], scenario: str) -> dict[str, Any]:
        """Send the ``reset`` of ``scenario`` (its label, ``quick:7``) and return its ``ok``.

        A reset is answered by ``ok`` (or ``error``) and nothing else, so any other reply,
        or a second message right behind the ``ok``, is one the process owed to no request:
        a reply too many it sent only once the reset arrived, most likely to the last
        request of the scenario it served before (whose end found nothing unasked yet). That
        is the process's fault (ExternalFault, naming it), reported with both scenarios, and
        not as the reset scenario's own: the reply is not its doing."""
        before, self.scenario = self.scenario, scenario
        what = f"the 'reset' of scenario {scenario}"
        if before is None:
            cause = "a reply too many: no reply was owed (this process's first scenario)"
        else:
            cause = (
                f"{STRAY_BEFORE_RESET} {before}, which this process served before (it came "
                f"after that scenario's last reply), not anything of scenario {scenario}'s"
            )
        stray = f": {cause}"
        reply = self.request(message, OK, what, stray=stray)
        sent = self.unasked()  # in the same write as the 'ok', or right behind it
        if sent is not None:
            self.fail(f"sent {sent} with its 'ok' to {what}{stray}")
        return reply

    # -- requests sent ahead (version 2) ------------------------------------------------
    def post(self, messages: list[dict[str, Any]], ahead: list[Ahead]) -> None:
        """Write ``messages`` at once; their replies are read later by :meth:`take`, in
        order (``ahead`` says, per message, what its replies will be)."""
        what = f"the {messages[0]['type']!r} request"
        if self._ahead:
            self.settle(quiet=False)
        try:
            self._send(b"".join(map(frame, messages)), what)
        except BaseException:
            self.kill()
            raise
        self._ahead.extend(ahead)

    def take(self, request: str, expect: str) -> dict[str, Any] | None:
        """The next reply to a request sent ahead, if that request is of type ``request``;
        None when nothing of that type was sent ahead (then the caller sends it itself). A
        reply its :class:`Ahead` ``ends`` ends the replies due to that request."""
        if not self._ahead or self._ahead[0].request != request:
            if self._ahead:
                self.settle(quiet=False)  # calls that were not announced: start afresh
            return None
        head = self._ahead[0]
        head.left -= 1
        if head.left <= 0:
            self._ahead.popleft()
        try:
            reply = self._answer(f"the {request!r} request", expect)
        except ExternalFault:
            if head.left > 0:  # an error in place of a plan ends its count too
                self._ahead.popleft()
            raise
        if head.left > 0 and head.ends is not None and head.ends(reply):
            self._ahead.popleft()
        return reply

    def settle(self, *, quiet: bool = True) -> bool:
        """Read and drop the replies still due (a scenario stopped part-way through a step):
        True when the process is ready for its next request. ``quiet``: a failure kills it
        and answers False instead of raising."""
        try:
            while self._ahead:
                head = self._ahead[0]
                head.left -= 1
                if head.left <= 0:
                    self._ahead.popleft()
                what = f"the {head.request!r} request"
                reply = self._receive(what)
                if head.left > 0 and (
                    reply["type"] != head.request or (head.ends is not None and head.ends(reply))
                ):
                    self._ahead.popleft()
        except ExternalFault:
            if not quiet:
                raise
            return False
        except BaseException:
            self.kill()
            raise
        return True

    def unasked(self) -> str | None:
        """What the process sent that no request asked for, once every reply due was read
        (None when nothing): a reply too many, which is the fault of the scenario that sent
        it, not of the next one that would read it. One poll with no wait: the bytes of a
        reply too many sent with, or right after, the last one due."""
        if self._ahead or self.broken:
            return None
        if self._readable.poll(0):
            chunk = self._read()
            if not chunk:
                return None  # it ended (or nothing after all): the next request finds out
            self._buffer += chunk
        buffer = self._buffer
        if not buffer:
            return None
        if len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
            if size <= MAX_MESSAGE_BYTES and len(buffer) >= 4 + size:
                try:
                    kind = self._parser(bytes(buffer[4 : 4 + size]))["type"]
                except ProtocolError:
                    pass
                else:
                    return f"a {bounded(repr(kind), 80)} message"
        return f"{len(buffer)} bytes"

    def check_unasked(self, when: str) -> None:
        """Raise ExternalFault (and kill the process) when it sent something unasked
        (:meth:`unasked`); ``when`` says after what, e.g. ``after the scenario's last reply``."""
        sent = self.unasked()
        if sent is not None:
            self.fail(f"sent {sent} {when}, with no request to answer (a reply too many)")

    def _answer(self, what: str, expect: str, stray: str = "") -> dict[str, Any]:
        try:
            reply = self._receive(what, keep_bytes=expect == self.keep_bytes)
        except BaseException:
            self.kill()
            raise
        kind = reply["type"]
        if kind == expect:
            return reply
        if kind == ERROR:
            # kept bounded, as stderr is: a hostile reply of 60 MB costs nothing downstream
            text = bounded(str(reply.get("message")))
            raise ExternalFault(
                self._with_stderr(f"{self.name} reported an error on {what}: {text}")
            )
        self.fail(f"answered {what} with a {kind!r} message, expected {expect!r}{stray}")

    def fail(self, what: str) -> NoReturn:
        self.kill()
        raise ExternalFault(self._with_stderr(f"{self.name} {what}"))

    def _send(self, data: bytes, what: str) -> None:
        # Both pipes are non-blocking: a write takes what the pipe holds, and only a full
        # pipe costs a poll (which also takes replies already there, so that a process
        # blocked on a full stdout never waits for us while we wait for it to read).
        view = memoryview(data)
        deadline = 0.0
        while True:
            try:
                view = view[os.write(self._in, view) :]
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                self.fail(self._death(f"before reading {what}"))
            if not view:
                return
            if not deadline:
                deadline = time.monotonic() + _reply_timeout()
            left = deadline - time.monotonic()
            ready = dict(self._both.poll(max(int(left * 1000), 0)))
            if not ready:
                self.fail(f"did not read {what} within {_reply_timeout():g} s")
            if ready.get(self._out, 0) & (select.POLLIN | select.POLLHUP):
                chunk = self._read()
                if chunk is not None and not chunk:
                    self.fail(self._death(f"before reading {what}"))
                self._buffer += chunk or b""

    def _read(self, size: int = 65536) -> bytes | None:
        """What stdout holds (b"" at its end), or None when it holds nothing yet."""
        try:
            return os.read(self._out, size)
        except BlockingIOError:
            return None

    def _receive(self, what: str, keep_bytes: bool = False) -> dict[str, Any]:
        # A reply already read (the replies to a step come in one chunk): no clock, no poll.
        buffer = self._buffer
        if len(buffer) >= 4:
            need = 4 + int.from_bytes(buffer[:4], "big")
            if need - 4 <= MAX_MESSAGE_BYTES and len(buffer) >= need:
                payload = bytes(buffer[4:need])
                del buffer[:need]
                return self._parse(payload, what, keep_bytes)
        return self._wait_for_reply(what, keep_bytes)

    def _parse(self, payload: bytes, what: str, keep_bytes: bool) -> dict[str, Any]:
        if keep_bytes:
            reply = self._fast_parser(payload) if self._fast_parser is not None else None
            if reply is not None:
                return reply
        try:
            return self._parser(payload)
        except ProtocolError as exc:
            self.fail(f"spoke garbage in reply to {what}: {exc}")

    def _wait_for_reply(self, what: str, keep_bytes: bool = False) -> dict[str, Any]:
        deadline = 0.0  # set on the first wait: a reply already in the pipe needs no clock
        need = 4
        length = -1
        while True:
            if length < 0 and len(self._buffer) >= 4:
                try:
                    length = message_length(bytes(self._buffer[:4]))
                except ProtocolError as exc:
                    self.fail(f"spoke garbage in reply to {what}: {exc}")
                need = 4 + length
            if len(self._buffer) >= need and length >= 0:
                payload = bytes(self._buffer[4:need])
                del self._buffer[:need]
                return self._parse(payload, what, keep_bytes)
            chunk = self._read(max(65536, need - len(self._buffer)))
            if chunk:
                self._buffer += chunk
                continue
            if chunk is not None:
                partial = f" after {len(self._buffer)} bytes of a reply" if self._buffer else ""
                self.fail(self._death(f"before answering {what}{partial}"))
            if not deadline:
                deadline = time.monotonic() + _reply_timeout()
            left = deadline - time.monotonic()
            # in slices: a server that exited while a child of its own still holds its stdout
            # never gives an end of file, and is reported as exited, not as a hang
            ready = self._readable.poll(max(int(min(left, EXIT_CHECK_S) * 1000), 0))
            if not ready:
                if self.popen.poll() is not None:
                    partial = f" after {len(self._buffer)} bytes of a reply" if self._buffer else ""
                    self.fail(self._death(f"before answering {what}{partial}"))
                if time.monotonic() >= deadline:
                    self.fail(
                        f"did not answer {what} within {_reply_timeout():g} s (a hang, or a "
                        "reply still in its stdout buffer: flush after each message)"
                    )

    def _death(self, when: str) -> str:
        try:
            code = self.popen.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return f"closed its stdout {when} (still running)"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name} {when}"
        return f"exited with status {code} {when}"

    def _with_stderr(self, text: str) -> str:
        tail = self.stderr.text(settle_s=0.2 if self.popen.poll() is not None else 0.0)
        return f"{text}\n{tail}" if tail else text

    # -- ending -------------------------------------------------------------------------
    def kill(self) -> None:
        self.broken = True
        with contextlib.suppress(OSError):
            self.popen.kill()
        with contextlib.suppress(Exception):
            self.popen.wait(timeout=_SHUTDOWN_WAIT_S)
        self._close_pipes()
        self.stderr.join(_SHUTDOWN_WAIT_S)

    def close(self) -> None:
        """Ask it to shut down, then close its stdin; kill it if it lingers."""
        if self.popen.poll() is None and not self.broken:
            with contextlib.suppress(OSError, ProtocolError):
                os.write(self._in, frame({"type": SHUTDOWN}))
        self._close_pipes()
        try:
            self.popen.wait(timeout=_SHUTDOWN_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        self.broken = True
        self.stderr.join(_SHUTDOWN_WAIT_S)

    def _close_pipes(self) -> None:
        _LIVE.discard(self)
        for stream in (self.popen.stdin, self.popen.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        _unpin_if_idle()


_LIVE: set[ExternalProcess] = set()


def _unpin_if_idle() -> None:
    """The worker's CPU set back once none of its implementation processes is left."""
    me = os.getpid()
    if not any(process.owner == me for process in _LIVE):
        _PIN.release()


def live_pids() -> frozenset[int]:
    """The implementation processes this process keeps between scenarios (by design, not
    leaked: a worker's clean-up of its children must spare them)."""
    me = os.getpid()
    return frozenset(p.popen.pid for p in _LIVE if p.owner == me and p.popen.poll() is None)


@atexit.register
def _close_all() -> None:
    me = os.getpid()
    for process in list(_LIVE):
        if process.owner == me:  # not a forked parent's
            process.close()


def scenario_label(scenario: Any) -> str:
    """``profile:seed``, how findings name a scenario (any model's: both are duck-typed)."""
    return f"{getattr(scenario, 'profile', '?')}:{getattr(scenario, 'seed', '?')}"


def check_versions(process: ExternalProcess, strict: bool) -> None:
    """A server whose tracediff is another version than this one: refused when ``strict``
    (a server tracediff started itself, whose scenarios and records must be this
    version's), else left to the protocol version."""
    theirs = process.hello.get("tracediff")
    if strict and theirs != __version__:
        process.close()
        raise ExternalFault(
            f"{process.name}: the server runs tracediff {theirs} and this is tracediff "
            f"{__version__}; install tracediff {__version__} where it runs (e.g. pip install "
            f"'tracediff=={__version__}' in that environment) or run this command with "
            f"tracediff {theirs}"
        )


Starter = Callable[[], ExternalProcess]


class ProcessPool:
    """The processes of one implementation command in this process: taken for a scenario,
    given back when its adapter is collected, kept across scenarios while they live.

    An adapter is often collected late: a driver wrapper that refers to itself (a bound
    method kept on the instance) lives until Python's cycle collector runs, and with it the
    scenario's process. So before starting a process while some are still lent out,
    :meth:`take` runs the collector, youngest generation first (a fraction of a
    millisecond; a full collection some milliseconds), which hands back those whose
    scenario is over: a process start is a tenth of a second or more."""

    def __init__(self, start: Starter) -> None:
        self._start = start
        self._pid = os.getpid()
        self._idle: list[ExternalProcess] = []
        self._lent = 0  # taken and not given back yet (their adapters not collected)
        self.started = 0  # processes this pool started in this process (probes included)

    def take(self) -> ExternalProcess:
        """An idle process ready for its next ``reset``, else a new one."""
        if os.getpid() != self._pid:  # inherited through fork: those are the parent's
            self._pid, self._idle, self._lent, self.started = os.getpid(), [], 0, 0
        for generation in (None, 0, 1, 2):
            if generation is not None:
                if not self._lent:
                    break
                # adapters of scenarios that are over, kept alive by a reference cycle of
                # their owner's (tracediff's own wrappers keep none), give theirs back
                gc.collect(generation)
            while self._idle:
                process = self._idle.pop()
                # bytes unasked here are a scenario's before: not this one's to answer for
                if process.alive and process.settle() and process.unasked() is None:
                    self._lent += 1
                    return process
                process.kill()
        process = self._start()
        self.started += 1
        self._lent += 1
        return process

    def give_back(self, process: ExternalProcess) -> None:
        if os.getpid() != self._pid:
            return
        self._lent = max(self._lent - 1, 0)
        if process.alive:
            self._idle.append(process)

    def probe(self) -> ExternalProcess | None:
        """Start one process now, so that a command that cannot speak the protocol fails
        before a run starts; returns it for its hello, or None when an idle one already
        answered. In a worker process the probed process is kept for the worker's first
        scenario; elsewhere it is stopped after its hello: the process that checks is often
        the parent of workers that fork, and must not hold a process (and its stderr
        thread) they would inherit."""
        if any(process.alive for process in self._idle):
            return None
        try:
            process = self.take()
        except ExternalFault as exc:
            raise ImplementationError(str(exc).replace("\n", " | ")) from None
        if _in_worker():
            self.give_back(process)
        else:
            self._lent = max(self._lent - 1, 0)
            process.close()
        return process


def _in_worker() -> bool:
    """Whether this process is a worker (started by multiprocessing), which forks none."""
    import multiprocessing

    return multiprocessing.parent_process() is not None
