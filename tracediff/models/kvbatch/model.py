"""Continuous batching with a paged KV cache, as a tracediff model (docs/kvbatch.md).

Registered through the ``tracediff.models`` entry point ``kvbatch``; the core never imports
this package. :meth:`KVBatchModel.drive` is the simulated engine: it delivers arrivals,
calls ``plan(now)`` while requests are unfinished and advances the clock by the step time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from tracediff.errors import ScenarioError, SchedulerFault
from tracediff.model import Clause, DecisionModel, Record, ShrinkPass
from tracediff.models import BaseModel
from tracediff.models.kvbatch import coverage, scenario
from tracediff.models.kvbatch.scenario import FORMAT, RECORD_KEYS, KVScenario
from tracediff.workload import over, over_samples

MAX_PLANS = 200_000
_INT_KEYS = ("plan", "now", "hits", "tokens", "free")
_LIST_KEYS = ("run", "admit", "preempt", "alloc", "evict", "finished")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class KVBatchModel(BaseModel):
    name = "kvbatch"
    title = "continuous batching with a paged KV cache (docs/kvbatch.md)"
    methods: tuple[str, ...] = ("arrive", "plan")
    decide = "plan"
    builtin_impls: Mapping[str, str] = {
        "reference": "tracediff.models.kvbatch.reference:Reference",
        "optimized": "tracediff.models.kvbatch.optimized:Optimized",
        "optimized-check": "tracediff.models.kvbatch.optimized:CheckedOptimized",
    }
    checked_impls: Mapping[str, str] = {"optimized": "optimized-check"}
    default_impls: tuple[str, ...] = ("reference", "optimized")
    choice_fields: Mapping[str, frozenset[str]] = {
        "plan": frozenset({"run", "admit", "preempt", "alloc", "evict"}),
    }
    spec = coverage.SPEC
    commands: Mapping[str, str] = {"bench": "tracediff.models.kvbatch.commands.bench:bench"}
    # what a worker imports before its first scenario (tracediff.model.worker_modules)
    worker_modules: tuple[str, ...] = (
        "tracediff.models.kvbatch.scenario",
        "tracediff.models.kvbatch.reference",
        "tracediff.models.kvbatch.optimized",
    )
    informational = coverage.INFORMATIONAL
    profiles: Mapping[str, Any] = {
        **scenario.PROFILES,
        scenario.WORKLOAD.name: partial(over_samples, scenario.WORKLOAD),
    }

    # -- scenarios: the scenario module's functions, as they are
    scenario_from_dict = staticmethod(scenario.scenario_from_dict)
    profile_from_toml = staticmethod(scenario.profile_from_toml)
    with_workload = staticmethod(over)  # a profile over --workload's windows
    # BaseModel seeds it (generate), shrinks its draws and fuzzes through it
    generate_from = staticmethod(scenario.generate_from)

    def size(self, scenario: KVScenario) -> int:
        return len(scenario.requests)

    def cell(self, scenario: KVScenario) -> tuple[Any, ...]:
        return (scenario.block_size,)

    def scenario_rows(self, scenario: KVScenario) -> list[tuple[str, str]]:
        s = scenario
        return [
            ("requests", str(len(s.requests))),
            ("blocks", f"{s.num_blocks} of {s.block_size} tokens"),
            ("token budget", str(s.token_budget)),
            ("max running", str(s.max_running)),
            ("step time", f"{s.step_base} + {s.step_per_token} per token"),
        ]

    def decision_kind(self, record: Record) -> str:
        if record.get("preempt"):
            return "preempt"
        if record.get("admit"):
            return "admit"
        return "step"

    # -- running
    def drive(self, scenario: KVScenario, impl: Any, *, check: bool = True) -> Iterator[Record]:
        yield {"format": FORMAT, "scenario": scenario.to_dict()}
        pending = sorted(scenario.requests, key=lambda r: (r.arrival, r.id))
        budget = scenario.token_budget
        unfinished: set[int] = set()
        now = index = plans = 0
        while True:
            while index < len(pending) and pending[index].arrival <= now:
                r = pending[index]
                index += 1
                impl.arrive(r.id, r.arrival, r.prompt, r.output, r.priority, r.prefix, now)
                unfinished.add(r.id)
                yield {"t": "arrival", "now": now, "id": r.id}
            if not unfinished:
                if index == len(pending):
                    return
                now = pending[index].arrival
                continue
            plans += 1
            if plans > MAX_PLANS:
                raise SchedulerFault(f"plan {plans}: more than {MAX_PLANS} plans: no progress")
            record = impl.plan(now)
            if check:
                self.check_record(record, plans)
            tokens = record["tokens"]
            if tokens < 1 or tokens > budget:
                raise SchedulerFault(
                    f"plan {plans}: {tokens} tokens (the budget is {budget}, "
                    f"{len(unfinished)} requests unfinished)"
                )
            for rid in record["finished"]:
                if rid not in unfinished:
                    raise SchedulerFault(f"plan {plans}: finished {rid!r}, which is not running")
                unfinished.discard(rid)
            yield record
            now += scenario.step_base + scenario.step_per_token * tokens

    def check_record(self, record: Record, number: int) -> None:
        if not isinstance(record, dict) or tuple(record) != RECORD_KEYS:
            raise SchedulerFault(f"plan {number}: malformed plan record: {record!r:.80}")
        if record["t"] != "plan" or record["plan"] != number:
            raise SchedulerFault(f"plan {number}: record type or number is wrong")
        for key in _INT_KEYS:
            if not _is_int(record[key]):
                raise SchedulerFault(f"plan {number}: {key} is not an integer")
        for key in _LIST_KEYS:
            if not isinstance(record[key], list) or not all(
                _is_int(v) or (isinstance(v, list) and all(_is_int(x) or isinstance(x, list)
                                                           for x in v))
                for v in record[key]
            ):  # fmt: skip
                raise SchedulerFault(f"plan {number}: {key} is not a list of integers")

    def replay_input(self, impl: Any, record: Record, scenario: KVScenario) -> list[Record] | None:
        if record["t"] != "arrival":
            return None
        r = next(r for r in scenario.requests if r.id == record["id"])
        impl.arrive(r.id, r.arrival, r.prompt, r.output, r.priority, r.prefix, record["now"])
        return []

    # -- search
    def shrink_passes(self) -> Sequence[ShrinkPass]:
        from tracediff.models.kvbatch.search import PASSES

        # the hand-written passes first (each knows a field), then the generator's draws
        return (*PASSES, *super().shrink_passes())

    def size_key(self, scenario: KVScenario, plans: int) -> tuple[int, ...]:
        from tracediff.models.kvbatch.search import size_key

        return size_key(scenario, plans)

    def validate(self, scenario: Any) -> None:
        if not isinstance(scenario, KVScenario):
            raise ScenarioError("not a kvbatch scenario")
        scenario_validate(scenario)

    # -- coverage
    features: tuple[str, ...] = coverage.FEATURES
    clauses: Sequence[Clause] = coverage.CLAUSES

    def trace_coverage(self, records: Iterable[Record]) -> tuple[int, tuple[int, ...]]:
        return coverage.trace_coverage(records)

    def observed_coverage(
        self, scenario: KVScenario, impl: str
    ) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        if impl != "reference":
            return None
        return coverage.observed_coverage(self.private_copy(scenario), self.drive)

    def fuzz_targets(self, scenario: Any) -> Mapping[str, int]:
        return self.clause_counts(scenario, "reference")


scenario_validate = scenario.validate

MODEL = KVBatchModel()


def _satisfies_the_seam(model: KVBatchModel) -> DecisionModel:
    return model  # mypy checks KVBatchModel against the protocol here
