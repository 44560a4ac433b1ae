"""Shrink a diverging scenario to a small repro that diverges *the same way*.

Designing shrink passes
=======================

(After the essay in Hypothesis' ``Shrinker`` docstring, adapted to a structured input.)

A shrinker is a greedy search: it holds the smallest *interesting* scenario found so far
and keeps trying small, local changes to it. A candidate is interesting when it is valid
(:meth:`Scenario.validate`), runs through the same implementations with
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
smaller in the order below. Only the look-elsewhere pass of small generated scenarios is
not a step of that kind; it runs while more than :data:`SMALL_REQUESTS` requests remain.

The order, not the passes, guarantees termination. Every accepted candidate is strictly
smaller in one fixed, well-founded order, :func:`size_key`: first the number of requests,
then the number of plans (what a reader has to look at), then the number of features
switched on, then plain numbers (``max_new``, prompt lengths, arrival times...), then how
many digits the floats carry. Each pass is free to propose anything, including candidates
that are larger in that order; they are simply rejected. So a pass may be a heuristic
without endangering the search.

The signature keeps the search honest. "Still fails" is not enough: shrinking a
decision divergence until it becomes a crash, or an unrelated float difference, produces a
small scenario that reproduces a different bug. The default :func:`default_signature` is
(status, record type, first differing top-level field), and ``signature_fn`` lets the
divergence explanation of ``compare/`` replace it without touching the passes.

What makes a good pass here, in the spirit of the essay:

* **Delete first, and delete a lot.** Requests are most of a scenario's size and almost
  all of its cost. The first pass keeps only the earliest arrivals (a divergence cannot
  depend on requests that arrive after it: the simulated engine's randomness is keyed by
  request id, not shared), growing the kept prefix 1, 2, 4... and then bisecting; the
  second is Hypothesis' *adaptive deletion*: try deleting one request and, when that
  works, grow the deleted run exponentially and bisect to the longest run that still works
  (``find_integer``), so n deletable neighbours cost O(log n) runs instead of n.
  Some divergences need *pressure* rather than particular requests (a tie-break that only
  matters when the verification budget binds, i.e. when many lanes compete): keeping k of
  n requests is also tried with the budget scaled by k/n, a compound step that no single
  one-field change can make, since a smaller budget alone is not smaller in the order.
* **Merge, re-time, and look elsewhere.** Merging two neighbours into one request that
  carries both budgets removes a request while keeping the load that deleting either
  loses; moving an arrival onto the one before it makes a burst. While more than four
  requests remain, fresh scenarios of one to four requests drawn by the seeded generator
  with the same scheduler parameters are tried too (a bounded share of the budget): a bug
  that needs a particular small combination is often found faster among small scenarios
  than by deleting from a large one (``fuzz`` finds such repros this way).
* **Cheap big steps before fine ones.** Switch a feature off for every request at once
  before trying request by request; halve every ``max_new`` together before minimising
  each; set every arrival to 0 at once. When the coarse step works, the fine passes have
  nothing left to do and cost one run each.
* **Minimise numbers by trying the bound first.** ``minimize_int`` tries the lowest value
  (0 for arrivals, 1 for lengths), then bisects between a failing low and the working
  current value. Interesting values are not monotone in general, so bisection is a
  heuristic; correctness still rests on the order.
* **Canonicalise last.** Renumbering request ids, rounding acceptance parameters and
  resetting scheduler parameters to their defaults change behaviour (ids key the engine's
  draws, floats change every curve), so they are candidates like any other and only make
  the repro easier to read.
* **Never run a candidate twice.** Candidates are cached by their canonical form; passes
  often regenerate a candidate another pass already tried.

Passes run in a loop until a whole round accepts nothing. Each candidate runs under the
per-candidate timeout, so a candidate that makes an implementation spin is a rejected
candidate (or, when the original hung, an interesting one), not a hung shrinker; a hang
costs the whole timeout per candidate, so give such a shrink a short ``--timeout``.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from tracediff.errors import ScenarioError
from tracediff.executor import DONE, Executor, grace
from tracediff.filenames import component, inside
from tracediff.models.specdec.scenario.model import (
    EngineTruth,
    RequestSpec,
    Scenario,
    SchedulerParams,
)
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

SignatureFn = Callable[[Scenario, ScenarioResult, Sequence[ImplSpec]], Hashable | None]
ProgressFn = Callable[["ShrinkProgress"], None]

ALLOCATION_RANK = {"host": 0, "device": 1, "mixed": 2}
SMALL_REQUESTS = 4  # the repro size aimed for: small generated scenarios have 1..4 requests
SMALL_SEEDS = 64  # small scenarios drawn per pass at most
SMALL_SHARE = 0.25  # of the evaluation budget, at most, per pass of small scenarios

# The defaults of ShrinkOptions (docs/replay-shrink-golden.md). 2000 evaluations shrink every
# broken implementation of tests/impls to its minimum with room to spare (they use 37 to
# 248); at a few to a few hundred milliseconds per small candidate that is well under the
# cap. The per-candidate timeout is generous on purpose: it must never fire for a candidate
# that merely runs on a busy machine.
DEFAULT_EVALUATIONS = 2000
DEFAULT_RUN_TIMEOUT_S = 60.0
DEFAULT_MAX_SECONDS = 3600.0

# Why a search stopped (ShrinkResult.stopped).
MINIMUM = "minimum"  # a whole round of passes accepted nothing: 1-minimal w.r.t. the passes
BUDGET = "evaluation budget"  # deterministic: the same stop on any machine
TIME_CAP = "time cap"  # the wall-clock safety cap: the repro depends on the machine's speed


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
    from tracediff.compare.explain import explain

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
def _digits(value: float) -> int:
    """How many decimals a float needs when written shortest: 0.75 -> 2, 1.0 -> 0."""
    text = repr(float(value))
    if "e" in text or "inf" in text or "nan" in text:
        return 17
    fraction = text.partition(".")[2].rstrip("0")
    return len(fraction)


def feature_count(scenario: Scenario) -> int:
    """Features switched on: per request, and scheduler-wide (see ``size_key``)."""
    count = 0
    for r in scenario.requests:
        count += r.grammar + r.host_stop + r.fixed + (r.stop_at >= 0) + (r.proposer == "copy")
    p = scenario.params
    count += p.ragged + ALLOCATION_RANK.get(p.allocation, 3) + p.queue_depth + len(p.eager_shapes)
    defaults = SchedulerParams()
    skip = {"allocation", "ragged", "queue_depth", "eager_shapes"}
    for f in dataclasses.fields(SchedulerParams):
        if f.name not in skip and getattr(p, f.name) != getattr(defaults, f.name):
            count += 1
    truth_defaults = EngineTruth()
    for f in dataclasses.fields(EngineTruth):
        if getattr(scenario.truth, f.name) != getattr(truth_defaults, f.name):
            count += 1
    return count


def size_key(scenario: Scenario, plans: int) -> tuple[int, ...]:
    """The shrink order: a candidate is accepted only if its key is smaller."""
    requests = scenario.requests
    ids = sorted(r.id for r in requests)
    return (
        len(requests),
        plans,
        feature_count(scenario),
        sum(r.max_new for r in requests),
        sum(r.prompt_len for r in requests),
        sum(r.arrival_us for r in requests),
        sum(max(r.stop_at, 0) + max(r.fixed_width, 0) + max(r.grammar_cap, 0) for r in requests),
        sum(_digits(r.accept_base) + _digits(r.accept_decay) for r in requests),
        sum(abs(i - n) for n, i in enumerate(ids)),
        sum(1 for a, b in zip(requests, requests[1:], strict=False) if a.id > b.id),
    )


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
    stopped: str = MINIMUM  # MINIMUM, BUDGET or TIME_CAP
    options: ShrinkOptions = DEFAULTS

    @property
    def complete(self) -> bool:
        """True when the search stopped by itself: 1-minimal with respect to its passes."""
        return self.stopped == MINIMUM

    @property
    def evaluations(self) -> int:
        return self.attempts

    def stop_reason(self) -> str:
        """Why the search stopped, in one sentence for a report."""
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
        """(requests, plans) of the original scenario."""
        return len(self.initial.requests), scenario_plans(self.initial_result)

    @property
    def after(self) -> tuple[int, int]:
        """(requests, plans) of the shrunk scenario."""
        return len(self.shrunk.requests), scenario_plans(self.result)


class _Stop(Exception):
    """The budget or the safety cap ends the search; ``reason`` is BUDGET or TIME_CAP."""

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
        self.specs = tuple(specs)
        self.signature_fn = signature_fn
        self.executor = executor
        self.options = options
        self.on_progress = on_progress
        self.clock = clock
        self.started = clock()
        self.attempts = 0
        self.improvements = 0
        self.seen: set[str] = set()
        self.pass_name = "start"
        self.run_timeout: float = options.run_timeout_s  # the user's, never a measured one
        self.signature: Hashable | None = None
        self.best = scenario
        self.best_result: ScenarioResult | None = None
        self.best_key: tuple[int, ...] = ()

    # -- running candidates: here, or on the executor's isolated workers -------------------
    def _run(self, scenario: Scenario, timeout_s: float | None) -> ScenarioResult:
        return run_on(self.executor, scenario, self.specs, timeout_s)

    def _sign(self, scenario: Scenario, result: ScenarioResult) -> Hashable | None:
        return sign_on(
            self.executor, self.signature_fn, scenario, result, self.specs, self.run_timeout
        )

    # -- driving ---------------------------------------------------------------------------
    def shrink(self) -> ShrinkResult:
        initial_result = self._run(self.initial, self.run_timeout)
        self.seen.add(_canonical(self.initial))
        self.signature = self._sign(self.initial, initial_result)
        self.best_result = initial_result
        self.best_key = size_key(self.initial, scenario_plans(initial_result))
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
        )

    def _loop(self) -> None:
        passes: list[tuple[str, Callable[[], None]]] = [
            ("keep earliest requests", self.keep_earliest),
            ("delete requests", self.delete_requests),
            ("small generated scenarios", self.try_small_generated),
            ("merge requests", self.merge_while_many),
            ("switch features off", self.switch_features_off),
            ("simplify scheduler", self.simplify_params),
            ("halve numbers", self.halve_numbers),
            ("minimise numbers", self.minimize_numbers),
            # after the numbers: each candidate is then cheap (few plans), and a merge is
            # followed by the whole round of passes again
            ("merge requests", self.merge_requests),
            ("re-time requests", self.retime_requests),
            ("round floats", self.round_floats),
            ("canonical ids", self.canonical_ids),
        ]
        while True:
            before = self.best_key
            for name, run_pass in passes:
                self.pass_name = name
                run_pass()
            if self.best_key == before:
                return

    def _report(self) -> None:
        if self.on_progress is None or self.best_result is None:
            return
        self.on_progress(
            ShrinkProgress(
                pass_name=self.pass_name,
                attempts=self.attempts,
                improvements=self.improvements,
                requests=len(self.best.requests),
                plans=scenario_plans(self.best_result),
                elapsed=self.clock() - self.started,
                budget=self.options.max_evaluations,
            )
        )

    def consider(self, candidate: Scenario) -> bool:
        """Run a candidate; keep it (and return True) if it is interesting and smaller.

        Only a run counts against the budget: an invalid candidate, or one already tried
        (its answer cannot have changed: runs are deterministic and the best only gets
        smaller), costs nothing."""
        try:
            candidate.validate()
        except ScenarioError:
            return False
        canonical = _canonical(candidate)
        if canonical in self.seen:
            return False
        if self.attempts >= self.options.max_evaluations:
            raise _Stop(BUDGET)
        cap = self.options.max_seconds
        if cap is not None and self.clock() - self.started >= cap:
            raise _Stop(TIME_CAP)
        self.seen.add(canonical)
        self.attempts += 1
        result = self._run(candidate, self.run_timeout)
        accepted = False
        assert self.best_result is not None
        if result.status == self.best_result.status:
            key = size_key(candidate, scenario_plans(result))
            if key < self.best_key and self._sign(candidate, result) == self.signature:
                self.best, self.best_result, self.best_key = candidate, result, key
                self.improvements += 1
                accepted = True
        self._report()
        return accepted

    def with_requests(self, requests: Iterable[RequestSpec]) -> Scenario:
        return dataclasses.replace(self.best, requests=tuple(requests))

    def replace_request(self, index: int, **changes: Any) -> bool:
        requests = list(self.best.requests)
        if index >= len(requests):
            return False
        requests[index] = dataclasses.replace(requests[index], **changes)
        return self.consider(self.with_requests(requests))

    # -- passes ----------------------------------------------------------------------------
    def holds(self, candidate: Scenario) -> bool:
        """True when ``candidate`` is the current best or becomes it: the predicate for
        ``find_integer`` and ``minimize_int``, which may re-probe a value that worked."""
        if _canonical(candidate) == _canonical(self.best):
            return True
        return self.consider(candidate)

    def keep_earliest(self) -> None:
        """Keep the k earliest arrivals, for the smallest k found by growing then bisecting.

        When k requests alone do not fail, k requests with the verification budget scaled
        down in proportion are tried too: a divergence that needs a binding budget (many
        lanes competing for few verified tokens) then survives with few lanes.
        """
        base = self.best
        ordered = sorted(base.requests, key=lambda r: (r.arrival_us, r.id))
        total = len(ordered)
        budget = base.params.verify_budget

        def works(k: int) -> bool:
            kept = {r.id for r in ordered[:k]}
            fewer = dataclasses.replace(
                base, requests=tuple(r for r in base.requests if r.id in kept)
            )
            if self.holds(fewer):
                return True
            scaled = max(k, -(-budget * k // total))
            if scaled >= budget:
                return False
            params = dataclasses.replace(base.params, verify_budget=scaled)
            return self.holds(dataclasses.replace(fewer, params=params))

        low, high = 0, 1  # low: known not to work (no request, no divergence)
        while high < total and not works(high):
            low, high = high, min(total, high * 2)
        if high >= total:
            return
        while high - low > 1:
            middle = (low + high) // 2
            if works(middle):
                high = middle
            else:
                low = middle

    def try_small_generated(self) -> None:
        """Fresh small scenarios (1 to SMALL_REQUESTS requests) with the same scheduler
        parameters, drawn by the seeded generator: some bugs need a particular combination
        of requests that no deletion from a large scenario reaches, and a search among
        small ones finds it quickly (as ``fuzz`` does). Bounded by a share of the
        evaluation budget, and skipped once the best has few requests."""
        if len(self.best.requests) <= SMALL_REQUESTS:
            return
        from tracediff.models.specdec.scenario.generator import generate
        from tracediff.models.specdec.scenario.profiles import GRAPHS, Matrix, Profile

        base = self.best
        params = base.params
        matrix = Matrix(
            requests=tuple(range(1, SMALL_REQUESTS + 1)),
            allocation=(params.allocation,),
            graphs=(GRAPHS[1] if params.ragged else GRAPHS[0],),
            queue_depth=(params.queue_depth,),
        )
        profile = Profile(name=base.profile, matrix=matrix)
        share = self.attempts + max(1, int(self.options.max_evaluations * SMALL_SHARE))
        for seed in range(SMALL_SEEDS):
            if self.attempts >= share or len(self.best.requests) <= SMALL_REQUESTS:
                return
            drawn = generate(profile, base.seed * SMALL_SEEDS + seed)
            small = dataclasses.replace(base, requests=drawn.requests)
            if self.consider(small):
                continue
            # as in keep_earliest: the same pressure on fewer lanes, by a scaled budget
            total, kept = len(base.requests), len(drawn.requests)
            scaled = max(kept, -(-params.verify_budget * kept // total))
            if scaled < params.verify_budget:
                budget = dataclasses.replace(params, verify_budget=scaled)
                self.consider(dataclasses.replace(small, params=budget))

    def merge_while_many(self) -> None:
        """Merging early, while more than SMALL_REQUESTS remain: the repro size matters
        most; below it, merging waits until the numbers are small and runs are cheap."""
        if len(self.best.requests) > SMALL_REQUESTS:
            self.merge_requests()

    def merge_requests(self) -> None:
        """Two neighbours (by arrival) into one: the earlier takes both budgets. One request
        fewer whose load is the same, where deleting either loses the pressure."""
        index = 0
        while index + 1 < len(self.best.requests):
            ordered = sorted(self.best.requests, key=lambda r: (r.arrival_us, r.id))
            first, second = ordered[index], ordered[index + 1]
            merged = dataclasses.replace(
                first,
                max_new=first.max_new + second.max_new,
                stop_at=-1 if first.stop_at < 0 else first.stop_at,
            )
            requests = [merged if r.id == first.id else r for r in ordered if r.id != second.id]
            if not self.consider(self.with_requests(requests)):
                index += 1

    def retime_requests(self) -> None:
        """Arrivals moved together: each request to the arrival of the one before it (a
        burst), which often keeps a divergence while making the timeline short."""
        ordered = sorted(self.best.requests, key=lambda r: (r.arrival_us, r.id))
        for position in range(1, len(ordered)):
            current = sorted(self.best.requests, key=lambda r: (r.arrival_us, r.id))
            if position >= len(current):
                return
            earlier, request = current[position - 1], current[position]
            if request.arrival_us == earlier.arrival_us:
                continue
            moved = dataclasses.replace(request, arrival_us=earlier.arrival_us)
            self.consider(self.with_requests(moved if r.id == request.id else r for r in current))

    def delete_requests(self) -> None:
        """Adaptive deletion: from the end, delete the longest run ending at each request."""
        self._delete_runs(lambda scenario: scenario.requests, self.with_requests)

    def _delete_runs(
        self,
        items: Callable[[Scenario], tuple[Any, ...]],
        rebuild: Callable[[tuple[Any, ...]], Scenario],
    ) -> None:
        """Adaptive deletion over a sequence of the best scenario, from its end.

        At each index the longest run ending there that can go (keeping the signature) is
        deleted, its length found by ``find_integer``; ``rebuild`` makes a scenario from the
        shortened sequence.
        """
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

    def switch_features_off(self) -> None:
        """Every feature off for all requests at once, then per feature, then per request."""
        offs: dict[str, dict[str, Any]] = {
            "grammar": {"grammar_cap": -1},
            "host_stop": {"host_stop": False},
            "fixed": {"fixed_width": -1},
            "stop": {"stop_at": -1},
            "copy": {"proposer": "mtp"},
        }
        everything: dict[str, Any] = {}
        for change in offs.values():
            everything.update(change)
        self._change_all(everything)
        for change in offs.values():
            self._change_all(change)
        for index in range(len(self.best.requests)):
            for change in offs.values():
                request = self.best.requests[index] if index < len(self.best.requests) else None
                if request is not None and any(getattr(request, k) != v for k, v in change.items()):
                    self.replace_request(index, **change)

    def _change_all(self, change: dict[str, Any]) -> bool:
        requests = [dataclasses.replace(r, **change) for r in self.best.requests]
        if requests == list(self.best.requests):
            return False
        return self.consider(self.with_requests(requests))

    def simplify_params(self) -> None:
        """Rect graphs, host allocation, shallower queues, defaults for everything else."""
        tries: list[dict[str, Any]] = [
            {"ragged": False},
            {"allocation": "host"},
            {"allocation": "device"},
            {"queue_depth": 0},
            {"queue_depth": 1},
            {"eager_shapes": ()},
        ]
        defaults = SchedulerParams()
        for f in dataclasses.fields(SchedulerParams):
            if f.name not in ("allocation", "ragged", "queue_depth", "eager_shapes"):
                tries.append({f.name: getattr(defaults, f.name)})
        for change in tries:
            current = self.best.params
            if all(getattr(current, k) == v for k, v in change.items()):
                continue
            if ALLOCATION_RANK.get(change.get("allocation", ""), -1) > ALLOCATION_RANK.get(
                current.allocation, 3
            ):
                continue
            self.consider(
                dataclasses.replace(self.best, params=dataclasses.replace(current, **change))
            )
        if self.best.params.eager_shapes:
            self._delete_eager_shapes()
        truth_defaults = EngineTruth()
        for f in dataclasses.fields(EngineTruth):
            value = getattr(truth_defaults, f.name)
            if getattr(self.best.truth, f.name) != value:
                truth = dataclasses.replace(self.best.truth, **{f.name: value})
                self.consider(dataclasses.replace(self.best, truth=truth))

    def _delete_eager_shapes(self) -> None:
        """Adaptive deletion over the eager shapes, from the end (as for requests)."""
        self._delete_runs(
            lambda scenario: scenario.params.eager_shapes,
            lambda shapes: dataclasses.replace(
                self.best, params=dataclasses.replace(self.best.params, eager_shapes=shapes)
            ),
        )

    def halve_numbers(self) -> None:
        """Coarse steps over all requests at once: arrivals to 0, lengths halved."""
        self._change_each(lambda r: {"arrival_us": 0})
        for _ in range(12):
            if not self._change_each(lambda r: {"max_new": max(1, r.max_new // 2)}):
                break
        for _ in range(12):
            if not self._change_each(lambda r: {"prompt_len": max(1, r.prompt_len // 2)}):
                break
        self._change_each(lambda r: {"prompt_len": 1})

    def _change_each(self, change: Callable[[RequestSpec], dict[str, Any]]) -> bool:
        requests = []
        for r in self.best.requests:
            updated = dataclasses.replace(r, **change(r))
            if updated.stop_at > updated.max_new:
                updated = dataclasses.replace(updated, stop_at=updated.max_new)
            requests.append(updated)
        if requests == list(self.best.requests):
            return False
        return self.consider(self.with_requests(requests))

    def minimize_numbers(self) -> None:
        """Each request's integers, one at a time, towards their lower bounds."""
        fields = (
            ("max_new", 1),
            ("prompt_len", 1),
            ("arrival_us", 0),
            ("stop_at", 1),
            ("fixed_width", 0),
            ("grammar_cap", 0),
        )
        for index in range(len(self.best.requests)):
            for name, lower in fields:
                if index >= len(self.best.requests):
                    return
                value = getattr(self.best.requests[index], name)
                if value < lower:
                    continue  # -1: the feature is off

                def works(candidate: int, index: int = index, name: str = name) -> bool:
                    changes: dict[str, Any] = {name: candidate}
                    request = dataclasses.replace(self.best.requests[index], **changes)
                    requests = list(self.best.requests)
                    requests[index] = request
                    return self.holds(self.with_requests(requests))

                minimize_int(value, lower, works)

    def round_floats(self) -> None:
        """Acceptance parameters rounded to fewer digits."""
        for index in range(len(self.best.requests)):
            for name in ("accept_base", "accept_decay"):
                if index >= len(self.best.requests):
                    return
                value = float(getattr(self.best.requests[index], name))
                for digits in range(min(_digits(value), 3) - 1, -1, -1):
                    rounded = round(value, digits)
                    if rounded != value and self.replace_request(index, **{name: rounded}):
                        break
                    value = float(getattr(self.best.requests[index], name))

    def canonical_ids(self) -> None:
        """Requests in id order, then ids 0..n-1 (ids key the engine's draws: a candidate)."""
        ordered = sorted(self.best.requests, key=lambda r: r.id)
        if ordered != list(self.best.requests):
            self.consider(self.with_requests(ordered))
        renumbered = [dataclasses.replace(r, id=n) for n, r in enumerate(self.best.requests)]
        if renumbered != list(self.best.requests):
            self.consider(self.with_requests(renumbered))


