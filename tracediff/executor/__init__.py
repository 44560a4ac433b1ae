"""One executor for every command that runs scenarios (see :mod:`.base`).

``--executor`` values: ``local`` (the default: isolated worker processes here, ``-j`` of
them), ``dask://HOST:PORT`` (a running Dask scheduler) and ``dask-local:N`` (a Dask
LocalCluster of N processes on this machine, started for the command).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from tracediff.errors import UsageError
from tracediff.executor.alarm import ScenarioTimeout, grace, time_limit
from tracediff.executor.base import DIED, DONE, FAILED, KILLED, Executor, Notify, Outcome, Task
from tracediff.executor.limits import Limits

__all__ = [
    "DIED",
    "DONE",
    "EXECUTORS",
    "FAILED",
    "KILLED",
    "Executor",
    "ExecutorFactory",
    "ExecutorSpec",
    "Limits",
    "Notify",
    "Outcome",
    "ScenarioTimeout",
    "Task",
    "grace",
    "open_executor",
    "parse_executor",
    "time_limit",
]

LOCAL, INLINE, DASK, DASK_LOCAL = "local", "inline", "dask", "dask-local"
_DASK_LOCAL = re.compile(r"^dask-local(?::(\d+))?$")
# a host name or IPv4 address, or an IPv6 address in brackets; then the port
_HOST_PORT = re.compile(r"(?P<host>[\w.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>\d{1,5})")
MAX_LOCAL_WORKERS = 1024


@dataclass(frozen=True)
class ExecutorSpec:
    """What ``--executor`` asked for: ``kind`` is local, inline, dask or dask-local."""

    kind: str = LOCAL
    address: str = ""  # dask: the scheduler's address
    workers: int = 0  # dask-local: how many worker processes
    text: str = LOCAL  # as the user typed it, for messages

    @property
    def distributed(self) -> bool:
        return self.kind in (DASK, DASK_LOCAL)


def parse_executor(text: str | None) -> ExecutorSpec:
    """An ``--executor`` value; UsageError (exit 2) naming the forms it takes."""
    value = (text or LOCAL).strip()
    if value == LOCAL:
        return ExecutorSpec()
    if value == INLINE:
        return ExecutorSpec(INLINE, text=value)
    if value.startswith("dask://"):
        address = value[len("dask://") :]
        match = _HOST_PORT.fullmatch(address)
        if match is None or not 1 <= int(match.group("port")) <= 65535:
            raise UsageError(
                f"--executor {value}: give the scheduler as dask://HOST:PORT (PORT 1 to "
                "65535; an IPv6 host in brackets: dask://[::1]:8786), e.g. dask://10.0.0.5:8786"
            )
        return ExecutorSpec(DASK, address=f"tcp://{address}", text=value)
    match = _DASK_LOCAL.match(value)
    if match:
        workers = int(match.group(1) or 2)
        if not 1 <= workers <= MAX_LOCAL_WORKERS:
            raise UsageError(
                f"--executor {value}: the worker count must be 1 to {MAX_LOCAL_WORKERS}"
            )
        return ExecutorSpec(DASK_LOCAL, workers=workers, text=value)
    raise UsageError(
        f"--executor {value!r} is not an executor; use local, dask://HOST:PORT or dask-local:N"
    )


class ExecutorFactory(Protocol):
    """Makes the executor of one kind from its parsed spec (see :data:`EXECUTORS`)."""

    def __call__(
        self, spec: ExecutorSpec, *, jobs: int, memory_limit_mb: int | None
    ) -> Executor: ...


def _inline(spec: ExecutorSpec, *, jobs: int, memory_limit_mb: int | None) -> Executor:
    if memory_limit_mb is not None:
        raise UsageError("a memory limit needs worker processes; use the local executor")
    from tracediff.executor.inline import InlineExecutor

    return InlineExecutor()


def _local(spec: ExecutorSpec, *, jobs: int, memory_limit_mb: int | None) -> Executor:
    from tracediff.executor.local import LocalPool

    return LocalPool(jobs, memory_limit_mb=memory_limit_mb)


def _dask(spec: ExecutorSpec, *, jobs: int, memory_limit_mb: int | None) -> Executor:
    from tracediff.executor.dask import DaskExecutor

    return DaskExecutor(spec.address, memory_limit_mb=memory_limit_mb, flag=spec.text)


def _dask_local(spec: ExecutorSpec, *, jobs: int, memory_limit_mb: int | None) -> Executor:
    from tracediff.executor.dask import DaskExecutor

    return DaskExecutor(local_workers=spec.workers, memory_limit_mb=memory_limit_mb, flag=spec.text)


# Each executor kind and what makes it: a new executor is one entry here (and its form in
# parse_executor). The factories import their module only when used (Dask is optional).
EXECUTORS: Mapping[str, ExecutorFactory] = MappingProxyType(
    {LOCAL: _local, INLINE: _inline, DASK: _dask, DASK_LOCAL: _dask_local}
)


def open_executor(
    spec: ExecutorSpec | str | None, *, jobs: int = 1, memory_limit_mb: int | None = None
) -> Executor:
    """The executor a spec names, ready for use (close it, or use it as a context manager).
    ``jobs`` sizes the local pool; a Dask cluster has its own size."""
    chosen = spec if isinstance(spec, ExecutorSpec) else parse_executor(spec)
    factory = EXECUTORS.get(chosen.kind)
    if factory is None:
        raise UsageError(
            f"--executor {chosen.text!r} is not an executor; use local, dask://HOST:PORT or "
            "dask-local:N"
        )
    return factory(chosen, jobs=jobs, memory_limit_mb=memory_limit_mb)
