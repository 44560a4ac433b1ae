"""Shrink a diverging scenario to a small repro that diverges *the same way*.

Designing shrink passes
=======================

(After the essay in Hypothesis' ``Shrinker`` docstring, adapted to a structured input.)

A shrinker is a greedy search: it holds the smallest *interesting* scenario found so far
and keeps trying small, local changes to it. A candidate is interesting when it is valid
(the model's ``validate``), runs through the same implementations with
:func:`tracediff.running.runner.run_scenario`, and still fails with the same *signature* as the
original. Whatever improves is kept at once and the search continues from there; it stops
when a whole round of passes changes nothing, or when its *evaluation budget* is spent (the
best so far is still a valid repro, so stopping early loses only size, never correctness).

Determinism is the product. The same scenario, implementations and options give the same
repro on any machine at any load, because nothing the search decides depends on time: the
budget is a number of candidate evaluations (:data:`DEFAULT_EVALUATIONS`), every pass bounds
itself by evaluations too, and each candidate runs under the user's per-candidate timeout
(:data:`DEFAULT_RUN_TIMEOUT_S`, ``--timeout``), never one derived from how fast the original
ran. A candidate therefore times out only if it hangs (or is slower than that generous
limit), not because the machine is busy. A wall-clock limit (:data:`DEFAULT_MAX_SECONDS`,
``--max-seconds``) remains only as a safety cap; when it stops a search, the result says so,
since that repro depends on the machine's speed.

When the search stops by itself, the repro is **1-minimal with respect to the passes**: a
whole round of every pass, run from the final scenario, found no single step (one
deletion, merge, feature switched off, number lowered...) that keeps the signature and is
smaller in the model's order (a model may name a pass that is not a step of that kind).

The passes and the order are the model's (:meth:`tracediff.model.DecisionModel.shrink_passes`,
:meth:`~tracediff.model.DecisionModel.size_key`; the scheduler's, with the essay on what
makes a good pass, are in :mod:`tracediff.models.specdec.search`); this module is the
search, the same for every model. The order, not the passes, guarantees termination: every
accepted candidate is strictly smaller in one fixed, well-founded order, so a pass may
propose anything, including candidates that are larger in it; they are simply rejected, and
a pass may be a heuristic without endangering the search. A pass works on the shrink through
:class:`tracediff.model.Shrinking`: the best so far, :meth:`Shrinker.consider`,
:meth:`Shrinker.holds` (the predicate of :func:`find_integer` and :func:`minimize_int`),
adaptive deletion over a sequence (:meth:`Shrinker.delete_runs`) and :meth:`Shrinker.minimize`.

The signature keeps the search honest. "Still fails" is not enough: shrinking a
decision divergence until it becomes a crash, or an unrelated float difference, produces a
small scenario that reproduces a different bug. The default :func:`default_signature` is
(status, record type, first differing top-level field), and ``signature_fn`` lets the
divergence explanation of ``compare/`` replace it without touching the passes.

**Never run a candidate twice.** Candidates are cached by their canonical form; passes
often regenerate a candidate another pass already tried.

**Out of local minima.** A greedy search stops where no single step helps, and where that
is depends on the start. So, for every model: the adaptive deletion of ``delete_runs`` is
followed, above ``SMALL_SIZE`` (4) items, by ddmin's subsets and complements
(:meth:`Shrinker.ddmin`); and when a whole round accepts nothing while the best is above 4,
the search *escapes* (:meth:`Shrinker._escape`): every combination of at most 4 of the
items (then of fewer than the best), the model's passes named ``escape: ...`` (kept out of
the rounds: they are searches of their own), then scenarios of at most 4 fuzzed by
Hypothesis from the best's profile with a ``Random`` seeded from the best's bytes, and
last the passes named ``last escape: ...`` (searches aimed at one kind of bug, which run
only where nothing general found a smaller scenario, so they never change what those
find: a general search often finds a smaller repro than an aimed one). What it
finds, the passes polish. Each escape spends a share of the evaluations left and decides
on nothing but the best, so it is as deterministic as the rest. A repro still above 4 says
so in :meth:`ShrinkResult.stop_reason`, with what the escapes tried (docs/shrinking.md).

Passes run in a loop until a whole round accepts nothing. Each candidate runs under the
per-candidate timeout, so a candidate that makes an implementation spin is a rejected
candidate (or, when the original hung, an interesting one), not a hung shrinker; a hang
costs the whole timeout per candidate, so give such a shrink a short ``--timeout``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
import re
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TypeAlias

import tracediff.model
from tracediff.errors import ScenarioError
from tracediff.executor import DONE, Executor, Notify, grace
from tracediff.filenames import component, inside
from tracediff.project.corpus import model_of, scenario_document
from tracediff.project.impls import ImplSpec
from tracediff.replay import difference_path
from tracediff.running.runner import (
    DIVERGED,
    ERROR,
    IDENTICAL,
    TIMEOUT,
    ScenarioResult,
    run_scenario,
)
from tracediff.running.runner import trace_records as runner_trace_records
from tracediff.trace import encode

Scenario: TypeAlias = Any  # a model's scenario (tracediff.model.Scenario), read by its model
SignatureFn = Callable[[Scenario, ScenarioResult, Sequence[ImplSpec]], Hashable | None]
ProgressFn = Callable[["ShrinkProgress"], None]

# The defaults of ShrinkOptions (docs/replay-shrink-golden.md). 2000 evaluations shrink every
# broken implementation of tests/impls to its minimum with room to spare (they use 37 to
# 248); at a few to a few hundred milliseconds per small candidate that is well under the
# cap. The per-candidate timeout is generous on purpose: it must never fire for a candidate
# that merely runs on a busy machine.
DEFAULT_EVALUATIONS = 2000
DEFAULT_RUN_TIMEOUT_S = 60.0
DEFAULT_MAX_SECONDS = 3600.0

# The repro size aimed for, in the model's size (requests, jobs...). While a whole round of
# passes accepts nothing and the best is larger, the search looks elsewhere (_escape): every
# combination of at most SMALL_SIZE of its items, then scenarios of at most SMALL_SIZE
# fuzzed with a seed taken from the best; each within a share of the evaluations left.
SMALL_SIZE = 4
COMBINATIONS_SHARE = 0.2  # of the evaluations left, per escape, for the combinations
FUZZ_SHARE = 0.15  # ... and for the fuzzed scenarios
FUZZ_EXAMPLES = 400  # fuzzed scenarios per escape at most
DDMIN_ABOVE = SMALL_SIZE  # delete_runs adds ddmin's subsets and complements above this
# A model's pass whose name starts with this runs only in an escape (after the combinations,
# before the fuzzed scenarios), not in every round: an expensive search of its own.
ESCAPE_PASS = "escape: "
# ... and one whose name starts with this runs after the fuzzed scenarios, only when
# nothing else found a smaller scenario: a search aimed at one kind of bug, which must not
# take the place of what the general searches find (they often find a smaller repro).
LAST_ESCAPE_PASS = "last escape: "

# Why a search stopped (ShrinkResult.stopped).
MINIMUM = "minimum"  # a whole round of passes accepted nothing: 1-minimal w.r.t. the passes
BUDGET = "evaluation budget"  # deterministic: the same stop on any machine
TIME_CAP = "time cap"  # the wall-clock safety cap: the repro depends on the machine's speed
REPEATS = "repeated candidates"  # the passes kept proposing candidates already tried
# Candidates a pass may propose that are not run (already tried, the current best, or
# invalid), per candidate of the budget: they cost no run, but a pass that proposes only
# those would never end. The passes of tests/impls' shrinks stay far below it.
REPEATS_PER_EVALUATION = 50


@dataclass(frozen=True)
class ShrinkOptions:
    """How far a shrink may go. Only ``max_seconds`` involves the clock, as a safety cap."""

    max_evaluations: int = DEFAULT_EVALUATIONS  # candidate runs, the budget
    run_timeout_s: float = DEFAULT_RUN_TIMEOUT_S  # per candidate (and the original)
    max_seconds: float | None = DEFAULT_MAX_SECONDS  # None: no wall-clock cap at all

    def __post_init__(self) -> None:
        if self.max_evaluations < 1:
            raise ValueError(
                f"the evaluation budget must be at least 1 candidate, got {self.max_evaluations}"
            )
        if not self.run_timeout_s > 0:
            raise ValueError(
                f"the per-candidate timeout must be positive, got {self.run_timeout_s}"
            )
        if self.max_seconds is not None and not self.max_seconds > 0:
            raise ValueError(f"the wall-clock cap must be positive, got {self.max_seconds}")


DEFAULTS = ShrinkOptions()


# -- signatures ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Signature:
    """How a scenario fails: (status, record type, first differing top-level field).

    For an error, ``record_type`` is the failing implementation and ``field`` its last
    message line with digits normalised; for a timeout, the implementation that hung.
    """

    status: str
    record_type: str | None
    field: str | None

    def slug(self) -> str:
        return slugify("-".join(p for p in (self.status, self.record_type, self.field) if p))

    def describe(self) -> str:
        parts = [self.status]
        if self.record_type:
            parts.append(f"at a {self.record_type} record" if self.status == DIVERGED else "in")
            if self.status != DIVERGED:
                parts.append(self.record_type)
        if self.field:
            parts.append(f"field {self.field}" if self.status == DIVERGED else f"({self.field})")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "record_type": self.record_type, "field": self.field}


def slugify(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "divergence"


def signature_slug(signature: Hashable) -> str:
    slug = getattr(signature, "slug", None)
    return str(slug()) if callable(slug) else slugify(str(signature))


def default_signature(
    scenario: Scenario, result: ScenarioResult, specs: Sequence[ImplSpec]
) -> Signature | None:
    """The signature of a run's failure, or None when every implementation agreed."""
    if result.status == IDENTICAL:
        return None
    if result.status == ERROR:
        last = result.message.strip().splitlines()[-1] if result.message.strip() else ""
        return Signature(ERROR, result.failed_impl, re.sub(r"\d+", "N", last)[:120])
    if result.status == TIMEOUT:
        return Signature(TIMEOUT, result.failed_impl, None)
    return Signature(DIVERGED, result.record_type, divergence_field(scenario, result, specs))


