"""The Dask executor: tasks on a Dask distributed cluster, each in an isolated process.

``dask://HOST:PORT`` connects to a running scheduler; ``dask-local:N`` starts a LocalCluster
of N single-threaded worker processes on the loopback interface for the command's lifetime.

Isolation, time and memory limits mean what they mean locally: a Dask worker does not run a
task itself but hands it to a :class:`~tracediff.executor.local.LocalPool` of one isolated
process that it keeps for its lifetime (one per worker thread), with the command's memory
limit, deadline and worker-death retry. So a task that exits, hangs in C code or exhausts
its memory limit costs that process, never the Dask worker, and its outcome says so.

Dask workers that die (a machine lost, a worker killed): the scheduler gives their tasks to
other workers; tracediff configures a LocalCluster's scheduler with ``allowed-failures``
of 1, so a task in flight on two workers that died is not retried again but reported as
``died`` (on a cluster of your own, set ``distributed.scheduler.allowed-failures: 1`` for
the same rule; Dask's default, 3, retries more). Each task has a unique key and its
outcome is taken once, when its future completes: nothing is lost or counted twice.

What differs from the local pool: payloads and results travel through the scheduler
(pickled), in chunks of :data:`CHUNK` tasks, so results arrive a chunk at a time; a chunk
whose Dask worker dies runs again, item by item, so the rule above holds per task. A worker
started without ``--no-nanny`` is restarted by its nanny after it dies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import multiprocessing as mp
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any

from tracediff.errors import ExecutorLost, TracediffError, UsageError
from tracediff.executor.base import ATTEMPTS, DIED, FAILED, Executor, Guard, Outcome, Task

EXTRA = "pip install 'tracediff-harness[dask]'"
IN_FLIGHT_PER_WORKER = 4  # chunks queued per worker: keeps workers busy, memory bounded
# Tasks per Dask task: a scheduler round trip costs 1 to 25 ms (a quiet machine to a loaded
# one), as much as a small scenario; a chunk pays it once. A chunk is retried item by item.
CHUNK = 8
CONNECT_TIMEOUT_S = 30
PROBE_TIMEOUT_S = 5  # for a TCP connection to the scheduler's port, before the client's


def load_distributed(flag: str) -> Any:
    try:
        import distributed
    except ImportError:
        raise UsageError(
            f"--executor {flag} needs Dask distributed, an optional extra: {EXTRA}"
        ) from None
    return distributed


class DaskExecutor(Executor):
    """See the module docstring. ``address``: a scheduler (``tcp://HOST:PORT``), or None
    with ``local_workers`` to start a LocalCluster of that many processes."""

    name = "dask"

    def __init__(
        self,
        address: str | None = None,
        *,
        local_workers: int | None = None,
        memory_limit_mb: int | None = None,
        flag: str = "dask",
    ) -> None:
        distributed = load_distributed(flag)
        import dask

        self._memory_limit_mb = memory_limit_mb
        self._flag = flag
        self._cluster: Any = None
        self._token = uuid.uuid4().hex[:12]
        self._submitted = 0
        if address is None:
            settings = {
                "distributed.scheduler.allowed-failures": ATTEMPTS - 1,
                # Workers must be allowed children: each task runs in an isolated process.
                "distributed.worker.daemon": False,
                "logging.distributed": "error",
            }
            try:
                with dask.config.set(settings):
                    self._cluster = distributed.LocalCluster(
                        n_workers=max(1, local_workers or 1),
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address=":0",  # any free port: never a clash with 8787
                        memory_limit=0,  # tracediff's --memory-limit applies per task instead
                        silence_logs=logging.ERROR,
                    )
                    self._client: Any = distributed.Client(self._cluster)
            except Exception as exc:  # noqa: BLE001 - whatever keeps a cluster from starting
                raise UsageError(
                    f"--executor {flag}: cannot start a Dask LocalCluster: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
        else:
            _reachable(address, flag)  # a port where nothing listens: one line, at once
            # the client logs each failed reconnection with a traceback once a scheduler is
            # lost; tracediff says it in one line (ExecutorLost)
            logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
            try:
                self._client = distributed.Client(address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise UsageError(
                    f"--executor {flag}: cannot reach a Dask scheduler at {address} ({exc}); "
                    "start one (dask scheduler) or check the address"
                ) from None
        self._killed_worker: type[BaseException] = _killed_worker_type(distributed)

    @property
    def workers(self) -> int:
        info = self._client.scheduler_info()
        threads = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values())
        return max(1, threads)

    def worker_pids(self) -> dict[str, int]:
        """Each Dask worker's process id, by address (tests kill one)."""
        import os

        return dict(self._client.run(os.getpid))

    def stream(
        self,
        task: Task,
        items: Iterable[tuple[int, Any]],
        on_outcome: Callable[[Outcome], None],
        *,
        deadline_s: float | None = None,
        guard: Guard = contextlib.nullcontext,
    ) -> None:
        distributed = load_distributed("dask")
        source = iter(items)
        singles: deque[tuple[int, Any]] = deque()  # items of a chunk that lost its worker
        completed = distributed.as_completed()
        in_flight: dict[str, tuple[list[tuple[int, Any]], Any]] = {}
        window = self.workers * IN_FLIGHT_PER_WORKER

        def submit_next() -> None:
            batch = [singles.popleft()] if singles else list(islice(source, CHUNK))
            if not batch:
                return
            self._submitted += 1
            future = self._client.submit(
                _run_chunk,
                task,
                batch,
                deadline_s,
                self._memory_limit_mb,
                key=f"tracediff-{self._token}-{self._submitted}",
                pure=False,
            )
            in_flight[future.key] = (batch, future)
            completed.add(future)

        try:
            for _ in range(window):
                submit_next()
            for future in completed:
                batch, _future = in_flight.pop(future.key)
                if self._lost(future):
                    in_flight[future.key] = (batch, future)
                    raise self._lost_error(in_flight)
                outcomes = self._outcomes(batch, future)
                future.release()
                if outcomes is None:  # a chunk whose workers died: each item on its own
                    singles.extend(batch)
                    for _ in batch:
                        submit_next()
                    continue
                with guard():
                    for outcome in outcomes:
                        on_outcome(outcome)
                submit_next()
        except ExecutorLost:
            raise
        except Exception as exc:
            # the client's own errors (ClosedClientError, CommClosedError, a timeout) once
            # the scheduler is gone are the cluster's loss, not the scenarios'
            if self._connected():
                raise
            raise self._lost_error(in_flight) from exc
        except BaseException:
            with contextlib.suppress(Exception):
                self._client.cancel([f for _b, f in in_flight.values()])
            raise

    def _connected(self) -> bool:
        return str(getattr(self._client, "status", "running")) == "running"

    def _lost(self, future: Any) -> bool:
        """Whether ``future`` ended because the cluster went away (the scheduler, the
        connection), not because of its task: nothing may be concluded about its items."""
        if future.status == "finished":
            return False
        if future.status in ("cancelled", "lost") or not self._connected():
            return True
        return False

    def _lost_error(self, in_flight: dict[str, tuple[list[tuple[int, Any]], Any]]) -> ExecutorLost:
        pending = sum(len(batch) for batch, _f in in_flight.values())
        return ExecutorLost(
            f"--executor {self._flag}: lost the Dask scheduler mid-run; the {pending} "
            "scenarios in flight were not recorded: start the scheduler again and rerun the "
            "command (a campaign resumes from its store, run and gate with --resume DIR)"
        )

    def _outcomes(self, batch: list[tuple[int, Any]], future: Any) -> list[Outcome] | None:
        if future.status == "finished":
            outcomes: list[Outcome] = future.result()
            return outcomes
        exc = future.exception()
        if isinstance(exc, self._killed_worker) and len(batch) > 1:
            return None
        return [self._outcome(batch[0][0], future)]

    def _outcome(self, index: int, future: Any) -> Outcome:
        if future.status == "finished":
            outcome: Outcome = future.result()
            return outcome
        exc = future.exception()
        if isinstance(exc, TracediffError):
            raise exc  # e.g. a --memory-limit too small to start a worker: the user's to fix
        if isinstance(exc, self._killed_worker):
            return Outcome(
                index,
                DIED,
                attempts=ATTEMPTS,
                detail=f"{ATTEMPTS} Dask workers died while running it",
                worker="dask",
            )
        return Outcome(index, FAILED, detail=f"{type(exc).__name__}: {exc}", worker="dask")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.close()
        if self._cluster is not None:
            with contextlib.suppress(Exception):
                self._cluster.close()


def _reachable(address: str, flag: str) -> None:
    """Fail at once (exit 2) when nothing accepts a TCP connection at ``address``
    (``tcp://HOST:PORT``): Dask's client would retry for its whole connect timeout."""
    import socket

    host, _sep, port = address.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_TIMEOUT_S):
            pass
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        reason = reason or "timed out"
        raise UsageError(
            f"--executor {flag}: cannot reach a Dask scheduler at {address} ({reason}); "
            "start one (dask scheduler) or check the address"
        ) from None