def _canonical(scenario: Scenario) -> str:
    return json.dumps(scenario.to_dict(), sort_keys=True)


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
    from tracediff.compare.equivalence import Equivalence
    from tracediff.running.runner import RunOptions, outcome_result, run_task

    options = RunOptions(impls=tuple(specs), timeout_s=timeout_s)
    payload = (scenario, tuple(specs), None, timeout_s, None, None, Equivalence())
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
    payload = (signature_fn, scenario, result, tuple(specs))
    limit = None if timeout_s is None else 2 * timeout_s + grace(timeout_s)
    (outcome,) = executor.map(_sign_task, [payload], deadline_s=limit)
    # A signature that cannot be had (the re-run died or hung) matches nothing.
    return outcome.value if outcome.kind == DONE else None


def _sign_task(
    payload: tuple[SignatureFn, Scenario, ScenarioResult, tuple[ImplSpec, ...]],
    _progress: Any,
    _notify: Any,
) -> Hashable | None:
    signature_fn, scenario, result, specs = payload
    return signature_fn(scenario, result, specs)


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
    """The saved form: ``Scenario.to_dict()`` plus what found it (extra keys, which
    ``Scenario.from_dict`` ignores, so the corpus loads it as a plain scenario)."""
    assert result.signature is not None
    signature = result.signature
    before_requests, before_plans = result.before
    after_requests, after_plans = result.after
    return {
        "format": REGRESSION_FORMAT,
        "version": 1,
        "note": note
        or (
            f"shrunk from {result.initial.profile}:{result.initial.seed} "
            f"({before_requests} requests, {before_plans} plans) to {after_requests} requests, "
            f"{after_plans} plans; {describe_signature(signature)}"
        ),
        "impls": list(result.impls),
        "signature": _signature_data(signature),
        **result.shrunk.to_dict(),
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
        scenario = Scenario.from_dict(data)
    except ScenarioError as exc:
        raise ScenarioError(f"{name}: {exc}") from None
    impls = data.get("impls", [])
    return scenario, tuple(str(i) for i in impls) if isinstance(impls, list) else ()