def compare_signature(
    scenario: Scenario, result: ScenarioResult, specs: Sequence[ImplSpec]
) -> Hashable | None:
    """The divergence explanation's signature (``tracediff.compare``): kind (decision, value,
    structure, error, timeout) and field path with indices normalised. Finer than
    :func:`default_signature`; it re-runs the implementations up to the divergence."""
    if result.status == IDENTICAL:
        return None
    from tracediff.running.explain import explain

    signature: Hashable = explain(scenario, specs, result, context=0, state=False).signature
    return signature


SIGNATURES: dict[str, SignatureFn] = {"compare": compare_signature, "fields": default_signature}


def divergence_field(
    scenario: Scenario, result: ScenarioResult, specs: Sequence[ImplSpec]
) -> str | None:
    """The first differing top-level key of the two records at the divergence index."""
    index = result.divergence
    if index is None:
        return None
    records = [_record_at(scenario, spec, index) for spec in specs]
    first = records[0]
    for other in records[1:]:
        if _same(first, other):
            continue
        if first is None or other is None:
            return "<end>"
        if first.get("t") != other.get("t"):
            return "t"
        path = difference_path(first, other)
        return None if not path else str(path[0])
    return None


def _record_at(scenario: Scenario, spec: ImplSpec, index: int) -> dict[str, Any] | None:
    try:
        return next(islice(runner_trace_records(scenario, spec), index, index + 1), None)
    except Exception:  # noqa: BLE001 - an implementation that fails first has no record here
        return None


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return encode(a) == encode(b)


