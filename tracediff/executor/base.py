"""The executor interface: what every command that runs scenarios runs them on.

Modelled on :class:`concurrent.futures.Executor`: :meth:`Executor.map` hands back one
:class:`Outcome` per payload, in input order; :meth:`Executor.stream` reports each as it
ends (for progress bars, journals and stores). What differs from ``concurrent.futures`` is
what a task may do to its worker: hang in C code, exit, be killed by the kernel. So an
outcome is not a value or an exception but one of four kinds:

- ``done``: the task returned; ``value`` holds what it returned;
- ``killed``: the task was still running past its deadline and its worker was killed;
- ``died``: the worker exited or was killed by a signal while running it, **twice**: a
  task whose worker dies runs once more on a fresh worker (a machine lost, a worker killed
  by hand is not a finding), and only a task that kills a second worker is reported;
- ``failed``: the task raised; ``detail`` holds the traceback.

Callers turn those into findings (a scenario's ``timeout`` or ``error``). Implementations:
:class:`~tracediff.executor.local.LocalPool` (isolated worker processes on this machine),
:class:`~tracediff.executor.dask.DaskExecutor` (a Dask distributed cluster, each task run in
an isolated process on a Dask worker) and :class:`~tracediff.executor.inline.InlineExecutor`
(this process: the in-memory twin for library callers and tests; no isolation).

A *task* is a module-level function ``task(payload, progress, notify)``: ``progress`` is a
small shared integer array in an isolated worker (``None`` elsewhere) where the task may say
how far it got, so that a killed worker's outcome says where it was; ``notify(seconds)``
moves the task's deadline to ``seconds`` from now (for work after the timed part).
"""

from __future__ import annotations

import contextlib
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from tracediff.outcomes import TaskEnd

Notify = Callable[[float], None]  # a task's way to move its deadline: seconds from now
Task = Callable[[Any, Any, Notify], Any]
Guard = Callable[[], AbstractContextManager[Any]]

DONE, KILLED, DIED, FAILED = TaskEnd.DONE, TaskEnd.KILLED, TaskEnd.DIED, TaskEnd.FAILED
PROGRESS_SLOTS = 2
ATTEMPTS = 2  # a task is given to at most this many workers that die under it


@dataclass(frozen=True)
class Outcome:
    """How one task ended; see the module docstring for ``kind``."""

    index: int
    kind: str
    value: Any = None
    seconds: float = 0.0
    exitcode: int | None = None
    progress: tuple[int, ...] = ()
    stack: str = ""
    detail: str = ""
    worker: str = ""  # which worker ran it (for throughput per worker)
    attempts: int = 1  # workers it was given to
    leftovers: tuple[str, ...] = ()  # processes the task left running, killed: "pid (name)"
    tampered: bool = False  # the task wrote to the worker's channel to the parent

    def death(self) -> str:
        """How the (last) worker died, in words."""
        if self.detail and self.exitcode is None:
            return self.detail
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

    def failure(self, limit_s: float | None = None) -> str:
        """Why a task that is not ``done`` gave no value, in one line."""
        if self.kind == KILLED:
            limit = f"the {limit_s:g} s time limit" if limit_s else "its time limit"
            return f"it ran past {limit} and its worker was killed after {self.seconds:.1f} s"
        if self.kind == DIED:
            times = "twice" if self.attempts > 1 else "once"
            return f"its worker died {times} ({self.death()})"
        if self.kind == FAILED:
            last = self.detail.strip().splitlines()[-1] if self.detail.strip() else "failed"
            return f"the task raised: {last}"
        return "it finished"


class Executor(ABC):
    """Runs tasks; see the module docstring. Use as a context manager (or call
    :meth:`close`): an executor may hold worker processes or a cluster connection."""

    name = "executor"

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many tasks it runs at once (for sizing; a cluster may grow or shrink)."""

    @abstractmethod
    def stream(
        self,
        task: Task,
        items: Iterable[tuple[int, Any]],
        on_outcome: Callable[[Outcome], None],
        *,
        deadline_s: float | None = None,
        guard: Guard = contextlib.nullcontext,
    ) -> None:
        """Run ``task`` on every ``(index, payload)``; call ``on_outcome`` in this process as
        each ends, inside ``guard()`` (a caller's way to hold off interrupts while it records
        the outcome). ``deadline_s``: wall time after which a task's worker is killed.

        ``items`` may be a generator: it is drawn only as workers free up, so millions of
        tasks need not exist at once. Any exception (an interrupt, one from ``on_outcome``)
        stops the tasks in flight before it propagates.
        """

    def map(
        self,
        task: Task,
        payloads: Sequence[Any],
        *,
        deadline_s: float | None = None,
        on_outcome: Callable[[Outcome], None] | None = None,
        order: Sequence[int] | None = None,
    ) -> list[Outcome]:
        """One outcome per payload, in input order. ``order`` (indices) is the order in which
        they are started (e.g. the largest first, so that long tasks do not start last)."""
        found: dict[int, Outcome] = {}

        def keep(outcome: Outcome) -> None:
            found[outcome.index] = outcome
            if on_outcome is not None:
                on_outcome(outcome)

        indices = range(len(payloads)) if order is None else order
        self.stream(task, ((i, payloads[i]) for i in indices), keep, deadline_s=deadline_s)
        return [found[i] for i in range(len(payloads))]

    def close(self) -> None:  # noqa: B027 - executors without resources need not override
        """Release workers and connections."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
