"""The live engine: a device worker that executes submitted rounds in order, and its timing.

The serving loop (``loop.serve``) plans on the calling thread while the device worker runs
the rounds already submitted, which is what ``queue_depth`` is for: with rounds queued, the
device never waits for a ``plan()`` call. The worker takes rounds in submission order
(the device is serial), runs each through the
:class:`~tracediff.models.specdec.live.executor.RoundExecutor`
and hands back a :class:`Completed` with the round's lane rows and its measured duration.

Timing. On the CPU a round's duration is the worker's wall time for it (``perf_counter_ns``):
drafting, the verify forward and acceptance. On CUDA it is the time between two CUDA events
recorded on the stream around the round's device work, so host jitter does not enter it.
Durations are integer microseconds, at least 1, as the trace format wants.

CUDA graphs ("mixed graphs"). On CUDA the verify forward of every shape the scenario does not
mark eager is captured once, at start-up, into a CUDA graph over static input buffers (the KV
cache is static already, and the forward reads a fixed key window, the cache's capacity); a
round of a captured shape copies its inputs in and replays the graph. Eager shapes, rounds
that carry a prefill chunk (their token count varies) and all draft steps run eagerly. On the
CPU everything runs eagerly. The CUDA path has not been run in this project's CI, which has
no GPU; it is guarded by ``torch.cuda.is_available()``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tracediff.errors import LiveUnavailable, SchedulerFault, UsageError
from tracediff.models.specdec.live import require_torch
from tracediff.models.specdec.live.executor import RAGGED_ROW, RECT, RoundExecutor
from tracediff.models.specdec.live.model import AttentionGroup, Packed, Tensor, TinyTransformer
from tracediff.models.specdec.live.workload import round_shapes

torch = require_torch()

DTYPES = {"float32": torch.float32, "float64": torch.float64}
CUBLAS_WORKSPACE = ":4096:8"  # what cuBLAS needs to be deterministic


@dataclass(frozen=True)
class DeviceOptions:
    device: str = "cpu"  # "cpu" or "cuda"
    dtype: str = "float32"
    threads: int = 1  # torch intra-op threads on the CPU
    graphs: bool = True  # capture CUDA graphs (CUDA only)


def resolve_device(options: DeviceOptions) -> Any:
    if options.dtype not in DTYPES:
        raise UsageError(f"--dtype {options.dtype!r}: choose one of {', '.join(DTYPES)}")
    if options.device == "cpu":
        return torch.device("cpu")
    if options.device == "cuda":
        if not torch.cuda.is_available():
            raise LiveUnavailable(
                "--device cuda: torch sees no CUDA device (this torch is "
                f"{torch.__version__}); use --device cpu"
            )
        return torch.device("cuda", torch.cuda.current_device())
    raise UsageError(f"--device {options.device!r}: choose cpu or cuda")


@contextlib.contextmanager
def torch_settings(options: DeviceOptions) -> Iterator[dict[str, Any]]:
    """Deterministic algorithms and the thread count for a run, restored afterwards.

    Yields what the run depends on, for the trace header.
    """
    if options.device == "cuda":
        # Must be set before cuBLAS initialises, or deterministic mode refuses matmuls.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    device = resolve_device(options)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    threads = torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(options.threads)
    try:
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        yield {
            "torch": torch.__version__,
            "device": str(device),
            "device_name": name,
            "dtype": options.dtype,
            "deterministic_algorithms": True,
            "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG", "")
            if device.type == "cuda"
            else "",
            "threads": options.threads,
            "cuda_graphs": device.type == "cuda" and options.graphs,
        }
    finally:
        torch.use_deterministic_algorithms(was_deterministic)
        torch.set_num_threads(threads)


@dataclass(frozen=True)
class Completed:
    """A round the device finished: what the completion record needs, and diagnostics."""

    plan: int
    lanes: list[list[Any]]
    duration_us: int  # measured device time of the round
    started_ns: int  # host clock (perf_counter_ns) when the worker took it
    ended_ns: int  # host clock when its result was ready
    drafted: int
    forward_tokens: int
    graph: bool


class LiveEngine:
    """Rounds in, completions out; one worker thread plays the serial device."""

    def __init__(self, executor: RoundExecutor, *, cuda: bool) -> None:
        self.executor = executor
        self.cuda = cuda
        self._inbox: queue.Queue[tuple[int, list[Any]] | None] = queue.Queue()
        self._outbox: queue.Queue[Completed | BaseException] = queue.Queue()
        self._in_flight = 0
        self._worker = threading.Thread(target=self._work, name="tracediff-device", daemon=True)
        self._worker.start()

    @property
    def busy(self) -> int:
        """Rounds submitted whose completion has not been collected yet."""
        return self._in_flight

    def submit(self, plan: int, round_row: list[Any]) -> None:
        self._in_flight += 1
        self._inbox.put((plan, round_row))

    def poll(self) -> list[Completed]:
        """Completions ready now, in submission order (never blocks)."""
        ready: list[Completed] = []
        while True:
            try:
                item = self._outbox.get_nowait()
            except queue.Empty:
                return ready
            ready.append(self._unwrap(item))

    def wait(self, timeout: float | None) -> list[Completed]:
        """Block until a completion is ready (or ``timeout`` seconds pass); return it."""
        try:
            item = self._outbox.get(timeout=timeout)
        except queue.Empty:
            return []
        return [self._unwrap(item), *self.poll()]

    def _unwrap(self, item: Completed | BaseException) -> Completed:
        if isinstance(item, BaseException):
            self._in_flight = 0
            raise item
        self._in_flight -= 1
        return item

    def close(self) -> None:
        self._inbox.put(None)
        self._worker.join(timeout=30)

    def _work(self) -> None:
        while True:
            item = self._inbox.get()
            if item is None:
                return
            plan, round_row = item
            try:
                self._outbox.put(self._execute(plan, round_row))
            except BaseException as exc:  # noqa: BLE001 - handed to the loop, which raises it
                self._outbox.put(exc)
                return

    def _execute(self, plan: int, round_row: list[Any]) -> Completed:
        started = time.perf_counter_ns()
        if self.cuda:
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            outcome = self.executor.execute(plan, round_row)
            end.record()
            end.synchronize()
            duration = int(begin.elapsed_time(end) * 1000.0)
        else:
            outcome = self.executor.execute(plan, round_row)
            duration = (time.perf_counter_ns() - started) // 1000
        return Completed(
            plan=plan,
            lanes=outcome.lanes,
            duration_us=max(duration, 1),
            started_ns=started,
            ended_ns=time.perf_counter_ns(),
            drafted=outcome.drafted,
            forward_tokens=outcome.forward_tokens,
            graph=outcome.graph,
        )


# -- CUDA graphs ------------------------------------------------------------------------------
@dataclass
class _Captured:
    graph: Any
    inputs: Packed
    hidden: Tensor


class GraphPool:
    """Captured verify forwards by shape ``(kind, b_pad, width)``; eager for the rest.

    Off CUDA (tests) a shape is "captured" as a :class:`_StaticForward`.
    """

    def __init__(self, model: TinyTransformer, eager: set[tuple[int, int, int]]) -> None:
        self.model = model
        self.eager = eager
        self.graphs: dict[tuple[int, int, int], _Captured] = {}
        self.failed = 0  # shapes whose capture failed (they run eagerly)
        self.failure = ""

    def capture_all(self, executor: RoundExecutor, shapes: list[tuple[int, int, int]]) -> int:
        """Capture every shape that is not eager (at start-up, before the clock starts).

        A shape whose capture fails runs eagerly instead, and the first failure is kept in
        ``failure`` (recorded in the trace header): fall back, and say why.
        """
        for shape in shapes:
            if shape in self.eager or shape in self.graphs:
                continue
            try:
                self.graphs[shape] = self._capture(executor, shape)
            except RuntimeError as exc:
                self.failed += 1
                self.failure = self.failure or f"shape {shape}: {' '.join(str(exc).split())}"
                if self.model.device.type == "cuda":
                    torch.cuda.synchronize()
        return len(self.graphs)

    def run(
        self, shape: tuple[int, int, int], executor: RoundExecutor, packed: Packed
    ) -> tuple[Tensor, bool]:
        """The verify forward's hidden states, and whether a captured graph produced them."""
        captured = self.graphs.get(shape)
        if captured is None:
            return self.model.forward(executor.cache, packed, self.model.config.layers), False
        static = captured.inputs
        static.tokens.copy_(packed.tokens)
        static.slots.copy_(packed.slots)
        static.positions.copy_(packed.positions)
        for mine, theirs in zip(static.groups, packed.groups, strict=True):
            mine.index.copy_(theirs.index)
            mine.slots.copy_(theirs.slots)
        static.inverse.copy_(packed.inverse)
        captured.graph.replay()
        return captured.hidden, True

    def _capture(self, executor: RoundExecutor, shape: tuple[int, int, int]) -> _Captured:
        kind, b_pad, width = shape
        device = self.model.device
        count = b_pad * (width + 1) if kind == RECT else width
        row = width + 1 if kind == RECT else RAGGED_ROW
        scratch = executor.scratch
        # Start-up inputs write only to the scratch slot, at distinct positions.
        index = torch.arange(b_pad * row, device=device).clamp(max=count).view(b_pad, row)
        inputs = Packed(
            tokens=torch.zeros(count, dtype=torch.long, device=device),
            slots=torch.full((count,), scratch, dtype=torch.long, device=device),
            positions=torch.arange(count, device=device),
            groups=(AttentionGroup(index, torch.full((b_pad,), scratch, device=device)),),
            inverse=torch.arange(count, device=device).clamp(max=b_pad * row),
            key_limit=executor.capacity,
        )
        layers = self.model.config.layers
        if device.type != "cuda":
            stand_in = _StaticForward(self.model, executor.cache, inputs)
            return _Captured(stand_in, inputs, stand_in.hidden)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.model.forward(executor.cache, inputs, layers)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            hidden = self.model.forward(executor.cache, inputs, layers)
        return _Captured(graph, inputs, hidden)