# -- the order ---------------------------------------------------------------------------------
def size_key(scenario: Scenario, plans: int) -> tuple[int, ...]:
    """The shrink order of the scenario's model: a candidate is accepted only if its key is
    smaller (:meth:`tracediff.model.DecisionModel.size_key`)."""
    return tracediff.model.of(scenario).size_key(scenario, plans)


def scenario_plans(result: ScenarioResult) -> int:
    return max((s.plans for s in result.impls), default=0)


# -- results and progress -------------------------------------------------------------------
@dataclass(frozen=True)
class ShrinkProgress:
    pass_name: str
    attempts: int  # candidate evaluations so far
    improvements: int
    requests: int
    plans: int
    elapsed: float
    budget: int = DEFAULT_EVALUATIONS


@dataclass(frozen=True)
class ShrinkResult:
    initial: Scenario
    shrunk: Scenario
    signature: Hashable | None  # None: the scenario did not fail; nothing was shrunk
    initial_result: ScenarioResult
    result: ScenarioResult
    impls: tuple[str, ...]
    attempts: int  # candidate evaluations used (the original's run not counted)
    improvements: int
    seconds: float  # reported, never decided on
    stopped: str = MINIMUM  # MINIMUM, BUDGET, TIME_CAP or REPEATS
    options: ShrinkOptions = DEFAULTS
    # the escapes from local minima above SMALL_SIZE: one line each, what was tried
    escapes: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """True when the search stopped by itself: 1-minimal with respect to its passes."""
        return self.stopped == MINIMUM

    @property
    def evaluations(self) -> int:
        return self.attempts

    def stop_reason(self) -> str:
        """Why the search stopped, in one sentence for a report (two when the repro is
        still above SMALL_SIZE: the second says why it is not smaller)."""
        reason = self._stop_reason()
        size = tracediff.model.of(self.shrunk).size(self.shrunk)
        if self.signature is None or size <= SMALL_SIZE:
            return reason
        unit = tracediff.model.of(self.shrunk).size_unit
        if self.stopped == MINIMUM:
            tried = "; ".join(self.escapes) or "nothing"
            why = (
                f"no pass step, and no search for a smaller scenario with the same signature "
                f"({tried}), found one that fails the same way"
            )
        else:
            why = "the search stopped before it could look further (above)"
        return f"{reason}. The repro has {size} {unit}s, above the target of {SMALL_SIZE}: {why}"

    def _stop_reason(self) -> str:
        if self.stopped == MINIMUM:
            return (
                "stopped at a minimum: 1-minimal with respect to the passes (no single pass "
                f"step makes it smaller), {self.attempts} of {self.options.max_evaluations} "
                "evaluations used"
            )
        if self.stopped == BUDGET:
            return (
                f"stopped at the evaluation budget ({self.options.max_evaluations} candidates), "
                "not at a minimum: a larger --budget may shrink it further (the same repro on "
                "any machine)"
            )
        if self.stopped == REPEATS:
            return (
                f"stopped after {self.attempts} evaluations: the model's shrink passes proposed "
                f"{self.options.max_evaluations * REPEATS_PER_EVALUATION:,} candidates that "
                "were already tried, the current best or invalid (a pass that does not end: "
                "fix the model's shrink_passes); the scenario shrunk so far is kept"
            )
        return (
            f"stopped by the wall-clock safety cap ({self.options.max_seconds:g} s) after "
            f"{self.attempts} evaluations, not at a minimum: this repro depends on the "
            "machine's speed; raise --max-seconds, or lower --budget to stop deterministically"
        )

    @property
    def failing(self) -> bool:
        return self.signature is not None

    @property
    def before(self) -> tuple[int, int]:
        """(size, plans) of the original scenario: its model's size (the scheduler's: its
        requests) and the decisions its run made."""
        return tracediff.model.of(self.initial).size(self.initial), scenario_plans(
            self.initial_result
        )

    @property
    def after(self) -> tuple[int, int]:
        """(size, plans) of the shrunk scenario."""
        return tracediff.model.of(self.shrunk).size(self.shrunk), scenario_plans(self.result)


