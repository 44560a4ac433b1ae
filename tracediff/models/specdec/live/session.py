"""One live run, end to end: model, workload, engine, scheduler, trace, summary.

The trace is an ordinary trace: the driver's header (format, version, the full scenario, the
column names) plus a ``live`` map recording what the run depended on: torch version, device,
dtype, deterministic-algorithm settings, threads, CUDA graphs, the model's configuration, the
confidence threshold, the prompts and stop bytes. These sit in the compared body on purpose:
a live trace is never byte-equal to another run's anyway (it holds measured durations), and
its use is replay, which compares the decisions (plans and retirements), not the header.
Host name and wall time go to the provenance frame, as for every trace.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tracediff import __version__
from tracediff.executor.call import Guarded, construct
from tracediff.models.specdec.engine.driver import header_record
from tracediff.models.specdec.live import require_torch
from tracediff.models.specdec.live.engine import (
    DTYPES,
    DeviceOptions,
    GraphPool,
    build_engine,
    torch_settings,
)
from tracediff.models.specdec.live.executor import RoundExecutor
from tracediff.models.specdec.live.loop import serve
from tracediff.models.specdec.live.model import ModelConfig, TinyTransformer
from tracediff.models.specdec.live.oracle import greedy_decode
from tracediff.models.specdec.live.summary import LiveSummary, Round, summarize
from tracediff.models.specdec.live.workload import Workload, WorkloadOptions, build
from tracediff.models.specdec.scenario.model import private_copy
from tracediff.project.impls import ImplSpec, load
from tracediff.trace import TraceWriter, encode

torch = require_torch()

LIVE_ENGINE = "tracediff-live/1"


@dataclass(frozen=True)
class LiveOptions:
    workload: WorkloadOptions = field(default_factory=WorkloadOptions)
    model: ModelConfig = field(default_factory=ModelConfig)
    device: DeviceOptions = field(default_factory=DeviceOptions)
    confidence: float = 0.7  # a device lane stops drafting below this draft probability
    check_greedy: bool = False  # decode every request plainly afterwards and compare


@dataclass(frozen=True)
class GreedyCheck:
    equal: int
    different: list[int]  # request ids whose bytes differ from plain greedy decoding
    margin: float  # smallest top-2 logit gap plain decoding met


@dataclass(frozen=True)
class LiveResult:
    path: str
    summary: LiveSummary
    generated: dict[int, bytes]
    settings: dict[str, Any]
    greedy: GreedyCheck | None


def run_live(
    options: LiveOptions,
    spec: ImplSpec,
    path: str,
    progress: Callable[[int], None] | None = None,
) -> LiveResult:
    """Serve the workload live with implementation ``spec``, writing the trace to ``path``."""
    workload = build(options.workload)
    scenario = workload.scenario
    with torch_settings(options.device) as settings:
        device = torch.device(settings["device"])
        model = TinyTransformer(options.model, device=device, dtype=DTYPES[options.device.dtype])
        graphs = None
        if settings["cuda_graphs"]:
            graphs = GraphPool(model, eager={(k, b, w) for k, b, w in scenario.params.eager_shapes})
        executor = RoundExecutor(model, workload, confidence=options.confidence, graphs=graphs)
        _warm_up(model)
        engine, capture = build_engine(model, executor, scenario.params)
        settings = {**settings, **capture}
        try:
            scheduler = Guarded(_construct(spec, scenario), spec.name)
            header = header_record(scenario)
            header["live"] = _live_header(settings, options, workload)
            started = time.time()
            with TraceWriter(path, header) as writer:
                stats = serve(
                    scenario,
                    scheduler,
                    engine,
                    lambda record: writer.write_record(encode(record)),
                    progress,
                )
                writer.write_provenance(
                    {
                        "implementation": spec.name,
                        "target": spec.target,
                        "engine": LIVE_ENGINE,
                        "tracediff": __version__,
                        "python": platform.python_version(),
                        "host": platform.node(),
                        "wall_seconds": round(time.time() - started, 6),
                    }
                )
        finally:
            engine.close()
        generated = {spec_.id: executor.generated(spec_.id) for spec_ in scenario.requests}
        greedy = _check_greedy(model, workload, generated) if options.check_greedy else None
    rounds = [
        Round(
            c.started_ns, c.ended_ns, c.duration_us, c.lanes, c.graph, c.drafted, c.forward_tokens
        )
        for c in stats.completed
    ]
    summary = summarize(
        requests=len(scenario.requests),
        proposers={r.id: r.proposer for r in scenario.requests},
        rounds=rounds,
        plan_us=stats.plan_us,
        wall_us=stats.wall_us,
        harness_us=stats.harness_us,
        harness_cpu_us=stats.harness_cpu_us,
        loop_cpu_us=stats.loop_cpu_us,
        record_us=stats.record_us,
        record_cpu_us=stats.record_cpu_us,
        records=stats.records,
    )
    return LiveResult(path, summary, generated, settings, greedy)


def _live_header(
    settings: dict[str, Any], options: LiveOptions, workload: Workload
) -> dict[str, Any]:
    return {
        "engine": LIVE_ENGINE,
        **{k: v for k, v in settings.items() if k != "device_name"},
        "model": options.model.to_dict(),
        "confidence": options.confidence,
        "workload_seed": options.workload.seed,
        "prompts": [p.decode("ascii") for p in workload.prompts],
        "stops": list(workload.stops),
    }


def _warm_up(model: TinyTransformer) -> None:
    """One throwaway decode, so the first real round does not pay torch's lazy set-up."""
    greedy_decode(model, b"warm up", 2)


def _check_greedy(
    model: TinyTransformer, workload: Workload, generated: dict[int, bytes]
) -> GreedyCheck:
    equal = 0
    different = []
    margin = float("inf")
    for request in workload.scenario.requests:
        plain = greedy_decode(
            model,
            workload.prompts[request.id],
            request.max_new,
            grammar=request.grammar,
            stop=workload.stops[request.id],
        )
        margin = min(margin, plain.margin)
        if plain.tokens == generated[request.id]:
            equal += 1
        else:
            different.append(request.id)
    return GreedyCheck(equal, different, margin)


def _construct(spec: ImplSpec, scenario: Any) -> Any:
    """The implementation, on a private copy of the scenario (as ``run`` and ``replay`` give
    it); a constructor that fails is a finding, like any other failure of the implementation
    (:mod:`tracediff.executor.call`)."""
    return construct(spec.name, load(spec), private_copy(scenario))