def _killed_worker_type(distributed: Any) -> type[BaseException]:
    found = getattr(distributed, "KilledWorker", None)
    if found is None:
        from distributed.scheduler import KilledWorker

        found = KilledWorker
    return found


# -- on the Dask worker -----------------------------------------------------------------------
_here = threading.local()


def _run_chunk(
    task: Task,
    batch: list[tuple[int, Any]],
    deadline_s: float | None,
    memory_limit_mb: int | None,
) -> list[Outcome]:
    """Run a chunk of tasks in this Dask worker thread's isolated process (started on first
    use, kept for the worker's lifetime)."""
    from tracediff.executor.local import LocalPool

    pool = getattr(_here, "pool", None)
    if pool is None or getattr(_here, "memory_limit_mb", None) != memory_limit_mb:
        if pool is not None:
            pool.close()
        _allow_children()
        pool = _here.pool = LocalPool(1, memory_limit_mb=memory_limit_mb)
        _here.memory_limit_mb = memory_limit_mb
    found: list[Outcome] = []
    pool.stream(task, batch, found.append, deadline_s=deadline_s)
    name = _worker_name()
    return [dataclasses.replace(outcome, worker=name) for outcome in found]


def _allow_children() -> None:
    """A nanny starts Dask workers as daemonic processes, which multiprocessing forbids to
    have children; the isolated process is one, and dies with this worker (see
    :mod:`tracediff.executor.local`), which is what the rule protects."""
    config = getattr(mp.current_process(), "_config", None)
    if isinstance(config, dict) and config.get("daemon"):
        config["daemon"] = False


def _worker_name() -> str:
    with contextlib.suppress(Exception):
        from distributed import get_worker

        return str(get_worker().address)
    return "dask"
