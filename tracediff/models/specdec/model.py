"""The speculative-decoding scheduler as a tracediff model (:class:`tracediff.model.DecisionModel`).

Everything the core needs of this engine is reached through :data:`MODEL`; the core never
imports this package. The registry finds it through the ``tracediff.models`` entry point
``specdec`` (and, in a source checkout that was never installed, by its built-in name).
Imports are lazy so that listing models costs nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracediff.model import Clause, Record, ShrinkPass


class SpecDecModel:
    """The speculative-decoding request scheduler of docs/scheduler.md."""

    name = "specdec"
    title = "speculative-decoding request scheduler (docs/scheduler.md)"
    methods: tuple[str, ...] = ("arrive", "plan", "complete")
    decide = "plan"
    builtin_impls: Mapping[str, str] = {
        "reference": "tracediff.models.specdec.sched.reference:ReferenceScheduler",
        "optimized": "tracediff.models.specdec.sched.optimized:OptimizedScheduler",
        "optimized-check": "tracediff.models.specdec.sched.optimized:CheckedOptimizedScheduler",
    }
    checked_impls: Mapping[str, str] = {"optimized": "optimized-check"}
    default_impls: tuple[str, ...] = ("reference", "optimized")
    size_unit = "request"
    # a plan's choice: the round it runs and the probes that chose it
    choice_fields: Mapping[str, frozenset[str]] = {
        "plan": frozenset({"round", "probe", "refresh"}),
    }

    # -- scenarios -------------------------------------------------------------------
    def scenario_from_dict(self, data: Any) -> Any:
        from tracediff.models.specdec.scenario.model import Scenario

        return Scenario.from_dict(data)

    def load_profile(self, name: str) -> Any:
        from tracediff.models.specdec.scenario.profiles import load_profile

        return load_profile(name)

    def profile_names(self) -> list[str]:
        from tracediff.models.specdec.scenario.profiles import available_profiles

        return available_profiles()

    def generate(self, profile: Any, seed: int) -> Any:
        if profile.workload is not None:
            from tracediff.models.specdec.scenario.workload import from_window

            return from_window(profile, seed, profile.workload.window(seed))
        from tracediff.models.specdec.scenario.generator import generate

        return generate(profile, seed)

    def with_workload(self, profile: Any, workloads: Any) -> Any:
        from tracediff.models.specdec.scenario.profiles import with_workload

        return with_workload(profile, workloads)

    def private_copy(self, scenario: Any) -> Any:
        from tracediff.models.specdec.scenario.model import private_copy

        return private_copy(scenario)

    def size(self, scenario: Any) -> int:
        return len(scenario.requests)

    def relabel(self, scenario: Any, profile: str) -> Any:
        return dataclasses.replace(scenario, profile=profile)

    def data_dir(self, kind: str) -> Path | None:
        from tracediff.resources import builtin_dir

        return builtin_dir(kind)

    def cell(self, scenario: Any) -> tuple[Any, ...]:
        return (scenario.params.allocation, scenario.params.ragged)

    # -- running ---------------------------------------------------------------------
    def drive(self, scenario: Any, impl: Any, *, check: bool = True) -> Iterator[Record]:
        from tracediff.models.specdec.engine.driver import drive

        return drive(scenario, impl, check=check)

    def exec_factory(self, name: str, target: str, **options: Any) -> Any:
        # specdec's own layout (docs/protocol.md), which the Rust port speaks
        from tracediff.models.specdec.external import factory_for

        return factory_for(name, target, **options)

    def serve_impl(self, factory: Any, name: str, read_fd: int, write_fd: int) -> int:
        """``tracediff serve``: the implementation in specdec's layout."""
        from tracediff.models.specdec.serve import serve

        return serve(factory, name, read_fd, write_fd)

    def check_record(self, record: Record, number: int) -> None:
        _hot().check_plan(record, number)  # once per plan record: no import on the way

    def engine_files(self) -> tuple[str, ...]:
        return (
            os.path.join("specdec", "engine", "driver.py"),
            os.path.join("specdec", "engine", ""),
        )

    def state_event(
        self, method: str, args: tuple[Any, ...], result: Any, index: int
    ) -> tuple[str, int]:
        if method == "arrive":
            # the driver yields the arrival record right after this call, in the same step
            return f"arrival of request {args[0].id}", index
        if method == "complete":
            # the completion record was yielded in the step before this call
            return f"completion of plan {args[0].get('round')}", index - 1
        number = result.get("plan") if isinstance(result, dict) else None
        return f"plan {number}", index

    # -- traces ----------------------------------------------------------------------
    def trace_checker(self, header: Mapping[str, Any], name: str) -> Any:
        from tracediff.models.specdec.schema import TraceChecker

        return TraceChecker(header, name)

    def upgrade_trace(self, path: str, output: str | None) -> Any:
        from tracediff.models.specdec.upgrade import upgrade_trace

        return upgrade_trace(path, output)

    def as_rows(self, record: Record) -> Record:
        from tracediff.models.specdec.sched.record import packed_record, rows_view
        from tracediff.trace.columns import ColumnError

        if record.get("t") != "plan":
            return record
        try:
            record = packed_record(record)
        except ColumnError:
            pass  # rows no column can hold: shown as the implementation returned them
        result: Record = rows_view(record)
        return result

    clock_seconds = 1e-6  # the clock counts microseconds (``tracediff show``)

    def present_state(self, state: Mapping[str, Any], title: str) -> Any:
        """``replay --state``'s view: requests, lanes, survival curves, rounds in flight."""
        from tracediff.models.specdec.state_view import state_renderable

        return state_renderable(state, title)

    def replay(self, reader: Any, spec: Any, *, until: int | None, want_state: bool) -> Any:
        from tracediff.models.specdec.replay import replay_trace

        return replay_trace(reader, spec, until=until, want_state=want_state, model=self)

    def rows_view(self, record: Record) -> Record:
        result: Record = _hot().rows_view(record)
        return result

    # -- presenting -------------------------------------------------------------------
    def labelled(self, record: Record, columns: Mapping[str, Sequence[str]]) -> Any:
        from tracediff.models.specdec.present import labelled

        return labelled(record, columns)

    def scenario_rows(self, scenario: Any) -> list[tuple[str, str]]:
        from tracediff.models.specdec.present import scenario_rows

        return scenario_rows(scenario)

    def decision_kind(self, record: Record) -> str:
        from tracediff.models.specdec.present import decision_kind

        return decision_kind(record)

    def decision_summary(self, record: Record) -> str:
        from tracediff.models.specdec.present import decision_summary

        return decision_summary(record)

    # -- coverage --------------------------------------------------------------------
    @property
    def features(self) -> tuple[str, ...]:
        from tracediff.models.specdec.coverage import FEATURES

        return FEATURES

    @property
    def informational(self) -> frozenset[str]:
        from tracediff.models.specdec.coverage import INFORMATIONAL

        return INFORMATIONAL

    @property
    def clauses(self) -> Sequence[Clause]:
        from tracediff.models.specdec.sched.clauses import CLAUSES

        return CLAUSES

    spec = "docs/scheduler.md"

    def trace_coverage(self, records: Iterable[Record]) -> tuple[int, tuple[int, ...]]:
        from tracediff.models.specdec.coverage import trace_coverage

        return trace_coverage(records)

    def observed_coverage(
        self, scenario: Any, impl: str
    ) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
        # the reference, observed: DecidingReference counts the clauses that decided
        from tracediff.models.specdec.coverage import observed_coverage

        return observed_coverage(scenario, impl, self.private_copy)

    # What a worker imports before its first scenario (tracediff.model.worker_modules): the
    # driver, the engine, the schema, the built-in schedulers and the exec: adapter.
    worker_modules: tuple[str, ...] = (
        "tracediff.models.specdec.engine.driver",
        "tracediff.models.specdec.schema",
        "tracediff.models.specdec.sched.reference",
        "tracediff.models.specdec.sched.optimized",
        "tracediff.models.specdec.external",
    )

    # -- commands --------------------------------------------------------------------
    # specdec's own: the plan() timing table and the torch engine (imported when invoked)
    commands: Mapping[str, str] = {
        "bench": "tracediff.models.specdec.commands.bench:bench",
        "live": "tracediff.models.specdec.commands.live:live",
    }

    # -- search (shrink, fuzz) -------------------------------------------------------
    def shrink_passes(self) -> Sequence[ShrinkPass]:
        from tracediff.models.specdec.search import PASSES

        return PASSES

    def size_key(self, scenario: Any, plans: int) -> tuple[int, ...]:
        from tracediff.models.specdec.search import size_key

        return size_key(scenario, plans)

    def validate(self, scenario: Any) -> None:
        scenario.validate()

    def fuzz_strategy(self, max_size: int) -> Any:
        from tracediff.models.specdec.search import fuzz_strategy

        return fuzz_strategy(max_size)

    def fuzz_targets(self, scenario: Any) -> Mapping[str, int]:
        from tracediff.models.specdec.search import fuzz_targets

        return fuzz_targets(scenario)


@functools.cache
def _hot() -> Any:
    """The functions called once per record, imported once (the model itself loads lazily,
    so that listing models or commands imports no scheduler)."""
    from types import SimpleNamespace

    from tracediff.models.specdec.engine.driver import check_plan
    from tracediff.models.specdec.sched.record import rows_view

    return SimpleNamespace(check_plan=check_plan, rows_view=rows_view)


MODEL = SpecDecModel()
