"""Coverage campaigns: clause counts of one implementation over a whole seed range.

``tracediff campaign --coverage`` drives one implementation (the reference by default) over
the range on the executor, as ``tracediff coverage`` does over a profile, and keeps each
seed's feature counts in the campaign's store (table ``coverage``: seed, worker, seconds,
plans, counts as JSON in the order of the model's
:attr:`~tracediff.model.DecisionModel.features`, clause counts in the order of its
:attr:`~tracediff.model.DecisionModel.clauses`, or the reason the seed could not be
measured). The report adds them up by streaming the rows, so a million seeds need not be
held at once.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.campaign.clauses import (
    CoverageReport,
    CoverageWork,
    clause_rows,
    coverage_task,
    feature_rows,
)
from tracediff.campaign.store import CampaignStore
from tracediff.executor import DONE, Executor, Outcome, grace
from tracediff.model import DecisionModel, Profile, of
from tracediff.project import current_model
from tracediff.running.runner import StopSignals

_SCHEMA = """
CREATE TABLE IF NOT EXISTS coverage (
    seed INTEGER PRIMARY KEY,
    worker TEXT NOT NULL,
    seconds REAL NOT NULL,
    plans INTEGER NOT NULL,
    counts TEXT,
    decided TEXT,
    failure TEXT
);
"""


@dataclass(frozen=True)
class CoverageCampaignOptions:
    profile: Profile
    seeds: Sequence[int]
    impl: str
    out: str
    timeout_s: float | None = None

    def identity(self) -> dict[str, Any]:
        return {"mode": "coverage", "impl": self.impl, "profile": self.profile.name}


@dataclass(frozen=True)
class CoverageCampaignResult:
    report: CoverageReport
    workers: dict[str, list[float]]
    ran: int
    remaining: int
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        return self.stopped is None and self.remaining == 0 and self.report.ok


def open_store(directory: str, identity: dict[str, Any] | None = None) -> CampaignStore:
    store = CampaignStore.open(directory, identity)
    store.executescript(_SCHEMA)
    return store


def run_coverage_campaign(
    options: CoverageCampaignOptions,
    executor: Executor,
    on_row: Callable[[int, int], None] | None = None,
) -> CoverageCampaignResult:
    """Measure every seed of ``options`` not yet in its store; ``on_row(done, failures)``."""
    started = time.perf_counter()
    deadline = None if options.timeout_s is None else options.timeout_s + grace(options.timeout_s)
    stopped: str | None = None
    ran = 0
    with open_store(options.out, options.identity()) as store:
        done = {seed for (seed,) in store.execute("SELECT seed FROM coverage")}
        items = (
            (seed, CoverageWork(options.profile, seed, options.impl, options.timeout_s))
            for seed in options.seeds
            if seed not in done
        )
        measured = len(done)

        def record(outcome: Outcome) -> None:
            nonlocal ran, measured
            counts = decided = failure = None
            plans = 0
            if outcome.kind == DONE:
                counts = json.dumps(list(outcome.value.counts))
                decided = json.dumps(list(outcome.value.decided))
                plans = outcome.value.plans
            else:
                failure = outcome.failure(options.timeout_s)
            cursor = store.execute(
                "INSERT OR IGNORE INTO coverage VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    outcome.index,
                    outcome.worker or "?",
                    round(outcome.seconds, 6),
                    plans,
                    counts,
                    decided,
                    failure,
                ),
            )
            store.tick()
            if cursor.rowcount == 1:
                ran += 1
                measured += 1
                if on_row is not None:
                    on_row(measured, 0 if failure is None else 1)

        stop = StopSignals()
        try:
            with stop:
                executor.stream(
                    coverage_task, items, record, deadline_s=deadline, guard=stop.deferred
                )
        except KeyboardInterrupt as exc:
            stopped = signal.Signals(getattr(exc, "signum", signal.SIGINT)).name
        store.commit()
        report, workers = coverage_report(
            store, options.profile.name, options.impl, of(options.profile)
        )
        wanted = set(options.seeds)
        remaining = len(wanted - set(report.seeds) - {seed for seed, _why in report.failures})
    report = CoverageReport(
        profile=report.profile,
        impl=report.impl,
        seeds=report.seeds,
        plans=report.plans,
        features=report.features,
        scenarios=(),
        wall_seconds=time.perf_counter() - started,
        failures=report.failures,
        clauses=report.clauses,
    )
    return CoverageCampaignResult(report, workers, ran, remaining, stopped)


def coverage_report(
    store: CampaignStore, profile: str, impl: str, model: DecisionModel | None = None
) -> tuple[CoverageReport, dict[str, list[float]]]:
    """The store's coverage rows added up (streamed), by the features and clauses of
    ``model`` (the default model when None), and throughput per worker."""
    chosen = current_model() if model is None else model
    clause_count = len(chosen.clauses)
    totals = [0] * len(chosen.features)
    hit = [0] * len(chosen.features)
    clause_totals = [0] * clause_count
    clause_hit = [0] * clause_count
    measured = True  # rule clauses: only when every seed was driven by the observed reference
    seeds: list[int] = []
    failures: list[tuple[int, str]] = []
    workers: dict[str, list[float]] = {}
    plans = 0
    for seed, worker, seconds, row_plans, counts, decided, failure in _rows(store):
        held = workers.setdefault(worker, [0.0, 0.0])
        held[0] += 1
        held[1] += seconds
        if counts is None:
            failures.append((seed, failure or "not measured"))
            continue
        seeds.append(seed)
        plans += row_plans
        for i, count in enumerate(json.loads(counts)):
            totals[i] += count
            hit[i] += 1 if count else 0
        clause_counts = json.loads(decided) if decided else []
        measured = measured and len(clause_counts) == clause_count
        for i, count in enumerate(clause_counts[:clause_count]):
            clause_totals[i] += count
            clause_hit[i] += 1 if count else 0
    features = feature_rows(chosen, hit, totals)
    clauses = clause_rows(chosen, clause_hit, clause_totals)
    report = CoverageReport(
        profile=profile,
        impl=impl,
        seeds=tuple(seeds),
        plans=plans,
        features=features,
        scenarios=(),
        failures=tuple(failures),
        clauses=clauses if measured and seeds else (),
    )
    return report, workers


def _rows(store: CampaignStore) -> Iterator[tuple[Any, ...]]:
    yield from store.execute("SELECT * FROM coverage ORDER BY seed")
