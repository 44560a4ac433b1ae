"""The kvbatch bench: plan() time per implementation, by requests × block pressure.

A cell is one synthetic scenario (no generator seed: a fixed, documented shape): ``requests``
requests arriving together, prompts of 64-256 tokens in blocks of 16 with prefixes from four
shared families, outputs of 16-64 tokens, a 512-token budget and up to 64 running. Block
pressure sets the cache: ``low`` holds every request at once, ``high`` an eighth of that
(preemption and eviction all the way). Each implementation drives the whole scenario,
alternating A, B, A, B so ratios hold on a noisy machine; the cell's time is the median of
the repeats' total plan() time, divided by the plans.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.models.kvbatch.scenario import KVScenario, Request, blocks_for

PRESSURES = {"low": 1, "high": 8}  # the cache holds 1/divisor of all requests' blocks


def bench_scenario(requests: int, pressure: str) -> KVScenario:
    rng = random.Random(f"kvbatch-bench:{requests}:{pressure}")
    bs = 16
    reqs = []
    for rid in range(requests):
        prompt = rng.randint(64, 256)
        family = rng.randrange(4)
        shared = rng.randint(0, 4)
        own = prompt // bs - shared
        prefix = [(family + 1) * 1000 + i for i in range(shared)]
        prefix += [(rid + 1) * 100000 + i for i in range(shared, shared + rng.randint(0, own))]
        reqs.append(Request(rid, 0, prompt, rng.randint(16, 64), rng.choice((0, 1, 1, 1)),
                            tuple(prefix)))  # fmt: skip
    total = sum(blocks_for(r.prompt + r.output, bs) for r in reqs)
    biggest = max(blocks_for(r.prompt + r.output, bs) for r in reqs)
    blocks = max(biggest, total // PRESSURES[pressure])
    return KVScenario("bench", 0, block_size=bs, num_blocks=blocks, token_budget=512,
                      max_running=64, requests=tuple(reqs))  # fmt: skip


class _Timed:
    """An implementation with its plan() calls timed."""

    def __init__(self, impl: Any) -> None:
        self.impl = impl
        self.seconds = 0.0
        self.plans = 0

    def arrive(self, *args: Any) -> None:
        self.impl.arrive(*args)

    def plan(self, now: int) -> Any:
        started = time.perf_counter()
        record = self.impl.plan(now)
        self.seconds += time.perf_counter() - started
        self.plans += 1
        return record


@dataclass(frozen=True)
class Cell:
    requests: int
    pressure: str
    plans: int
    us_per_plan: tuple[float, ...]  # per implementation, in the order given


def run_bench(
    factories: Mapping[str, Callable[[Any], Any]],
    drive: Callable[..., Any],
    requests: Sequence[int] = (50, 100, 200, 400),
    pressures: Sequence[str] = ("low", "high"),
    repeats: int = 3,
) -> list[Cell]:
    cells = []
    for pressure in pressures:
        for count in requests:
            scenario = bench_scenario(count, pressure)
            times: dict[str, list[float]] = {name: [] for name in factories}
            plans = 0
            for _ in range(repeats):
                for name, factory in factories.items():
                    timed = _Timed(factory(scenario))
                    for _record in drive(scenario, timed, check=False):
                        pass
                    times[name].append(timed.seconds)
                    plans = timed.plans
            cells.append(Cell(count, pressure, plans, tuple(
                statistics.median(times[name]) / max(1, plans) * 1e6 for name in factories
            )))  # fmt: skip
    return cells


def bench_lines(names: Sequence[str], cells: Sequence[Cell]) -> list[str]:
    """The table: µs per plan, the ratio to the baseline (the first) and each pressure's
    growth from the smallest to the largest request count."""
    head = f"{'pressure':>8} {'requests':>8} {'plans':>6} " + " ".join(
        f"{n[:14]:>14}" for n in names
    )
    lines = [head + "".join(f" {'x ' + n[:10]:>12}" for n in names[1:])]
    for c in cells:
        base = c.us_per_plan[0]
        lines.append(
            f"{c.pressure:>8} {c.requests:>8} {c.plans:>6} "
            + " ".join(f"{t:>12.1f}µs" for t in c.us_per_plan)
            + "".join(f" {base / t if t else 0.0:>11.2f}x" for t in c.us_per_plan[1:])
        )
    for pressure in dict.fromkeys(c.pressure for c in cells):
        row = [c for c in cells if c.pressure == pressure]
        if len(row) > 1:
            growth = ", ".join(
                f"{n} {row[-1].us_per_plan[i] / row[0].us_per_plan[i]:.2f}x"
                for i, n in enumerate(names)
                if row[0].us_per_plan[i]
            )
            lines.append(
                f"growth per plan, {pressure} pressure, {row[0].requests} to "
                f"{row[-1].requests} requests: {growth}"
            )
    return lines
