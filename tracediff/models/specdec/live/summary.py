"""The figures a live run reports: throughput, acceptance, plan() cost, harness cost, busy share.

Plain arithmetic over what the loop measured; nothing here touches torch, so the summary of
a run can be built, tested and rendered anywhere.

The **steady window** leaves out the first and the last tenth of the rounds (at least one
each when there are ten or more): the start, where arrivals trickle in and prompts are
prefilled, and the drain, where the last lanes finish alone. The device's **busy share** is
the device time of the rounds inside the window over the window's length (from the first
of them starting to the last one finishing): what is missing is time the device sat idle
waiting for the host, mostly for a ``plan()`` call when no round was queued.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from tracediff.models.specdec.scenario.model import MAX_DRAFT

TRIM = 0.1


@dataclass(frozen=True)
class Round:
    """What the summary needs of one executed round."""

    started_ns: int
    ended_ns: int
    duration_us: int
    lanes: list[list[Any]]
    graph: bool
    drafted: int = 0  # draft tokens the mtp head produced for it
    forward_tokens: int = 0  # real tokens its verify forward ran (pending, drafts, prefill)


@dataclass(frozen=True)
class DepthAcceptance:
    depth: int
    trials: int  # lanes that verified at least this many drafts
    accepted: int  # of those, lanes that accepted at least this many

    @property
    def rate(self) -> float | None:
        return self.accepted / self.trials if self.trials else None


@dataclass(frozen=True)
class LiveSummary:
    requests: int
    plans: int
    rounds: int
    tokens: int
    wall_us: int
    acceptance: dict[str, list[DepthAcceptance]]  # "all", "mtp", "copy"
    plan_median_us: float
    plan_max_us: int
    harness_us: int
    harness_cpu_us: int
    loop_cpu_us: int
    record_us: int
    record_cpu_us: int
    records: int
    busy_share: float | None
    window_us: int
    window_rounds: int
    graph_rounds: int
    drafted: int
    forward_tokens: int

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / (self.wall_us / 1e6) if self.wall_us else 0.0

    @property
    def harness_share(self) -> float:
        return self.harness_us / self.wall_us if self.wall_us else 0.0

    @property
    def harness_cpu_share(self) -> float:
        """The harness's share of the loop thread's CPU time."""
        return self.harness_cpu_us / self.loop_cpu_us if self.loop_cpu_us else 0.0

    @property
    def record_per_record_us(self) -> float:
        return self.record_us / self.records if self.records else 0.0

    @property
    def record_cpu_per_record_us(self) -> float:
        return self.record_cpu_us / self.records if self.records else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "plans": self.plans,
            "rounds": self.rounds,
            "tokens": self.tokens,
            "wall_us": self.wall_us,
            "tokens_per_s": self.tokens_per_s,
            "acceptance": {
                name: [[d.depth, d.trials, d.accepted, d.rate] for d in depths]
                for name, depths in self.acceptance.items()
            },
            "plan_median_us": self.plan_median_us,
            "plan_max_us": self.plan_max_us,
            "harness_us": self.harness_us,
            "harness_share": self.harness_share,
            "harness_cpu_us": self.harness_cpu_us,
            "loop_cpu_us": self.loop_cpu_us,
            "harness_cpu_share": self.harness_cpu_share,
            "record_us": self.record_us,
            "records": self.records,
            "record_per_record_us": self.record_per_record_us,
            "record_cpu_us": self.record_cpu_us,
            "record_cpu_per_record_us": self.record_cpu_per_record_us,
            "busy_share": self.busy_share,
            "window_us": self.window_us,
            "window_rounds": self.window_rounds,
            "graph_rounds": self.graph_rounds,
            "drafted": self.drafted,
            "forward_tokens": self.forward_tokens,
        }


def acceptance(rounds: list[Round], proposers: dict[int, str]) -> dict[str, list[DepthAcceptance]]:
    """Per depth 1..7: lanes that verified at least that deep, and how many accepted it."""
    names = ("all", "mtp", "copy")
    trials = {name: [0] * MAX_DRAFT for name in names}
    accepted = {name: [0] * MAX_DRAFT for name in names}
    for round_ in rounds:
        for request, verified, accepts, *_ in round_.lanes:
            for name in ("all", proposers.get(request, "mtp")):
                for k in range(verified):
                    trials[name][k] += 1
                for k in range(accepts):
                    accepted[name][k] += 1
    return {
        name: [DepthAcceptance(k + 1, trials[name][k], accepted[name][k]) for k in range(MAX_DRAFT)]
        for name in names
    }


def busy_share(rounds: list[Round]) -> tuple[float | None, int, int]:
    """Busy share over the steady window, the window's length (µs) and its round count."""
    ordered = sorted(rounds, key=lambda r: r.started_ns)
    trim = int(len(ordered) * TRIM)
    window = ordered[trim : len(ordered) - trim] if trim else ordered
    if not window:
        return None, 0, 0
    span_ns = max(r.ended_ns for r in window) - window[0].started_ns
    if span_ns <= 0:
        return None, 0, len(window)
    busy_us = sum(r.duration_us for r in window)
    return min(1.0, busy_us * 1000 / span_ns), span_ns // 1000, len(window)


def summarize(
    *,
    requests: int,
    proposers: dict[int, str],
    rounds: list[Round],
    plan_us: list[int],
    wall_us: int,
    harness_us: int,
    harness_cpu_us: int,
    loop_cpu_us: int,
    record_us: int,
    record_cpu_us: int,
    records: int,
) -> LiveSummary:
    share, window_us, window_rounds = busy_share(rounds)
    return LiveSummary(
        requests=requests,
        plans=len(plan_us),
        rounds=len(rounds),
        tokens=sum(lane[3] for r in rounds for lane in r.lanes),
        wall_us=wall_us,
        acceptance=acceptance(rounds, proposers),
        plan_median_us=float(statistics.median(plan_us)) if plan_us else 0.0,
        plan_max_us=max(plan_us, default=0),
        harness_us=harness_us,
        harness_cpu_us=harness_cpu_us,
        loop_cpu_us=loop_cpu_us,
        record_us=record_us,
        record_cpu_us=record_cpu_us,
        records=records,
        busy_share=share,
        window_us=window_us,
        window_rounds=window_rounds,
        graph_rounds=sum(1 for r in rounds if r.graph),
        drafted=sum(r.drafted for r in rounds),
        forward_tokens=sum(r.forward_tokens for r in rounds),
    )
