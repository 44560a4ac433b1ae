"""The vllm bench: vLLM's own time per engine step against tracediff's.

A cell is one synthetic scenario (no generator seed: a fixed, documented shape):
``requests`` requests arriving two per step, prompts of 32-256 tokens in blocks of 16 that
start with one of four shared prefix families, outputs of 8-64 tokens, a 512-token budget,
up to 64 running, n-gram drafts of 2 tokens. Block pressure sets the cache: ``low`` holds
every request at once, ``high`` an eighth of that (preemption all the way).

Per step, *vLLM* is the time spent inside the scheduler (``schedule()``,
``update_from_output()``, ``update_draft_token_ids()``, ``add_request()`` and
``finish_requests()`` through the adapter, the adapter's conversions included), and
*tracediff* is the rest of a recording: the driver's step loop, the simulated runner's
keyed draws, and encoding every record canonically (msgpack) into a SHA-256 digest, as a
recording does. The cell's times are the median over the repeats.
"""

from __future__ import annotations

import hashlib
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from tracediff.models.vllm.scenario import Request, VllmScenario, blocks_for

PRESSURES = {"low": 1, "high": 8}  # the cache holds 1/divisor of all requests' blocks
TIMED = ("arrive", "schedule", "update", "drafts", "abort")


def bench_scenario(requests: int, pressure: str) -> VllmScenario:
    rng = random.Random(f"vllm-bench:{requests}:{pressure}")
    bs, k = 16, 2
    families = [rng.randint(32, 128) for _ in range(4)]
    reqs = []
    for rid in range(requests):
        prompt = rng.randint(32, 256)
        family = rng.randrange(4)
        reqs.append(
            Request(rid, rid // 2, prompt, rng.randint(8, 64), family,
                    min(prompt, families[family]))
        )  # fmt: skip
    needs = [blocks_for(r.prompt + r.output + k, bs) for r in reqs]
    blocks = max(max(needs) + 1, sum(needs) // PRESSURES[pressure])
    return VllmScenario("bench", 0, block_size=bs, num_blocks=blocks, max_num_seqs=64,
                        max_num_batched_tokens=512, max_model_len=512, spec_k=k,
                        requests=tuple(reqs))  # fmt: skip


class _Timed:
    """An implementation with its driver calls timed (the time spent in vLLM)."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl
        self.seconds = 0.0
        self.plans = 0
        for name in TIMED:
            setattr(self, name, self._timed(getattr(impl, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return method(*args)
            finally:
                self.seconds += time.perf_counter() - started

        return call


@dataclass(frozen=True)
class Cell:
    requests: int
    pressure: str
    plans: int
    vllm_us: float  # per step, in the scheduler
    tracediff_us: float  # per step, everything else of a recording


def run_bench(
    factory: Callable[[Any], Any],
    drive: Callable[..., Any],
    requests: Sequence[int] = (16, 64, 256),
    pressures: Sequence[str] = ("low", "high"),
    repeats: int = 3,
) -> list[Cell]:
    cells = []
    for pressure in pressures:
        for count in requests:
            scenario = bench_scenario(count, pressure)
            inside: list[float] = []
            outside: list[float] = []
            plans = 0
            for _ in range(repeats):
                timed = _Timed(factory(scenario))
                digest = hashlib.sha256()
                plans = 0
                started = time.perf_counter()
                for record in drive(scenario, timed):
                    digest.update(msgpack.packb(record))
                    plans += record.get("t") == "plan"
                total = time.perf_counter() - started
                inside.append(timed.seconds)
                outside.append(total - timed.seconds)
            steps = max(1, plans)
            cells.append(Cell(count, pressure, plans,
                              statistics.median(inside) / steps * 1e6,
                              statistics.median(outside) / steps * 1e6))  # fmt: skip
    return cells


def bench_lines(name: str, cells: Sequence[Cell]) -> list[str]:
    lines = [
        f"{'pressure':>8} {'requests':>8} {'steps':>6} {name[:16] + ' µs/step':>22} "
        f"{'tracediff µs/step':>18} {'tracediff share':>16}"
    ]
    for c in cells:
        share = c.tracediff_us / (c.vllm_us + c.tracediff_us) if c.vllm_us else 0.0
        lines.append(
            f"{c.pressure:>8} {c.requests:>8} {c.plans:>6} {c.vllm_us:>22.1f} "
            f"{c.tracediff_us:>18.1f} {share:>15.0%}"
        )
    return lines
