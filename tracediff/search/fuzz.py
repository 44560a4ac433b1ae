"""Fuzz: search generated scenarios for a divergence, then shrink what is found.

Hypothesis draws small scenarios from the model's strategy
(:meth:`tracediff.model.DecisionModel.fuzz_strategy`) and runs each through the
implementations in lockstep (:func:`tracediff.running.runner.run_scenario`).
A scenario is a failure when they do not agree; Hypothesis shrinks it with its own
shrinker (which works on the choices behind the draw), and :mod:`tracediff.search.shrink` then
shrinks the scenario itself (fewer plans, simpler numbers) while its signature holds.

Aimed at the rules: the model says which of its rule clauses decided in each example
(:meth:`tracediff.model.DecisionModel.fuzz_targets`; the scheduler drives its observed
reference), and Hypothesis' ``target()`` steers the search toward scenarios in which the
rule clauses that have decided least often so far decide: a bug in a tie-break or at an
equality boundary is only visible where that clause decides.

Several bugs: once a failure is found, the search starts again looking for a failure with
a *different* signature, until ``max_failures`` are found or the example budget is spent.
The search is deterministic for a given ``seed`` (Hypothesis' random generator is seeded
and no example database is used), so a fuzz run in CI finds the same thing again locally.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import tracediff.model
from tracediff.executor import Executor
from tracediff.project import current_model
from tracediff.project.impls import ImplSpec
from tracediff.running.runner import IDENTICAL, ScenarioResult
from tracediff.search.shrink import (
    Scenario,
    ShrinkOptions,
    ShrinkResult,
    SignatureFn,
    default_signature,
    run_on,
    shrink,
    sign_on,
)

# Each failure found is shrunk with this many candidate evaluations by default: fuzz finds
# small scenarios (at most --max-requests), which shrink in far fewer.
DEFAULT_SHRINK_EVALUATIONS = 500
FUZZ_SHRINK = ShrinkOptions(max_evaluations=DEFAULT_SHRINK_EVALUATIONS)

ProgressFn = Callable[["FuzzProgress"], None]


@dataclass(frozen=True)
class FuzzProgress:
    examples: int
    failures: int
    elapsed: float
    phase: str  # "searching", "shrinking"


@dataclass(frozen=True)
class FuzzFailure:
    signature: Hashable
    found: Scenario  # the example Hypothesis found and shrank
    shrunk: ShrinkResult  # after tracediff's own shrinker


@dataclass(frozen=True)
class FuzzResult:
    impls: tuple[str, ...]
    examples: int
    failures: tuple[FuzzFailure, ...]
    seconds: float
    seed: int

    @property
    def ok(self) -> bool:
        return not self.failures


def fuzz(
    specs: Sequence[ImplSpec],
    *,
    max_examples: int = 100,
    seed: int = 0,
    max_failures: int = 3,
    max_requests: int = 6,
    shrink_options: ShrinkOptions = FUZZ_SHRINK,
    signature_fn: SignatureFn = default_signature,
    on_progress: ProgressFn | None = None,
    executor: Executor | None = None,
    model: tracediff.model.DecisionModel | None = None,
) -> FuzzResult:
    """Search up to ``max_examples`` scenarios for failures with distinct signatures.

    Scenarios are the ``model``'s (default: the default model), of at most ``max_requests``
    (its :meth:`~tracediff.model.DecisionModel.size`). With ``executor``, every scenario
    (and its shrinking) runs on its isolated workers; Hypothesis itself drives the search
    from this process. Every run, searching and shrinking, has the per-candidate timeout
    of ``shrink_options``."""
    from hypothesis import HealthCheck, Phase, find, settings, target
    from hypothesis.errors import NoSuchExample

    chosen = current_model() if model is None else model
    if len(specs) < 2:
        raise ValueError("fuzzing needs at least two implementations")
    started = time.monotonic()
    examples = 0
    failures: list[FuzzFailure] = []
    known: set[Hashable] = set()
    rng = random.Random(seed)
    run_timeout_s = shrink_options.run_timeout_s

    def report(phase: str) -> None:
        if on_progress is not None:
            on_progress(FuzzProgress(examples, len(failures), time.monotonic() - started, phase))

    decided_so_far: Counter[str] = Counter()

    def failing(scenario: Scenario) -> bool:
        nonlocal examples
        examples += 1
        result: ScenarioResult = run_on(executor, scenario, specs, run_timeout_s)
        report("searching")
        if result.status == IDENTICAL:
            score = rarity(chosen.fuzz_targets(scenario), decided_so_far)
            target(score, label="rarely decided rule clauses")
            return False
        signature = sign_on(executor, signature_fn, scenario, result, specs, run_timeout_s)
        return signature is not None and signature not in known

    while len(failures) < max_failures and examples < max_examples:
        budget = max_examples - examples
        config = settings(
            max_examples=budget,
            database=None,
            deadline=None,
            phases=(Phase.generate, Phase.target, Phase.shrink),
            suppress_health_check=list(HealthCheck),
        )
        try:
            found = find(
                chosen.fuzz_strategy(max_requests),
                failing,
                settings=config,
                random=random.Random(rng.getrandbits(64)),
            )
        except NoSuchExample:
            break
        report("shrinking")
        shrunk = shrink(
            found,
            specs,
            signature_fn=signature_fn,
            options=shrink_options,
            executor=executor,
        )
        if shrunk.signature is None:
            break  # a flaky implementation: the failure did not reproduce
        known.add(shrunk.signature)
        failures.append(FuzzFailure(shrunk.signature, found, shrunk))
    return FuzzResult(
        impls=tuple(s.name for s in specs),
        examples=examples,
        failures=tuple(failures),
        seconds=time.monotonic() - started,
        seed=seed,
    )


def rarity(decided: Mapping[str, int], decided_so_far: Counter[str]) -> float:
    """How much a scenario makes rarely seen rule clauses decide: each clause it made
    decide (``decided``, the model's :meth:`~tracediff.model.DecisionModel.fuzz_targets`)
    scores 1 / (1 + the examples that made it decide before). Updates the counts."""
    score = 0.0
    for clause, plans in decided.items():
        if plans:
            score += 1.0 / (1 + decided_so_far[clause])
            decided_so_far[clause] += 1
    return score
