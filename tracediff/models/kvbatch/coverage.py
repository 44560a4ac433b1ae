"""kvbatch coverage: the features a plan exercised (read from records) and the rule clauses
that decided it (the reference's observed twin), docs/kvbatch.md "Rule coverage"."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from tracediff.model import Clause, Record
from tracediff.models.kvbatch.reference import Reference
from tracediff.models.kvbatch.scenario import KVScenario

FEATURES = ("decode", "prefill", "admit", "hit", "evict", "preempt", "finish", "budget-full")
INFORMATIONAL = frozenset({"budget-full"})

SPEC = "docs/kvbatch.md"
CLAUSES: tuple[Clause, ...] = (
    Clause("decode", "running", "a running request decoded one token"),
    Clause("prefill", "running", "a running request continued a prefill"),
    Clause("chunk-budget", "running", "the budget cut a prefill chunk"),
    Clause("priority", "admission", "a priority-0 head passed an earlier priority-1 request"),
    Clause("fcfs", "admission", "the head was chosen by arrival (then id) among its class"),
    Clause("hit", "prefix", "an admission reused cached prefix blocks"),
    Clause("hit-shared", "prefix", "a hit block was held by another request"),
    Clause("hit-revive", "prefix", "a hit block was cached and free, and left the free pool"),
    Clause("hit-cap", "prefix", "the cap (seq - 1) // block_size cut the hits"),
    Clause("evict-lru", "eviction", "an eviction chose the least recently released block"),
    Clause("evict-tie", "eviction", "equal stamps tied; the lower block id was evicted"),
    Clause("preempt-other", "preemption", "the newest running request was preempted"),
    Clause("preempt-self", "preemption", "a request preempted itself"),
    Clause("recompute", "preemption", "a preempted request with output was re-admitted"),
    Clause("head-blocks", "admission", "the head did not fit: admission stopped"),
    Clause("max-running", "admission", "admission stopped at max_running"),
    Clause("register-dup", "registration", "a filled block's hash was mapped already"),
)
_INDEX = {clause.name: i for i, clause in enumerate(CLAUSES)}


class Observed(Reference):
    """The reference, counting per plan the clauses that decided (each at most once)."""

    def __init__(self, scenario: KVScenario) -> None:
        super().__init__(scenario)
        self.seen: set[str] = set()
        self.decided = [0] * len(CLAUSES)

    def note(self, clause: str) -> None:
        self.seen.add(clause)

    def plan(self, now: int) -> dict[str, Any]:
        self.seen = set()
        record = super().plan(now)
        for name in self.seen:
            self.decided[_INDEX[name]] += 1
        return record


def _header(records: Iterable[Record]) -> tuple[Record, Iterator[Record]]:
    iterator = iter(records)
    header = next(iterator, None)
    if not isinstance(header, dict) or "scenario" not in header:
        raise ValueError("the records do not start with a header")
    return header, iterator


def trace_coverage(records: Iterable[Record]) -> tuple[int, tuple[int, ...]]:
    header, iterator = _header(records)
    budget = header["scenario"]["token_budget"]
    plans = 0
    counts = [0] * len(FEATURES)
    for record in iterator:
        if record.get("t") != "plan":
            continue
        plans += 1
        hit = (
            any(n == 1 for _id, n in record["run"]),
            any(n > 1 for _id, n in record["run"]) or bool(record["admit"]),
            bool(record["admit"]),
            record["hits"] > 0,
            bool(record["evict"]),
            bool(record["preempt"]),
            bool(record["finished"]),
            record["tokens"] == budget,
        )
        for i, flag in enumerate(hit):
            counts[i] += flag
    return plans, tuple(counts)


def observed_coverage(
    scenario: KVScenario, drive: Any
) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    impl = Observed(scenario)
    records = list(drive(scenario, impl))
    plans, counts = trace_coverage(records)
    return plans, counts, tuple(impl.decided)
