"""Isolated worker processes with a parent-side watchdog.

Why not ``concurrent.futures.ProcessPoolExecutor``: when one of its workers dies (``os._exit``,
a segfault, the kernel's OOM killer) the whole pool breaks, every pending future fails with
``BrokenProcessPool`` and nothing says which task killed it; and a worker stuck in C code (a
deadlocked mutex, a regular expression backtracking forever) cannot be stopped at all, since
the in-process ``SIGALRM`` only interrupts Python bytecode. Here each worker is handed one task
at a time over its own pipe, so the parent always knows which task a worker holds and since
when, and can kill and replace exactly that worker while the others go on.

What a task may rely on, in the worker:

- ``SIGINT`` is ignored (the parent decides what Ctrl-C means); ``SIGTERM`` unwinds the task
  with :class:`WorkerStop` so that ``finally`` blocks run and atomic writers drop their
  temporary files.
- ``faulthandler`` writes a fatal signal's Python stack, and the stack the parent asks for
  with ``SIGUSR1`` just before it kills a hung worker, to a file the parent reads back: a
  finding gets a traceback even when the worker could not report anything itself.
- ``progress`` is a small shared integer array the task may update so that the parent can
  say where a worker was when it had to be killed (the runner stores the implementation
  index and plan number there).
- ``notify(seconds)`` moves the task's deadline to ``seconds`` from now (for work after the
  timed part, such as writing artifacts).
- With ``memory_limit_mb``, ``RLIMIT_AS`` caps the worker's address space: allocations
  beyond it raise ``MemoryError`` in the task instead of exhausting the machine.

Workers are started by ``forkserver`` where there is one (a small, single-threaded server
process forks them: no inherited threads or locks of the parent, no parent memory counted
against the memory limit), else ``spawn``. A worker whose parent dies is killed by the
kernel (Linux ``PR_SET_PDEATHSIG``), so a hung worker never outlives tracediff.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import multiprocessing as mp
import multiprocessing.connection as mp_connection
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from tracediff.errors import UsageError

# What a worker runs: function(payload, progress, notify) -> picklable result.
Task = Callable[[Any, Any, Callable[[float], None]], Any]

DONE, KILLED, DIED, FAILED = "done", "killed", "died", "failed"
PROGRESS_SLOTS = 2
# How long a hung worker gets to write its stack after SIGUSR1, and how long stopping
# workers get to exit on SIGTERM before they are killed.
STACK_WAIT_S = 0.5
STOP_WAIT_S = 1.0
# Below this much headroom over what a worker already uses, --memory-limit cannot work.
MEMORY_HEADROOM_MB = 32
_PRELOAD = ["tracediff.runner"]


class WorkerStop(BaseException):
    """Raised in a worker by SIGTERM: unwinds the task (not an ``Exception``, so that a
    task's own error handling does not swallow it)."""


@dataclass(frozen=True)
class Outcome:
    """How one task ended. ``kind`` is ``done`` (``value`` holds the task's result),
    ``killed`` (past its deadline), ``died`` (the worker exited or was killed by a
    signal while running it) or ``failed`` (the task raised; ``detail`` has the traceback)."""

    index: int
    kind: str
    value: Any = None
    seconds: float = 0.0
    exitcode: int | None = None
    progress: tuple[int, ...] = ()
    stack: str = ""
    detail: str = ""

    def death(self) -> str:
        """How the worker died, in words."""
        code = self.exitcode
        if code is None:
            return "the worker vanished"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the worker process was killed by {name}"
        return f"the worker process exited with status {code}"


@dataclass
class _Slot:
    process: BaseProcess
    conn: Connection
    progress: Any
    stack_path: Path
    index: int | None = None
    started: float = 0.0
    deadline: float | None = None


class WorkerPool:
    """Run tasks in isolated worker processes; see the module docstring.

    ``deadline_s`` is the wall time a task may take before its worker is killed and the task
    reported as ``timeout`` (``None``: no limit). The pool is used once: :meth:`run`.
    """

    def __init__(
        self,
        task: Task,
        jobs: int,
        *,
        deadline_s: float | None = None,
        memory_limit_mb: int | None = None,
    ) -> None:
        self._task = task
        self._jobs = max(1, jobs)
        self._deadline_s = deadline_s
        self._memory_limit_mb = memory_limit_mb
        self._context = _context()
        self._slots: list[_Slot] = []
        self._stack_dir = Path(tempfile.mkdtemp(prefix="tracediff-workers-"))
        self._started = 0

    def run(
        self,
        tasks: Iterable[tuple[int, Any]],
        on_outcome: Callable[[Outcome], None],
        guard: Callable[[], AbstractContextManager[Any]] = contextlib.nullcontext,
    ) -> None:
        """Run every ``(index, payload)``; call ``on_outcome`` as each ends, in the parent.

        Returns when all have ended. Any exception (an interrupt, one from ``on_outcome``)
        stops and kills the workers before it propagates; tasks in flight are lost. Results
        are received and handed to ``on_outcome`` inside ``guard()`` (a caller's way to hold
        off interrupts, so that nothing is lost between the pipe and the caller).
        """
        pending = deque(tasks)
        clean = False
        try:
            while pending or self._busy():
                while pending:
                    slot = self._idle_slot()
                    if slot is None:
                        break
                    index, payload = pending.popleft()
                    self._assign(slot, index, payload)
                self._wait()
                with guard():
                    self._collect(on_outcome)
            clean = True
        finally:
            self._shutdown(graceful=clean)

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
        parent_end, child_end = self._context.Pipe(duplex=True)
        progress = self._context.RawArray("q", PROGRESS_SLOTS)
        stack_path = self._stack_dir / f"worker-{self._started}.stack"
        process = self._context.Process(  # type: ignore[attr-defined]
            target=_worker_main,
            args=(child_end, self._task, progress, str(stack_path), self._memory_limit_mb),
            name=f"tracediff-worker-{self._started}",
            daemon=True,
        )
        process.start()
        child_end.close()
        return _Slot(process, parent_end, progress, stack_path)

    def _assign(self, slot: _Slot, index: int, payload: Any) -> None:
        slot.index = index
        slot.started = time.monotonic()
        slot.deadline = None if self._deadline_s is None else slot.started + self._deadline_s
        try:
            slot.conn.send((index, payload))
        except OSError:
            pass  # the worker is gone; _collect reports it as died with this task

    def _wait(self) -> None:
        busy = self._busy()
        waitables: list[Any] = []
        for slot in busy:
            waitables += [slot.conn, slot.process.sentinel]
        deadlines = [slot.deadline for slot in busy if slot.deadline is not None]
        timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
        mp_connection.wait(waitables, timeout)

    def _collect(self, on_outcome: Callable[[Outcome], None]) -> None:
        for slot in list(self._slots):
            while slot.index is not None and _readable(slot.conn):
                try:
                    message = slot.conn.recv()
                except (EOFError, OSError):
                    break  # died mid-message: the sentinel check below reports it
                except Exception as exc:  # noqa: BLE001 - a result that cannot be unpickled
                    on_outcome(self._release(slot, FAILED, detail=_one_line(exc)))
                    continue
                outcome = self._handle(slot, message)
                if outcome is not None:
                    on_outcome(outcome)
            if not slot.process.is_alive():
                if slot.index is not None:
                    slot.process.join(STOP_WAIT_S)
                    stack = _read_stack(slot.stack_path)
                    exitcode = slot.process.exitcode
                    on_outcome(self._release(slot, DIED, exitcode=exitcode, stack=stack))
                self._discard(slot)
            elif slot.deadline is not None and time.monotonic() >= slot.deadline:
                stack = _stop_hung(slot)
                on_outcome(self._release(slot, KILLED, stack=stack))
                self._discard(slot)

    def _handle(self, slot: _Slot, message: Any) -> Outcome | None:
        kind = message[0]
        if kind == "fatal":
            raise UsageError(message[1])
        if kind == "extend":
            slot.deadline = time.monotonic() + float(message[1])
            return None
        if kind == DONE:
            return self._release(slot, DONE, value=message[2])
        if kind == FAILED:
            return self._release(slot, FAILED, detail=message[2])
        return None

    def _release(self, slot: _Slot, kind: str, **fields: Any) -> Outcome:
        index = slot.index if slot.index is not None else -1
        outcome = Outcome(
            index=index,
            kind=kind,
            seconds=time.monotonic() - slot.started,
            progress=tuple(slot.progress[:]),
            **fields,
        )
        slot.index = None
        slot.deadline = None
        return outcome

    def _discard(self, slot: _Slot) -> None:
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
            with contextlib.suppress(OSError):
                slot.conn.close()
        shutil.rmtree(self._stack_dir, ignore_errors=True)


def _context() -> BaseContext:
    methods = mp.get_all_start_methods()
    if "forkserver" in methods:
        context = mp.get_context("forkserver")
        context.set_forkserver_preload(_PRELOAD)
        return context
    return mp.get_context("spawn")


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
    machinery = (f"{os.sep}multiprocessing{os.sep}", f"{os.sep}tracediff{os.sep}workers.py")
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


# -- worker side ---------------------------------------------------------------------------
def _worker_main(
    conn: Connection,
    task: Task,
    progress: Any,
    stack_path: str,
    memory_limit_mb: int | None,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _raise_stop)
    _die_with_parent()
    stack_file = open(stack_path, "w", encoding="utf-8")  # open for the worker's lifetime
    faulthandler.enable(stack_file, all_threads=True)
    if hasattr(faulthandler, "register") and hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, stack_file, all_threads=True)
    try:
        if memory_limit_mb is not None:
            problem = _limit_memory(memory_limit_mb)
            if problem:
                conn.send(("fatal", problem))
                return
        _serve(conn, task, progress)
    except WorkerStop:
        pass
    finally:
        with contextlib.suppress(OSError):
            conn.close()


def _serve(conn: Connection, task: Task, shared: Any) -> None:
    progress = memoryview(shared).cast("B").cast("q")  # faster stores than the ctypes array

    def notify(seconds: float) -> None:
        conn.send(("extend", seconds))

    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        index, payload = message
        progress[0], progress[1] = -1, 0
        try:
            value = task(payload, progress, notify)
        except WorkerStop:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, worker goes on
            conn.send((FAILED, index, "".join(traceback.format_exception(exc)).rstrip()))
            continue
        conn.send((DONE, index, value))


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