class _Stop(Exception):
    """The budget, the safety cap or the passes' repeats end the search; ``reason`` is
    BUDGET, TIME_CAP or REPEATS."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# -- the shrinker ---------------------------------------------------------------------------
class Shrinker:
    """Greedy, signature-preserving minimisation of one scenario (see the module essay)."""

    def __init__(
        self,
        scenario: Scenario,
        specs: Sequence[ImplSpec],
        *,
        signature_fn: SignatureFn = default_signature,
        options: ShrinkOptions = DEFAULTS,
        on_progress: ProgressFn | None = None,
        clock: Callable[[], float] = time.monotonic,
        executor: Executor | None = None,
    ) -> None:
        if len(specs) < 2:
            raise ValueError("shrinking needs at least two implementations")
        self.initial = scenario
        self.model = tracediff.model.of(scenario)  # its passes, order and validity
        self.specs = tuple(specs)
        self.signature_fn = signature_fn
        self.executor = executor
        self.options = options
        self.on_progress = on_progress
        self.clock = clock
        self.started = clock()
        self.attempts = 0
        self.proposals = 0  # candidates the passes proposed, run or not
        self.improvements = 0
        self.seen: set[str] = set()
        self.pass_name = "start"
        self.run_timeout: float = options.run_timeout_s  # the user's, never a measured one
        self.signature: Hashable | None = None
        self.best = scenario
        self.best_result: ScenarioResult | None = None
        self.best_key: tuple[int, ...] = ()
        self.escapes: list[str] = []
        self._escape_passes: list[tracediff.model.ShrinkPass] = []  # both kinds, in order
        # the sequence (items, rebuild) a pass last deleted from whose length is the
        # model's size: the escape's combinations are taken from it
        self._size_sequence: (
            tuple[Callable[[Scenario], tuple[Any, ...]], Callable[[tuple[Any, ...]], Scenario]]
            | None
        ) = None

    # -- running candidates: here, or on the executor's isolated workers -------------------
    def _run(self, scenario: Scenario, timeout_s: float | None) -> ScenarioResult:
        return run_on(self.executor, scenario, self.specs, timeout_s)

    def _sign(self, scenario: Scenario, result: ScenarioResult) -> Hashable | None:
        return sign_on(
            self.executor, self.signature_fn, scenario, result, self.specs, self.run_timeout
        )

    # -- driving ---------------------------------------------------------------------------
    def begin(self) -> ScenarioResult:
        """Run the initial scenario and take its signature: what :meth:`shrink` does first.
        After it, one pass can be run on its own (``run_pass(shrinker)``), as a test of
        that pass does."""
        initial_result = self._run(self.initial, self.run_timeout)
        self.seen.add(_canonical(self.initial))
        self.signature = self._sign(self.initial, initial_result)
        self.best_result = initial_result
        self.best_key = self.model.size_key(self.initial, scenario_plans(initial_result))
        return initial_result

    def shrink(self) -> ShrinkResult:
        initial_result = self.begin()
        stopped = MINIMUM
        if self.signature is not None:
            self._report()
            try:
                self._loop()
            except _Stop as stop:
                stopped = stop.reason
        assert self.best_result is not None
        return ShrinkResult(
            initial=self.initial,
            shrunk=self.best,
            signature=self.signature,
            initial_result=initial_result,
            result=self.best_result,
            impls=tuple(s.name for s in self.specs),
            attempts=self.attempts,
            improvements=self.improvements,
            seconds=self.clock() - self.started,
            stopped=stopped,
            options=self.options,
            escapes=tuple(self.escapes),
        )

    def _loop(self) -> None:
        every = self.model.shrink_passes()
        kinds = (ESCAPE_PASS, LAST_ESCAPE_PASS)
        passes = [p for p in every if not p[0].startswith(kinds)]
        self._escape_passes = [p for p in every if p[0].startswith(kinds)]
        while True:
            before = self.best_key
            for name, run_pass in passes:
                self.pass_name = name
                run_pass(self)
            if self.best_key != before:
                continue
            size = self.model.size(self.best)
            if size > SMALL_SIZE:
                if not self._escape():
                    return
            elif size <= 1 or not self._combinations(size - 1):
                return

    # -- out of a local minimum ------------------------------------------------------------
    def _escape(self) -> bool:
        """A whole round accepted nothing and the best is above SMALL_SIZE: look for a
        smaller scenario with the same signature elsewhere than one step away. First every
        combination of at most SMALL_SIZE of the best's items (the sequence its model's
        deletion pass works on), then the model's ``escape: ...`` passes, then scenarios
        of at most SMALL_SIZE fuzzed from the best's profile (Hypothesis, seeded from the
        best's bytes), then the model's ``last escape: ...`` passes. True when one was kept:
        the passes then polish it. Deterministic: only counts and the best decide."""
        size = self.model.size(self.best)
        found = self._combinations(SMALL_SIZE) or self._model_escapes(size, ESCAPE_PASS)
        if not found:
            found = self._fuzz_smaller()
        if not found:
            found = self._model_escapes(size, LAST_ESCAPE_PASS)
        if not found:
            self.escapes.append(f"at {size}: nothing smaller")
        return found

    def _model_escapes(self, size: int, kind: str) -> bool:
        """The model's escape passes of one kind, in order, until one finds a smaller
        scenario; each says in ``escapes`` what it found."""
        for name, run_pass in self._escape_passes:
            if not name.startswith(kind):
                continue
            self.pass_name = name
            before = self.best_key
            run_pass(self)
            found = self.best_key != before
            what = "found one" if found else "nothing"
            self.escapes.append(f"at {size}: {name.removeprefix(kind)}, {what}")
            if found:
                return True
        return False

    def _combinations(self, most: int) -> bool:
        """Every combination of at most ``most`` of the best's items (a sample, seeded from
        the best, when they are more than the share of the evaluations left allows)."""
        sequence = self._size_sequence
        if sequence is None:
            return False
        items, rebuild = sequence
        base = items(self.best)
        if len(base) != self.model.size(self.best):
            return False
        limit = self.attempts + max(1, int((self.budget - self.attempts) * COMBINATIONS_SHARE))
        tried = 0
        self.pass_name = "escape: combinations" if len(base) > SMALL_SIZE else "fewer items"
        rng = random.Random(_digest(self.best))
        sizes = list(range(1, min(most, len(base) - 1) + 1))
        if len(base) > SMALL_SIZE:  # then fewer than the best, if not at most SMALL_SIZE
            sizes += list(range(len(base) - 2, most, -1))
        for k in sizes:
            every = math.comb(len(base), k)
            if every <= max(0, limit - self.attempts):
                chosen: Iterable[tuple[int, ...]] = itertools.combinations(range(len(base)), k)
            else:  # more than the share: a sample, seeded from the best
                chosen = _sampled_combinations(rng, len(base), k, limit - self.attempts)
            for kept in chosen:
                if self.attempts >= limit:
                    break
                tried += 1
                if self.consider(rebuild(tuple(base[i] for i in kept))):
                    if len(base) > SMALL_SIZE:
                        self.escapes.append(
                            f"at {len(base)}: {k} of them kept after {tried} combinations"
                        )
                    return True
        if len(base) > SMALL_SIZE:
            self.escapes.append(f"at {len(base)}: {tried} combinations of fewer items")
        return False

    def _fuzz_smaller(self) -> bool:
        strategy = self._smaller_strategy()
        if strategy is None:
            return False
        from hypothesis import HealthCheck, Phase, find, settings
        from hypothesis.errors import NoSuchExample, Unsatisfiable

        size = self.model.size(self.best)
        share = max(1, int((self.budget - self.attempts) * FUZZ_SHARE))
        limit = self.attempts + min(FUZZ_EXAMPLES, share)
        label = self.best
        self.pass_name = "escape: fuzz"
        tried = 0
        stop: list[_Stop] = []
        # Hypothesis runs the example it found once more: the answer must be the same,
        # though the candidate is the best by then (consider would say no)
        answers: dict[str, bool] = {}

        def kept(candidate: Scenario) -> bool:
            nonlocal tried
            relabelled = _relabel(self.model, candidate, label)
            key = _canonical(relabelled)
            if key in answers:
                return answers[key]
            if stop or self.attempts >= limit:
                return False
            tried += 1
            try:
                answers[key] = self.consider(relabelled)
            except _Stop as reason:
                stop.append(reason)
                return False
            return answers[key]

        config = settings(
            max_examples=limit - self.attempts,
            database=None,
            deadline=None,
            phases=(Phase.generate,),
            suppress_health_check=list(HealthCheck),
        )
        try:
            find(strategy, kept, settings=config, random=random.Random(_digest(label)))
            found = True
        except (NoSuchExample, Unsatisfiable):  # none found, or none of at most 4 drawn
            found = False
        if stop:
            raise stop[0]
        self.escapes.append(
            f"at {size}: {tried} fuzzed scenarios of at most {SMALL_SIZE}"
            + (", one kept" if found else "")
        )
        return found

    def _smaller_strategy(self) -> Any:
        """Scenarios of at most SMALL_SIZE: through the generator's draws with the best's
        own profile when it was drawn that way, else the model's fuzz strategy."""
        from tracediff.search import draws

        if callable(getattr(self.model, "generate_from", None)):
            drawn = draws.drawn_of(self.model, self.best)
            profile = drawn.profile if drawn is not None else None
            if profile is None:
                try:
                    profile = self.model.load_profile(self.best.profile)
                except Exception:  # noqa: BLE001 - not a profile here: the model's fuzz
                    profile = None
            if profile is not None:
                return draws.fuzz_strategy(self.model, profile, SMALL_SIZE)
        try:
            return self.model.fuzz_strategy(SMALL_SIZE)
        except Exception:  # noqa: BLE001 - a model without a fuzz strategy: no fuzzing
            return None

    def _report(self) -> None:
        if self.on_progress is None or self.best_result is None:
            return
        self.on_progress(
            ShrinkProgress(
                pass_name=self.pass_name,
                attempts=self.attempts,
                improvements=self.improvements,
                requests=self.model.size(self.best),
                plans=scenario_plans(self.best_result),
                elapsed=self.clock() - self.started,
                budget=self.options.max_evaluations,
            )
        )

    def consider(self, candidate: Scenario) -> bool:
        """Run a candidate; keep it (and return True) if it is interesting and smaller.

        Only a run counts against the budget: an invalid candidate, or one already tried
        (its answer cannot have changed: runs are deterministic and the best only gets
        smaller), costs no evaluation; but every proposal counts towards the stops (the
        clock, and ``REPEATS_PER_EVALUATION`` unrun ones per evaluation of the budget), so
        that a pass proposing only candidates already tried cannot run forever."""
        self._proposed()
        try:
            self.model.validate(candidate)
        except ScenarioError:
            return False
        canonical = _canonical(candidate)
        if canonical in self.seen:
            return False
        if self.attempts >= self.options.max_evaluations:
            raise _Stop(BUDGET)
        self.seen.add(canonical)
        self.attempts += 1
        result = self._run(candidate, self.run_timeout)
        accepted = False
        assert self.best_result is not None
        if result.status == self.best_result.status:
            key = self.model.size_key(candidate, scenario_plans(result))
            if key < self.best_key and self._sign(candidate, result) == self.signature:
                self.best, self.best_result, self.best_key = candidate, result, key
                self.improvements += 1
                accepted = True
        self._report()
        return accepted

    # -- what the passes work with (tracediff.model.Shrinking) ----------------------------
    @property
    def budget(self) -> int:
        """Candidate evaluations the whole shrink may run."""
        return self.options.max_evaluations

    def holds(self, candidate: Scenario) -> bool:
        """True when ``candidate`` is the current best or becomes it: the predicate for
        ``find_integer`` and ``minimize_int``, which may re-probe a value that worked."""
        if _canonical(candidate) == _canonical(self.best):
            self._proposed()
            return True
        return self.consider(candidate)

    def _proposed(self) -> None:
        """Count one proposal; _Stop at the wall-clock cap, or when the proposals not run
        outnumber the budget's evaluations ``REPEATS_PER_EVALUATION`` times."""
        self.proposals += 1
        cap = self.options.max_seconds
        if cap is not None and self.clock() - self.started >= cap:
            raise _Stop(TIME_CAP)
        if self.proposals - self.attempts > self.options.max_evaluations * REPEATS_PER_EVALUATION:
            raise _Stop(REPEATS)

    def delete_runs(
        self,
        items: Callable[[Scenario], tuple[Any, ...]],
        rebuild: Callable[[tuple[Any, ...]], Scenario],
    ) -> None:
        """Adaptive deletion over a sequence of the best scenario, from its end.

        At each index the longest run ending there that can go (keeping the signature) is
        deleted, its length found by ``find_integer``; ``rebuild`` makes a scenario from the
        shortened sequence.
        """
        if len(items(self.best)) == self.model.size(self.best):
            self._size_sequence = (items, rebuild)
        index = len(items(self.best)) - 1
        while index >= 0:
            base = items(self.best)
            end = index

            def works(length: int, base: tuple[Any, ...] = base, end: int = end) -> bool:
                start = end + 1 - length
                if start < 0:
                    return False
                return self.holds(rebuild(base[:start] + base[end + 1 :]))

            deleted = 0
            if end < len(base) and works(1):
                deleted = find_integer(works)
            index -= max(1, deleted)
        if len(items(self.best)) > DDMIN_ABOVE:
            self.ddmin(items, rebuild)

    def ddmin(
        self,
        items: Callable[[Scenario], tuple[Any, ...]],
        rebuild: Callable[[tuple[Any, ...]], Scenario],
    ) -> None:
        """Zeller's ddmin over a sequence of the best: split it into n chunks and try each
        chunk alone (a subset), then the sequence without each chunk (a complement); on
        success go on from the smaller sequence (n back to 2 after a subset, one less
        after a complement), else double n, until the chunks are single items. Removes
        several items at once, in places adaptive deletion (one run) cannot."""
        chunks = 2
        while True:
            base = items(self.best)
            if len(base) < 2 or len(base) <= DDMIN_ABOVE // 2:
                return
            chunks = min(chunks, len(base))
            bounds = [len(base) * i // chunks for i in range(chunks + 1)]
            parts = [base[bounds[i] : bounds[i + 1]] for i in range(chunks)]
            reduced = False
            for part in parts:
                if self.consider(rebuild(part)):
                    chunks, reduced = 2, True
                    break
            if not reduced and chunks > 2:
                for i in range(chunks):
                    rest = tuple(x for j, p in enumerate(parts) if j != i for x in p)
                    if self.consider(rebuild(rest)):
                        chunks, reduced = max(chunks - 1, 2), True
                        break
            if not reduced:
                if chunks >= len(base):
                    return
                chunks = min(len(base), chunks * 2)

    def minimize(self, value: int, lower: int, works: Callable[[int], bool]) -> int:
        """:func:`minimize_int`, for the passes (which import nothing of the search)."""
        return minimize_int(value, lower, works)


def _canonical(scenario: Scenario) -> str:
    return json.dumps(scenario.to_dict(), sort_keys=True)


def _digest(scenario: Scenario) -> int:
    """A seed taken from a scenario's bytes: the same scenario, the same search."""
    return int.from_bytes(hashlib.sha256(_canonical(scenario).encode()).digest()[:8], "big")


def _sampled_combinations(
    rng: random.Random, n: int, k: int, count: int
) -> Iterator[tuple[int, ...]]:
    """Up to ``count`` distinct k-combinations of range(n), drawn from ``rng``."""
    seen: set[tuple[int, ...]] = set()
    for _ in range(max(0, count) * 4):
        if len(seen) >= count:
            return
        kept = tuple(sorted(rng.sample(range(n), k)))
        if kept not in seen:
            seen.add(kept)
            yield kept


def _relabel(model: Any, candidate: Scenario, label: Scenario) -> Scenario:
    """A found scenario under the best's profile and seed (the repro keeps its name)."""
    from tracediff.search import draws

    drawn = draws.recall(candidate)
    relabelled = candidate
    if getattr(candidate, "profile", None) != getattr(label, "profile", None):
        relabelled = model.relabel(relabelled, label.profile)
    if getattr(relabelled, "seed", None) != getattr(label, "seed", None):
        relabelled = dataclasses.replace(relabelled, seed=label.seed)
    if drawn is not None and relabelled is not candidate:
        draws.remember(relabelled, drawn)
    return relabelled


def find_integer(works: Callable[[int], bool]) -> int:
    """The largest n >= 0 with works(n) true, assuming works(0) and probing upwards:
    1, 2, 4, 8... until a failure, then bisecting (Hypothesis' ``find_integer``).
    ``works`` must stay true for a value it accepted before (it is asked again)."""
    low, high = 0, 1
    while works(high):
        low, high = high, high * 2
        if high > 1 << 20:
            return low
    while high - low > 1:
        middle = (low + high) // 2
        if works(middle):
            low = middle
        else:
            high = middle
    return low


BISECT_BELOW = 128  # values above this only try simpler numbers, never every integer


def simpler_ints(value: int, lower: int) -> list[int]:
    """Simpler values below ``value``, smallest first: its halvings and its round-downs
    to fewer significant digits (16021 -> 8010, 10000, 16000, 16020...)."""
    found = set()
    half = value // 2
    while half > lower:
        found.add(half)
        half //= 2
    scale = 10
    while scale <= value:
        rounded = value // scale * scale
        if lower < rounded < value:
            found.add(rounded)
        scale *= 10
    return sorted(found)


def minimize_int(value: int, lower: int, works: Callable[[int], bool]) -> int:
    """A smaller value that works, found cheaply: ``lower`` first, then a bisection over
    the simpler numbers (:func:`simpler_ints`), then, for small values only, a bisection
    down from ``value - 1`` (skipped when ``value - 1`` fails: the value is locally minimal).

    Bisecting large numbers would creep (an arrival time one microsecond earlier is rarely
    a simpler repro, and every step costs a run), so they stop at a round number.
    """
    if value <= lower:
        return value
    if works(lower):
        return lower
    # Bisect the list of simpler values as if "works" were monotone: log2(n) runs.
    candidates = [*simpler_ints(value, lower), value]
    low, high = -1, len(candidates) - 1  # candidates[high] works; low: lower, which fails
    while high - low > 1:
        middle = (low + high) // 2
        if works(candidates[middle]):
            high = middle
        else:
            low = middle
    value = candidates[high]
    if value > BISECT_BELOW or value - 1 <= lower or not works(value - 1):
        return value
    low, high = lower, value - 1  # low fails, high works
    while high - low > 1:
        middle = (low + high) // 2
        if works(middle):
            high = middle
        else:
            low = middle
    return high


def run_on(
    executor: Executor | None,
    scenario: Scenario,
    specs: Sequence[ImplSpec],
    timeout_s: float | None,
) -> ScenarioResult:
    """One lockstep run on ``executor`` (a worker's death or hang is the result's finding),
    or in this process without one."""
    if executor is None:
        return run_scenario(scenario, specs, timeout_s=timeout_s)
    from tracediff.executor import Limits
    from tracediff.running.runner import RunOptions, ScenarioWork, outcome_result, run_task

    options = RunOptions(impls=tuple(specs), limits=Limits(timeout_s))
    payload = ScenarioWork(scenario, options.impls, options.limits)
    (outcome,) = executor.map(run_task, [payload], deadline_s=options.kill_after_s)
    return outcome_result(outcome, scenario, options)


def sign_on(
    executor: Executor | None,
    signature_fn: SignatureFn,
    scenario: Scenario,
    result: ScenarioResult,
    specs: Sequence[ImplSpec],
    timeout_s: float | None,
) -> Hashable | None:
    """A finding's signature, computed on ``executor`` (it may re-run the scenario), or here."""
    if executor is None:
        return signature_fn(scenario, result, specs)
    payload = SignWork(signature_fn, scenario, result, tuple(specs))
    limit = None if timeout_s is None else 2 * timeout_s + grace(timeout_s)
    (outcome,) = executor.map(_sign_task, [payload], deadline_s=limit)
    # A signature that cannot be had (the re-run died or hung) matches nothing.
    return outcome.value if outcome.kind == DONE else None


@dataclass(frozen=True)
class SignWork:
    """A finding whose signature :func:`_sign_task` computes on an executor's worker:
    ``signature_fn`` (module-level, so that it pickles) applied to the scenario, its
    result and the implementations."""

    signature_fn: SignatureFn
    scenario: Scenario
    result: ScenarioResult
    specs: tuple[ImplSpec, ...]


def _sign_task(work: SignWork, _progress: Any, _notify: Notify) -> Hashable | None:
    return work.signature_fn(work.scenario, work.result, work.specs)


def shrink(
    scenario: Scenario,
    specs: Sequence[ImplSpec],
    *,
    signature_fn: SignatureFn = default_signature,
    options: ShrinkOptions = DEFAULTS,
    on_progress: ProgressFn | None = None,
    executor: Executor | None = None,
) -> ShrinkResult:
    """Shrink ``scenario`` while it keeps failing with the same signature; candidates run on
    ``executor`` (isolated workers: a candidate that kills its process costs a worker) when
    given, else in this process. The same arguments give the same result on any machine,
    unless ``options.max_seconds`` stops it (``result.stopped`` is then TIME_CAP)."""
    return Shrinker(
        scenario,
        specs,
        signature_fn=signature_fn,
        options=options,
        on_progress=on_progress,
        executor=executor,
    ).shrink()


# -- the regression corpus ------------------------------------------------------------------
REGRESSION_FORMAT = "tracediff-regression"
REGRESSIONS_DIR = "scenarios/regressions"


def regression_dir(regressions: str | None = None, artifacts: str | None = None) -> Path:
    """Where ``--save`` writes: the corpus, or ``<artifacts>/regressions`` when CI=true."""
    from tracediff.project import artifacts_dir, in_ci

    if in_ci():
        return artifacts_dir(artifacts) / "regressions"
    return Path(regressions or REGRESSIONS_DIR)


def regression_document(result: ShrinkResult, note: str = "") -> dict[str, Any]:
    """The saved form: the scenario's ``to_dict()`` plus what found it (extra keys, which
    the model's ``scenario_from_dict`` ignores, so the corpus loads it as a plain scenario)."""
    assert result.signature is not None
    signature = result.signature
    before_requests, before_plans = result.before
    after_requests, after_plans = result.after
    unit = tracediff.model.of(result.initial).size_unit
    return {
        "format": REGRESSION_FORMAT,
        "version": 1,
        "note": note
        or (
            f"shrunk from {result.initial.profile}:{result.initial.seed} "
            f"({before_requests} {unit}s, {before_plans} plans) to {after_requests} {unit}s, "
            f"{after_plans} plans; {describe_signature(signature)}"
        ),
        "impls": list(result.impls),
        "signature": _signature_data(signature),
        **scenario_document(result.shrunk),
    }


def _signature_data(signature: Hashable) -> Any:
    to_dict = getattr(signature, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if dataclasses.is_dataclass(signature) and not isinstance(signature, type):
        return dataclasses.asdict(signature)
    return str(signature)


def describe_signature(signature: Hashable) -> str:
    describe = getattr(signature, "describe", None)
    return str(describe()) if callable(describe) else str(signature)


def save_regression(
    result: ShrinkResult,
    *,
    regressions: str | None = None,
    artifacts: str | None = None,
    note: str = "",
) -> Path:
    """Write the shrunk scenario as ``<profile>-<seed>-<signature-slug>.json``, atomically."""
    from tracediff.atomic import write_text_atomic

    if result.signature is None:
        raise ValueError("nothing to save: the scenario did not fail")
    directory = regression_dir(regressions, artifacts)
    directory.mkdir(parents=True, exist_ok=True)
    scenario = result.initial
    # the profile comes from data (a scenario file's "profile"): a plain name, kept inside
    name = component(scenario.profile, scenario.seed, signature_slug(result.signature))
    path = inside(directory, f"{name}.json", what="--save")
    write_text_atomic(path, json.dumps(regression_document(result, note), indent=1) + "\n")
    return path


def load_regression(path: str | Path) -> tuple[Scenario, tuple[str, ...]]:
    """A saved scenario and the implementations it was found with (may be empty)."""
    from tracediff.errors import TraceFormatError

    name = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TraceFormatError(name, "does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TraceFormatError(name, f"not a scenario JSON file: {exc}") from None
    if not isinstance(data, dict):
        raise TraceFormatError(name, "not a scenario JSON object")
    try:
        scenario = model_of(data, name).scenario_from_dict(data)
    except ScenarioError as exc:
        raise ScenarioError(f"{name}: {exc}") from None
    impls = data.get("impls", [])
    return scenario, tuple(str(i) for i in impls) if isinstance(impls, list) else ()
