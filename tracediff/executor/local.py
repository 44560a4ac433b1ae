"""The local executor: isolated worker processes on this machine, watched by the parent.

Why not ``concurrent.futures.ProcessPoolExecutor``: when one of its workers dies (``os._exit``,
a segfault, the kernel's out-of-memory killer) the whole pool breaks, every pending future
fails with ``BrokenProcessPool`` and nothing says which task killed it; and a worker stuck
in C code (a deadlocked mutex, a regular expression backtracking forever) cannot be stopped
at all, since the in-process ``SIGALRM`` only interrupts Python bytecode. Here each worker
runs one task at a time from its own pipe, so the parent always knows which task a worker
is running and since when, and can kill and replace exactly that worker while the others
go on.

One task ahead. A worker that finished a task would otherwise wait for the parent to wake,
take the outcome and send the next task: on a virtual machine that is two wake-ups of an
idle CPU per task, about a millisecond, as much as a small scenario's whole run. So while
more tasks wait than there are workers, each busy worker is also sent its next task, which
sits in its pipe until it finishes the current one. That task has not started: its
deadline starts when the parent sees the one before it end, and if the worker dies, hangs
or is stopped first, it goes back to the queue untouched (never counted as an attempt).
Near the end of a run, and behind a task that runs again after its worker died, nothing is
sent ahead, so that the last tasks go to whichever worker frees up first; neither is a
payload larger than :data:`AHEAD_BYTES` (its write could block the parent on a busy pipe).

What a task may rely on, in the worker:

- ``SIGINT`` is ignored (the parent decides what Ctrl-C means); ``SIGTERM`` unwinds the task
  with :class:`WorkerStop` so that ``finally`` blocks run and atomic writers drop their
  temporary files.
- Each worker leads its own process group: whatever an implementation starts (a server, a
  ``sleep``) is killed with the worker's group when the worker is killed, dies, or the pool
  closes, so nothing an implementation spawns outlives tracediff (a process that leaves the
  group on purpose, with ``setsid``, is beyond reach).
- ``faulthandler`` writes a fatal signal's Python stack, and the stack the parent asks for
  with ``SIGUSR1`` just before it kills a hung worker, to a file the parent reads back: a
  finding gets a traceback even when the worker could not report anything itself.
- With ``memory_limit_mb``, ``RLIMIT_AS`` caps the worker's address space: allocations
  beyond it raise ``MemoryError`` in the task instead of exhausting the machine.

Workers are started by ``forkserver`` where there is one (a small, single-threaded server
process forks them: no inherited threads or locks of the parent, no parent memory counted
against the memory limit), else ``spawn``. A worker whose parent dies is killed by the
kernel (Linux ``PR_SET_PDEATHSIG``), so a hung worker never outlives tracediff. Workers
live as long as the pool: one pool serves a command's run and then its explanations.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from tracediff.errors import UsageError, WorkerStartError
from tracediff.executor.base import (
    ATTEMPTS,
    DIED,
    DONE,
    FAILED,
    KILLED,
    PROGRESS_SLOTS,
    Executor,
    Guard,
    Outcome,
    Task,
)
from tracediff.executor.call import HarnessSignal

# How long a hung worker gets to write its stack after SIGUSR1, and how long stopping
# workers get to exit on SIGTERM before they are killed.
STACK_WAIT_S = 0.5
STOP_WAIT_S = 1.0
# Below this much headroom over what a worker already uses, --memory-limit cannot work.
MEMORY_HEADROOM_MB = 32
TAMPERED = (
    "the implementation wrote to tracediff's worker channel (a message without the task's "
    "token): its worker was stopped; an implementation must not write to inherited "
    "descriptors"
)
# Tries to fork a worker, each after restarting a fork server that died under it.
START_ATTEMPTS = 4
# The exit status multiprocessing gives a forkserver worker whose status never came: the
# fork server that would have reported it is gone.
FORKSERVER_LOST = 255
# The largest task message sent ahead of a worker's current task: well inside a local
# socket's send buffer, so the write returns at once while the worker is busy.
AHEAD_BYTES = 64 * 1024


class WorkerStop(HarnessSignal):
    """Raised in a worker by SIGTERM: unwinds the task (not an ``Exception``, so that a
    task's own error handling does not swallow it)."""


@dataclass
class _Slot:
    process: BaseProcess
    conn: Connection
    progress: Any
    stack_path: Path
    name: str
    task: Task | None = None
    index: int | None = None
    payload: Any = None
    attempts: int = 0
    started: float = 0.0
    deadline: float | None = None
    server: int | None = None  # the pid of the fork server that forked it
    token: int = 0  # the current task's: every message about it must carry it
    deadline_s: float | None = None  # the run's limit per task (for the task sent ahead)
    ahead: _Ahead | None = None  # the next task, sent and waiting in the worker's pipe


@dataclass(frozen=True)
class _Ahead:
    task: Task
    index: int
    payload: Any
    token: int


class LocalPool(Executor):
    """Tasks in isolated worker processes of this machine; see the module docstring."""

    name = "local"

    def __init__(self, jobs: int, *, memory_limit_mb: int | None = None) -> None:
        self._jobs = max(1, jobs)
        self._memory_limit_mb = memory_limit_mb
        self._context = _context()
        _start_fork_server(self._context)
        self._slots: list[_Slot] = []
        self._stack_dir: Path | None = None
        self._started = 0

    @property
    def workers(self) -> int:
        return self._jobs

    def stream(
        self,
        task: Task,
        items: Iterable[tuple[int, Any]],
        on_outcome: Callable[[Outcome], None],
        *,
        deadline_s: float | None = None,
        guard: Guard = contextlib.nullcontext,
    ) -> None:
        source = iter(items)
        retry: deque[tuple[int, Any, int]] = deque()
        # drawn from ``items`` (or handed back unstarted) and not given to a worker yet:
        # (index, payload), each on its first attempt
        waiting: deque[tuple[int, Any]] = deque()
        exhausted = False

        def draw(wanted: int) -> None:
            nonlocal exhausted
            while len(waiting) < wanted and not exhausted:
                item = next(source, None)
                if item is None:
                    exhausted = True
                else:
                    waiting.append(item)

        try:
            while True:
                while retry or waiting or not exhausted:
                    busy = self._busy()
                    # A task whose worker died runs again *alone*: a worker can die of what
                    # another task did (one that kills the fork server takes every worker it
                    # forked with it), and only a death with nothing else running is the
                    # task's own.
                    if any(slot.attempts > 1 for slot in busy) or (retry and busy):
                        break
                    slot = self._idle_slot()
                    if slot is None:
                        break
                    if retry:
                        index, payload, attempts = retry.popleft()
                    else:
                        draw(1)
                        if not waiting:
                            break
                        (index, payload), attempts = waiting.popleft(), 1
                    self._assign(slot, task, index, payload, attempts, deadline_s)
                if not retry:
                    self._send_ahead(task, waiting, draw)
                if not self._busy():
                    break
                self._wait()
                with guard():
                    for outcome, again in self._collect(waiting):
                        if again is not None:
                            retry.append(again)
                        else:
                            on_outcome(outcome)
        except BaseException:
            self._shutdown(graceful=False)
            raise

    def close(self) -> None:
        self._shutdown(graceful=True)

    # -- parent side ---------------------------------------------------------------------
    def _busy(self) -> list[_Slot]:
        return [slot for slot in self._slots if slot.index is not None]

    def _idle_slot(self) -> _Slot | None:
        for slot in self._slots:
            if slot.index is None:
                return slot
        if len(self._slots) < self._jobs:
            slot = self._start_worker()
            self._slots.append(slot)
            return slot
        return None

    def _start_worker(self) -> _Slot:
        self._started += 1
        if self._stack_dir is None:
            self._stack_dir = Path(tempfile.mkdtemp(prefix="tracediff-workers-"))
        progress = self._context.RawArray("q", PROGRESS_SLOTS)
        stack_path = self._stack_dir / f"worker-{self._started}.stack"
        name = f"tracediff-worker-{self._started}"
        for attempt in range(1, START_ATTEMPTS + 1):
            parent_end, child_end = self._context.Pipe(duplex=True)
            process = self._context.Process(  # type: ignore[attr-defined]
                target=_worker_main,
                args=(child_end, progress, str(stack_path), self._memory_limit_mb, _here()),
                name=name,
                daemon=True,
            )
            try:
                process.start()
                break
            except (EOFError, OSError) as exc:
                # The fork server died (an implementation killed its worker's parent, or
                # the kernel did) while this worker was being forked: a plumbing failure,
                # never the command's outcome. Start a new server and try again.
                parent_end.close()
                child_end.close()
                if attempt == START_ATTEMPTS:
                    raise WorkerStartError(
                        f"cannot start a worker process ({_one_line(exc)}) after "
                        f"{START_ATTEMPTS} attempts; check the machine's process and file "
                        "limits (ulimit -u, ulimit -n)"
                    ) from exc
                _restart_fork_server()
                time.sleep(0.05 * attempt)
        child_end.close()
        slot = _Slot(process, parent_end, progress, stack_path, f"local-{self._started}")
        slot.server = _fork_server_pid()
        return slot

    def _assign(
        self,
        slot: _Slot,
        task: Task,
        index: int,
        payload: Any,
        attempts: int,
        deadline_s: float | None,
    ) -> None:
        slot.deadline_s = deadline_s
        _hold(slot, task, index, payload, attempts, _token())
        try:
            slot.conn.send((task, index, payload, slot.token))
        except OSError:
            pass  # the worker is gone; _collect reports it as died with this task

    def _send_ahead(
        self,
        task: Task,
        waiting: deque[tuple[int, Any]],
        draw: Callable[[int], None],
    ) -> None:
        """Send each busy worker its next task while more tasks wait than there are
        workers (see the module docstring, "One task ahead")."""
        busy = self._busy()
        if any(slot.attempts > 1 for slot in busy):
            return
        for slot in busy:
            if slot.ahead is not None:
                continue
            draw(self._jobs + 1)
            if len(waiting) <= self._jobs:
                return  # the last ones go to whichever worker frees up first
            index, payload = waiting[0]
            token = _token()
            data = ForkingPickler.dumps((task, index, payload, token))
            if len(data) > AHEAD_BYTES:
                return
            try:
                slot.conn.send_bytes(data)
            except OSError:
                return  # the worker is gone: _collect reports its current task
            waiting.popleft()
            slot.ahead = _Ahead(task, index, payload, token)

    def _wait(self) -> None:
        busy = self._busy()
        waitables: list[Any] = []
        for slot in busy:
            waitables += [slot.conn, slot.process.sentinel]
        deadlines = [slot.deadline for slot in busy if slot.deadline is not None]
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        mp_connection.wait(waitables, timeout)

    def _collect(
        self, waiting: deque[tuple[int, Any]]
    ) -> list[tuple[Outcome, tuple[int, Any, int] | None]]:
        """Outcomes of the tasks that ended, each with the task to run again (when its
        worker died and it has attempts left) or None. A task sent ahead to a worker that
        is discarded never started: it goes back to the front of ``waiting``."""
        ended: list[tuple[Outcome, tuple[int, Any, int] | None]] = []

        def discard(slot: _Slot) -> None:
            if slot.ahead is not None:
                waiting.appendleft((slot.ahead.index, slot.ahead.payload))
                slot.ahead = None
            self._discard(slot)

        for slot in list(self._slots):
            while slot.index is not None and _readable(slot.conn):
                try:
                    message = slot.conn.recv()
                except (EOFError, OSError):
                    break  # died mid-message: the sentinel check below reports it
                except Exception as exc:  # noqa: BLE001 - a result that cannot be unpickled
                    ended.append((self._release(slot, FAILED, detail=_one_line(exc)), None))
                    continue
                outcome = self._handle(slot, message)
                if outcome is not None:
                    ended.append((outcome, None))
                    if outcome.tampered:  # the channel cannot be trusted from here on
                        discard(slot)
                        break
            if slot not in self._slots:
                continue
            if not slot.process.is_alive():
                if slot.index is not None:
                    slot.process.join(STOP_WAIT_S)
                    again = (
                        (slot.index, slot.payload, slot.attempts + 1)
                        if slot.attempts < ATTEMPTS
                        else None
                    )
                    stack = _read_stack(slot.stack_path)
                    exitcode = slot.process.exitcode
                    detail = ""
                    if exitcode == FORKSERVER_LOST and _gone(slot.server, STOP_WAIT_S):
                        exitcode, detail = None, "its parent, the fork server, was killed"
                    died = self._release(slot, DIED, exitcode=exitcode, stack=stack, detail=detail)
                    ended.append((died, again))
                discard(slot)
            elif slot.deadline is not None and time.monotonic() >= slot.deadline:
                stack = _stop_hung(slot)
                ended.append((self._release(slot, KILLED, stack=stack), None))
                discard(slot)
        return ended

    def _handle(self, slot: _Slot, message: Any) -> Outcome | None:
        # Every message names the task's token, which only the worker's own loop holds: a
        # message without it was written by the task itself (an implementation writing to
        # the inherited channel), and is that scenario's finding, never obeyed.
        if not (isinstance(message, tuple) and len(message) >= 3 and message[1] == slot.token):
            return self._release(slot, FAILED, detail=TAMPERED, tampered=True)
        kind = message[0]
        try:
            if kind == "fatal":
                raise UsageError(str(message[2]))
            if kind == "extend":
                slot.deadline = time.monotonic() + float(message[2])
                return None
            if kind == DONE:
                return self._release(slot, DONE, value=message[3], leftovers=tuple(message[4]))
            if kind == FAILED:
                return self._release(slot, FAILED, detail=str(message[3]))
        except (IndexError, TypeError, ValueError):
            pass
        return self._release(slot, FAILED, detail=TAMPERED, tampered=True)

    def _release(self, slot: _Slot, kind: str, **fields: Any) -> Outcome:
        index = slot.index if slot.index is not None else -1
        outcome = Outcome(
            index=index,
            kind=kind,
            seconds=time.monotonic() - slot.started,
            progress=tuple(slot.progress[:]),
            worker=slot.name,
            attempts=slot.attempts,
            **fields,
        )
        slot.index = slot.payload = slot.task = None
        slot.deadline = None
        ahead = slot.ahead
        if ahead is not None and kind in (DONE, FAILED) and not outcome.tampered:
            # the worker goes on with the task sent ahead (otherwise the worker is about
            # to be discarded, and the caller hands that task back)
            slot.ahead = None
            _hold(slot, ahead.task, ahead.index, ahead.payload, 1, ahead.token)
        return outcome

    def _discard(self, slot: _Slot) -> None:
        _kill_group(slot.process)
        with contextlib.suppress(OSError):
            slot.conn.close()
        self._slots.remove(slot)

    def _shutdown(self, *, graceful: bool) -> None:
        slots, self._slots = self._slots, []
        for slot in slots:
            if graceful and slot.index is None:
                with contextlib.suppress(OSError):
                    slot.conn.send(None)
            else:
                with contextlib.suppress(OSError):
                    slot.process.terminate()
        stop_by = time.monotonic() + STOP_WAIT_S
        for slot in slots:
            slot.process.join(max(0.0, stop_by - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(STOP_WAIT_S)
            _kill_group(slot.process)  # what its tasks started, still running
            with contextlib.suppress(OSError):
                slot.conn.close()
        if self._stack_dir is not None:
            shutil.rmtree(self._stack_dir, ignore_errors=True)
            self._stack_dir = None


def _fork_server_pid() -> int | None:
    """The pid of the fork server this process started, if any (CPython internals)."""
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        pid = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)
        return pid if isinstance(pid, int) else None
    return None


def _gone(pid: int | None, wait_s: float = 0.0) -> bool:
    """Whether process ``pid`` has exited, or does within ``wait_s`` (a zombie counts: it is
    not reaped here, which would confuse CPython's own bookkeeping of its fork server). A
    process being killed closes its descriptors a moment before it becomes a zombie: a
    worker's sentinel can tell of the fork server's death before /proc does."""
    if pid is None:
        return False
    give_up = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= give_up:
            return False
        time.sleep(0.01)


def _restart_fork_server() -> None:
    """Forget a fork server that died (or no longer answers): the next start launches a new
    one. CPython's ``ensure_running`` only notices a server that has already been reaped; one
    killed a moment ago still looks alive to it, and every start would fail."""
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        server = getattr(forkserver, "_forkserver", None)  # CPython internals, best effort
        pid = getattr(server, "_forkserver_pid", None)
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # one that hangs is of no use either
        if server is not None:
            server._stop()


def _kill_group(process: BaseProcess) -> None:
    """SIGKILL the worker's process group (the worker made itself its leader)."""
    pid = process.pid
    if pid is None or not hasattr(os, "killpg"):
        return
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


def _context() -> BaseContext:
    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(_preload())
        return context
    return mp.get_context("spawn")


def _preload() -> list[str]:
    """What the fork server imports before it forks workers, so that a worker is forked
    with it instead of importing it on its first task: the run and digest primitives, what
    the loaded models name for their workers (tracediff.model.worker_modules). Not the
    command line: a worker imports the program's main script again, and tracediff's console
    script imports only tracediff.cli.entry, which loads the command line when called (a
    fork server that imported click, rich and the commands first was ready 0.05 s later, on
    the critical path of a short run). Only what runs scenarios: a module that imports
    deepdiff (the explanations) takes a worker's address space from about 30 MB to a
    gigabyte, past many a --memory-limit. The server starts once per process: what it
    lacks, a worker imports when it needs it."""
    from tracediff import model as models
    from tracediff.executor import preload

    # the models' modules are imported by tracediff.executor.preload, which keeps a failure
    # as the model's (exit 2 at the first task) instead of a dead server with a traceback
    os.environ[preload.ENV] = preload.encode(models.worker_modules())
    return ["tracediff.running.runner", "tracediff.golden.digest", "tracediff.executor.preload"]


def warm_up() -> None:
    """Start the fork server now, with what workers need (:func:`_preload`), before any pool
    opens: a command that will run scenarios calls it first, so that the server's imports
    overlap the command's own start. Nothing happens where workers are spawned instead."""
    _start_fork_server(_context())


def _start_fork_server(context: BaseContext) -> None:
    """Start the fork server now, not at the first worker: it imports its modules while
    this process goes on (generating the scenarios, reading manifests). Best effort: a
    server that cannot start is started, or reported, by the first worker's start."""
    if context.get_start_method() != "forkserver":
        return
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        forkserver.ensure_running()


def _hold(slot: _Slot, task: Task, index: int, payload: Any, attempts: int, token: int) -> None:
    """The slot's worker runs this task from now on, as far as the parent can tell: its
    seconds and its deadline (the slot's limit per task) count from here."""
    slot.task, slot.index, slot.payload, slot.attempts = task, index, payload, attempts
    slot.token = token
    slot.started = time.monotonic()
    slot.deadline = None if slot.deadline_s is None else slot.started + slot.deadline_s


def _token() -> int:
    """A task's token: odd, so never 0, and unguessable by the task itself."""
    return secrets.randbits(63) | 1


def _readable(conn: Connection) -> bool:
    try:
        return conn.poll()
    except (EOFError, OSError):
        return False


def _stop_hung(slot: _Slot) -> str:
    """Ask a hung worker for its Python stack (faulthandler answers even inside C code),
    then kill it."""
    pid = slot.process.pid
    if pid is not None and hasattr(signal, "SIGUSR1"):
        with contextlib.suppress(OSError):
            before = slot.stack_path.stat().st_size
            os.kill(pid, signal.SIGUSR1)
            _wait_for_growth(slot.stack_path, before)
    slot.process.kill()
    slot.process.join(STOP_WAIT_S)
    _kill_group(slot.process)
    return _read_stack(slot.stack_path)


def _wait_for_growth(path: Path, before: int) -> None:
    """Wait until the stack file has grown and then stopped growing, or STACK_WAIT_S."""
    give_up = time.monotonic() + STACK_WAIT_S
    last = before
    while time.monotonic() < give_up:
        time.sleep(0.02)
        size = path.stat().st_size
        if size > before and size == last:
            return
        last = size


def _read_stack(path: Path) -> str:
    """What faulthandler wrote, without the frames of the worker machinery under the task."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    machinery = (f"{os.sep}multiprocessing{os.sep}", f"{os.sep}tracediff{os.sep}executor{os.sep}")
    kept = [
        line
        for line in text.splitlines()
        if not (line.startswith('  File "') and any(part in line for part in machinery))
        and not line.startswith('  File "<string>"')
        and not line.startswith("Extension modules:")
    ]
    return "\n".join(kept).strip()


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _here() -> tuple[str | None, dict[str, str]]:
    """The working directory and environment this process has now, for a worker it starts.

    A fork server is started once per process and forks every worker from what *it* had
    when it started: a worker would otherwise run in the directory and with the variables of
    that moment. In one command they never change, but a program that drives tracediff
    through its API (or a test session) changes them between runs: a worker then looked
    names up in the model of an earlier ``$TRACEDIFF_MODEL`` (``reference`` found as
    another model's, its digests not the manifest's) and imported implementations from an
    earlier working directory."""
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # the directory was removed: the worker keeps the server's
        cwd = None
    return cwd, dict(os.environ)


# -- worker side ---------------------------------------------------------------------------
def _worker_main(
    conn: Connection,
    progress: Any,
    stack_path: str,
    memory_limit_mb: int | None,
    here: tuple[str | None, dict[str, str]] = (None, {}),
) -> None:
    with contextlib.suppress(OSError):
        os.setsid()  # lead a process group of its own: see _kill_group
    _take(here)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The pool may stop a worker that is still setting up (a short run closing): the stop
    # must unwind quietly from the first moment its handler is in place, or
    # multiprocessing prints "Process tracediff-worker-N: Traceback ... WorkerStop" on the
    # command's standard error.
    try:
        signal.signal(signal.SIGTERM, _raise_stop)
        _die_with_parent()
        stack_file = open(stack_path, "w", encoding="utf-8")  # open for the worker's lifetime
        faulthandler.enable(stack_file, all_threads=True)
        if hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1"):
            faulthandler.register(signal.SIGUSR1, stack_file, all_threads=True)
        problem = "" if memory_limit_mb is None else _limit_memory(memory_limit_mb)
        problem = problem or _preload_problem()
        _serve(conn, progress, problem)
    except WorkerStop:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second stop ends it, silently too
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def _preload_problem() -> str:
    """A model's worker module that failed to import in the fork server (read where the
    server imported it: a worker spawned without one has nothing preloaded)."""
    preload = sys.modules.get("tracediff.executor.preload")
    return str(getattr(preload, "PROBLEM", "")) if preload is not None else ""


def _take(here: tuple[str | None, dict[str, str]]) -> None:
    """Work where, and with the environment that, the process starting this worker has
    (:func:`_here`)."""
    cwd, environ = here
    if environ:
        os.environ.clear()
        os.environ.update(environ)
    if cwd is not None:
        with contextlib.suppress(OSError):
            os.chdir(cwd)


def _serve(conn: Connection, shared: Any, problem: str = "") -> None:
    """Run tasks until told to stop. ``problem``: why this worker cannot work (answered to
    its first task, with that task's token, as every message is)."""
    progress = memoryview(shared).cast("B").cast("q")  # faster stores than the ctypes array
    token = 0

    def notify(seconds: float) -> None:
        conn.send(("extend", token, seconds))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        task, index, payload, token = message
        if problem:
            conn.send(("fatal", token, problem))
            return
        progress[0], progress[1] = -1, 0
        try:
            value = task(payload, progress, notify)
        except WorkerStop:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, worker goes on
            detail = "".join(traceback.format_exception(exc)).rstrip()
            conn.send((FAILED, token, index, detail))
            continue
        leftovers = _stop_children()
        try:
            conn.send((DONE, token, index, value, leftovers))
        except Exception as exc:  # noqa: BLE001 - a value that cannot be pickled
            detail = f"the task's result cannot be sent back: {_one_line(exc)}"
            conn.send((FAILED, token, index, detail))


def _stop_children() -> tuple[str, ...]:
    """Kill (and reap) what the task left running among this worker's children; returns
    them as "pid (name)". Linux only (``/proc/self/task/*/children``); elsewhere, and for
    grandchildren, the process-group kill when the worker ends is what stops them.

    Spared: the processes of ``exec:`` implementations, which a worker keeps between
    scenarios on purpose (:mod:`tracediff.process.pipes`)."""
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for thread in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError, ValueError):
                text = Path(f"/proc/self/task/{thread}/children").read_text()
                pids.update(int(pid) for pid in text.split())
    pipes = sys.modules.get("tracediff.process.pipes")  # not loaded: no process kept
    if pipes is not None:
        pids -= pipes.live_pids()
    found = []
    for pid in sorted(pids):
        name = "?"
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        found.append(f"{pid} ({name})")
    return tuple(found)


def _raise_stop(_signum: int, _frame: Any) -> None:
    raise WorkerStop()


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent dies, so that a hung worker cannot outlive
    tracediff (elsewhere the worker still exits at its next read from the closed pipe).

    The parent of a forkserver worker is the fork server, which exits when tracediff dies,
    but only once no process holds the write end of its "alive" pipe, and every worker is
    handed one (for starting processes of its own through the server, which workers do not
    do). A hung worker would keep the server alive and the server the worker: close it.
    """
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        from multiprocessing import forkserver

        server = getattr(forkserver, "_forkserver", None)  # CPython internals, best effort
        alive = getattr(server, "_forkserver_alive_fd", None)
        if alive is not None:
            os.close(alive)
            setattr(server, "_forkserver_alive_fd", None)  # noqa: B010 - a private attribute
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() == 1:  # the parent died before the request: nobody to work for
            os._exit(1)


def _limit_memory(megabytes: int) -> str:
    """Cap the address space; returns why it cannot work, or "" when it is in place."""
    try:
        import resource
    except ImportError:
        return "--memory-limit is not supported on this platform"
    in_use = _address_space_mb()
    if in_use is not None and megabytes < in_use + MEMORY_HEADROOM_MB:
        return (
            f"--memory-limit {megabytes} MB is below what a worker needs to start "
            f"(about {in_use} MB of address space); give at least "
            f"{in_use + MEMORY_HEADROOM_MB} MB"
        )
    limit = megabytes * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ValueError, OSError) as exc:
        return f"--memory-limit {megabytes} MB cannot be set: {exc}"
    return ""


def _address_space_mb() -> int | None:
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
