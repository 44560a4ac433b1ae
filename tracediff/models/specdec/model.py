"""The speculative-decoding scheduler as a tracediff model (:class:`tracediff.model.DecisionModel`).

Everything the core needs of this engine is reached through :data:`MODEL`; the core never
imports this package. The registry finds it through the ``tracediff.models`` entry point
``specdec`` (and, in a source checkout that was never installed, by its built-in name).
Imports are lazy so that listing models costs nothing.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from tracediff.model import Record, ShrinkPass


class SpecDecModel:
    """The speculative-decoding request scheduler of docs/scheduler.md."""

    name = "specdec"
    title = "speculative-decoding request scheduler (docs/scheduler.md)"
    methods = ("arrive", "plan", "complete")
    decide = "plan"
    builtin_impls: Mapping[str, str] = {
        "reference": "tracediff.models.specdec.sched.reference:ReferenceScheduler",
        "optimized": "tracediff.models.specdec.sched.optimized:OptimizedScheduler",
        "optimized-check": "tracediff.models.specdec.sched.optimized:CheckedOptimizedScheduler",
    }
    checked_impls: Mapping[str, str] = {"optimized": "optimized-check"}
    default_impls = ("reference", "optimized")
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
        from tracediff.models.specdec.scenario.generator import generate

        return generate(profile, seed)

    def private_copy(self, scenario: Any) -> Any:
        # Every dataclass in it is copied (an implementation may ``object.__setattr__`` a
        # frozen one); numbers, strings and tuples of them cannot change. Cheaper than
        # ``deepcopy``, which matters: the runner makes two per implementation.
        mine = copy.copy(scenario)
        object.__setattr__(mine, "params", copy.copy(scenario.params))
        object.__setattr__(mine, "truth", copy.copy(scenario.truth))
        object.__setattr__(mine, "requests", tuple(copy.copy(r) for r in scenario.requests))
        return mine

    def size(self, scenario: Any) -> int:
        return len(scenario.requests)

    # -- running ---------------------------------------------------------------------
    def drive(self, scenario: Any, impl: Any, *, check: bool = True) -> Iterator[Record]:
        from tracediff.models.specdec.engine.driver import drive

        return drive(scenario, impl, check=check)

    def check_record(self, record: Record, number: int) -> None:
        from tracediff.models.specdec.engine.driver import check_plan

        check_plan(record, number)

    def engine_files(self) -> tuple[str, ...]:
        return (
            os.path.join("specdec", "engine", "driver.py"),
            os.path.join("specdec", "engine", ""),
        )

    # -- traces ----------------------------------------------------------------------
    def trace_checker(self, header: Mapping[str, Any], name: str) -> Any:
        from tracediff.models.specdec.schema import TraceChecker

        return TraceChecker(header, name)

    def rows_view(self, record: Record) -> Record:
        from tracediff.models.specdec.sched.record import rows_view

        result: Record = rows_view(record)
        return result

    def present(self, record: Record) -> list[str]:
        return [repr(self.rows_view(record))]

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


MODEL = SpecDecModel()
