"""The limits a task runs under: one value for the time limit, the memory cap and the grace.

``timeout_s`` is enforced in the worker (``SIGALRM``, :func:`~tracediff.executor.alarm.time_limit`)
and, for what that cannot reach (C code), by the parent, which kills the worker at
``kill_after_s``: the limit plus ``grace_s`` (or :func:`~tracediff.executor.alarm.grace` of
it). ``memory_limit_mb`` caps each worker process's address space.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracediff.executor.alarm import grace


@dataclass(frozen=True)
class Limits:
    """Per-task limits; the default is none at all."""

    timeout_s: float | None = None  # per task (a scenario: all implementations together)
    memory_limit_mb: int | None = None  # address-space cap of each worker process
    grace_s: float | None = None  # past timeout_s, the parent kills a hung worker (None: auto)

    @property
    def isolated(self) -> bool:
        """Whether tasks must run in worker processes even with one job: a time or memory
        limit needs a process the parent can kill or cap."""
        return self.timeout_s is not None or self.memory_limit_mb is not None

    @property
    def kill_after_s(self) -> float | None:
        """Wall time after which the parent kills a worker still on one task."""
        if self.timeout_s is None:
            return None
        return self.timeout_s + (
            self.grace_s if self.grace_s is not None else grace(self.timeout_s)
        )