class _StaticForward:
    """A CUDA graph's stand-in off CUDA: the same static buffers and fixed key window,
    replayed eagerly, so the CPU tests exercise the graph path's data flow."""

    def __init__(self, model: TinyTransformer, cache: Any, inputs: Packed) -> None:
        self.model = model
        self.cache = cache
        self.inputs = inputs
        self.hidden = model.forward(cache, inputs, model.config.layers)

    def replay(self) -> None:
        self.hidden.copy_(self.model.forward(self.cache, self.inputs, self.model.config.layers))


def graph_shapes(params: Any) -> list[tuple[int, int, int]]:
    """Every lane-carrying round shape these parameters allow (the ones worth capturing)."""
    return [s for s in round_shapes(params) if s[0] == RECT or params.ragged]


def check_round(plan: int, round_row: Any, verify_budget: int) -> None:
    """Refuse a structurally malformed round before it reaches the device."""
    try:
        lanes = round_row[6]
        tokens = sum(1 + int(lane[2]) for lane in lanes)
        if tokens > verify_budget:
            raise ValueError(f"{tokens} verified tokens exceed the budget")
    except (TypeError, ValueError, IndexError) as exc:
        raise SchedulerFault(f"plan {plan}: malformed round: {exc}") from None


def build_engine(
    model: TinyTransformer, executor: RoundExecutor, params: Any
) -> tuple[LiveEngine, dict[str, Any]]:
    """The engine for ``executor``; on CUDA with graphs, captures them first.

    Returns the engine and what capture did (for the trace header).
    """
    cuda = model.device.type == "cuda"
    graphs: dict[str, Any] = {"captured_graphs": 0}
    pool = executor.graphs
    if cuda and pool is not None:
        graphs["captured_graphs"] = pool.capture_all(executor, graph_shapes(params))
        graphs["failed_captures"] = pool.failed
        graphs["capture_failure"] = pool.failure
    return LiveEngine(executor, cuda=cuda), graphs
