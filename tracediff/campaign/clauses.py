"""Coverage: which features and rule clauses of its model a profile's scenarios really reach.

A seed set is only as good as what it makes the implementation do. The model says what it
counts (:attr:`tracediff.model.DecisionModel.features`, derived from a trace's records, and
:attr:`~tracediff.model.DecisionModel.clauses`, the conditions of its spec's rules, counted
when one *decided* something); :func:`coverage` drives every scenario of a profile (through
the model's observed reference by default, so that clauses are counted too) on an executor
and adds the counts up. A feature no scenario reaches is a finding: the profile cannot catch
a divergence there.

A report is *complete* when every required feature was exercised, and every required clause
decided, in at least one scenario; ``tracediff coverage`` exits 1 when it is not, or when a
seed could not be measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from tracediff.executor import DONE, Executor, Notify, Outcome, grace, open_executor, time_limit
from tracediff.model import DecisionModel, Profile, Scenario, generate, of
from tracediff.project import current_model

FORMAT = "tracediff-coverage"
VERSION = 2


@dataclass(frozen=True)
class FeatureCoverage:
    name: str
    required: bool  # a required feature no scenario exercised makes the report incomplete
    scenarios: int  # scenarios with at least one plan that exercised the feature
    plans: int  # plan calls that exercised it, over all scenarios


@dataclass(frozen=True)
class ClauseCoverage(FeatureCoverage):
    """A rule clause's row: as a feature's, with where the clause is stated."""

    rule: str = ""  # the rule (the section of the model's spec) the clause belongs to
    proof: str = ""  # non-empty: the clause provably never decides (not required); why
    spec: str = ""  # the model's spec document (the proof is a section of it)


@dataclass(frozen=True)
class ScenarioCoverage:
    seed: int
    features: str  # Scenario.features(): what the scenario was generated to hold
    plans: int
    counts: tuple[int, ...]  # per name of the model's features, in order
    # per clause of the model's clauses, in order: plans in which the clause decided; empty
    # when the scenario was not driven by the observed reference (rule coverage not measured)
    decided: tuple[int, ...] = ()


@dataclass(frozen=True)
class CoverageReport:
    profile: str
    impl: str
    seeds: tuple[int, ...]
    plans: int
    features: tuple[FeatureCoverage, ...]
    scenarios: tuple[ScenarioCoverage, ...]  # in seed order
    wall_seconds: float = 0.0
    clauses: tuple[ClauseCoverage, ...] = ()  # rule clauses; empty when not measured
    # seeds that could not be measured (the implementation failed, its worker died), why
    failures: tuple[tuple[int, str], ...] = ()
    # the scenarios each required feature and clause must be exercised in (coverage --min):
    # one is presence; three is what a gate asks, so that no bug in a clause is caught by
    # one scenario only, one generator change away from being missed
    min_scenarios: int = 1

    @property
    def missing(self) -> tuple[str, ...]:
        """Required features and clauses exercised in fewer than ``min_scenarios`` scenarios
        (never, by default): each is a finding against the profile."""
        least = max(1, self.min_scenarios)
        return tuple(
            f.name for f in (*self.features, *self.clauses) if f.required and f.scenarios < least
        )

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def ok(self) -> bool:
        """Complete, and every seed measured."""
        return self.complete and not self.failures


def feature_rows(
    model: DecisionModel, hit: Sequence[int], totals: Sequence[int]
) -> tuple[FeatureCoverage, ...]:
    """Per feature of ``model``, in order: its row from the scenarios that exercised it
    (``hit``) and the plans that did (``totals``)."""
    informational = model.informational
    return tuple(
        FeatureCoverage(name, name not in informational, hit[i], totals[i])
        for i, name in enumerate(model.features)
    )


def clause_rows(
    model: DecisionModel, hit: Sequence[int], totals: Sequence[int]
) -> tuple[ClauseCoverage, ...]:
    """Per clause of ``model``, in order: its row, as :func:`feature_rows`."""
    return tuple(
        ClauseCoverage(
            clause.name,
            not clause.proof,
            hit[i],
            totals[i],
            rule=clause.rule,
            proof=clause.proof,
            spec=model.spec,
        )
        for i, clause in enumerate(model.clauses)
    )


def scenario_coverage(scenario: Scenario, impl: str = "reference") -> ScenarioCoverage:
    """Drive one scenario through ``impl`` (the reference by default) and analyse its trace.

    Where the model has an observed twin of ``impl`` (the reference), that drives it, so
    rule coverage comes too.
    """
    model = of(scenario)
    observed = model.observed_coverage(scenario, impl)
    if observed is not None:
        plans, counts, decided = observed
    else:
        from tracediff.project.impls import parse_impl
        from tracediff.running.runner import trace_records

        # the runner takes any model's scenario (typed as the built-in model's, for now)
        records = trace_records(cast(Any, scenario), parse_impl(impl), guarded=True)
        plans, counts = model.trace_coverage(records)
        decided = ()
    return ScenarioCoverage(
        seed=scenario.seed,
        features=scenario.features(),
        plans=plans,
        counts=counts,
        decided=decided,
    )


@dataclass(frozen=True)
class CoverageWork:
    """One seed for :func:`coverage_task` to measure on an executor's worker: the profile
    that generates its scenario, the implementation (as ``--impl`` names it) and the time
    limit (``None``: none)."""

    profile: Profile
    seed: int
    impl: str = "reference"
    timeout_s: float | None = None


def coverage_task(work: CoverageWork, _progress: Any, _notify: Notify) -> ScenarioCoverage:
    """One seed in a worker: generate its scenario and measure it, within the time limit."""
    profile = work.profile
    with time_limit(work.timeout_s):
        return scenario_coverage(generate(profile, work.seed), work.impl)


def coverage(
    profile: Profile,
    seeds: Sequence[int] | None = None,
    jobs: int = 1,
    *,
    impl: str = "reference",
    executor: Executor | None = None,
    timeout_s: float | None = None,
    on_result: Callable[[], None] | None = None,
) -> CoverageReport:
    """Per feature, how many scenarios and plans of ``profile`` exercised it.

    ``seeds`` defaults to the profile's own. Scenarios run on ``executor`` (else worker
    processes when ``jobs`` > 1, else this process); results are in seed order either way,
    so the report does not depend on it. A seed that cannot be measured (the implementation
    raises, times out or kills its worker) is listed in the report's ``failures``.
    """
    started = time.perf_counter()
    chosen_seeds = tuple(profile.seeds if seeds is None else seeds)
    work = [CoverageWork(profile, seed, impl, timeout_s) for seed in chosen_seeds]
    chosen = executor
    if chosen is None:
        chosen = open_executor("local" if jobs > 1 else "inline", jobs=min(jobs, len(work) or 1))
    deadline = None if timeout_s is None else timeout_s + grace(timeout_s)
    try:
        outcomes = chosen.map(
            coverage_task,
            work,
            deadline_s=deadline,
            on_outcome=None if on_result is None else (lambda _outcome: on_result()),
        )
    finally:
        if executor is None:
            chosen.close()
    results = [o.value for o in outcomes if o.kind == DONE]
    failures = tuple(
        (seed, _failure(o, timeout_s))
        for seed, o in zip(chosen_seeds, outcomes, strict=True)
        if o.kind != DONE
    )
    report = summarise(
        profile.name, impl, results, time.perf_counter() - started, model=of(profile)
    )
    return replace(report, failures=failures)


def _failure(outcome: Outcome, timeout_s: float | None) -> str:
    if "ScenarioTimeout" in outcome.detail:
        return f"exceeded the {timeout_s:g} s scenario time limit"
    return outcome.failure(timeout_s)


def summarise(
    profile: str,
    impl: str,
    results: Sequence[ScenarioCoverage],
    wall_seconds: float = 0.0,
    *,
    model: DecisionModel | None = None,
) -> CoverageReport:
    """Add per-scenario counts up into a report (scenarios kept in the order given), by the
    features and clauses of ``model`` (the default model when None)."""
    chosen = current_model() if model is None else model
    features = feature_rows(
        chosen,
        [sum(1 for r in results if r.counts[i] > 0) for i in range(len(chosen.features))],
        [sum(r.counts[i] for r in results) for i in range(len(chosen.features))],
    )
    measured = bool(results) and all(r.decided for r in results)
    # Only the observed reference measures clauses: another implementation's are empty.
    clauses: tuple[ClauseCoverage, ...] = ()
    if measured:
        count = len(chosen.clauses)
        clauses = clause_rows(
            chosen,
            [sum(1 for r in results if r.decided[i] > 0) for i in range(count)],
            [sum(r.decided[i] for r in results) for i in range(count)],
        )
    return CoverageReport(
        profile=profile,
        impl=impl,
        seeds=tuple(r.seed for r in results),
        plans=sum(r.plans for r in results),
        features=features,
        scenarios=tuple(results),
        wall_seconds=wall_seconds,
        clauses=clauses,
    )


def coverage_to_dict(report: CoverageReport, model: DecisionModel | None = None) -> dict[str, Any]:
    """The report as versioned JSON-ready data (``coverage_from_dict`` reads it back); the
    per-scenario counts are named by the features and clauses of ``model`` (the default
    model when None)."""
    chosen = current_model() if model is None else model
    feature_names = tuple(chosen.features)
    clause_names = tuple(clause.name for clause in chosen.clauses)
    return {
        "format": FORMAT,
        "version": VERSION,
        "profile": report.profile,
        "impl": report.impl,
        "scenarios": len(report.scenarios),
        "plans": report.plans,
        "wall_seconds": round(report.wall_seconds, 3),
        "min_scenarios": report.min_scenarios,
        "missing": list(report.missing),
        "failures": [{"seed": seed, "message": why} for seed, why in report.failures],
        "features": [
            {"name": f.name, "required": f.required, "scenarios": f.scenarios, "plans": f.plans}
            for f in report.features
        ],
        "clauses": [
            {
                "name": c.name,
                "required": c.required,
                "proof": c.proof,
                "scenarios": c.scenarios,
                "plans": c.plans,
            }
            for c in report.clauses
        ],
        "per_scenario": [
            {
                "seed": s.seed,
                "features": s.features,
                "plans": s.plans,
                "counts": dict(zip(feature_names, s.counts, strict=True)),
                "decided": dict(zip(clause_names, s.decided, strict=True)) if s.decided else {},
            }
            for s in report.scenarios
        ],
    }


def coverage_from_dict(data: Any, model: DecisionModel | None = None) -> CoverageReport:
    """Read a report written by ``coverage_to_dict`` (for ``model``, the default model when
    None); raises ValueError when it is not one."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if data.get("version") != VERSION:
        raise ValueError(f"{FORMAT} version {data.get('version')!r}; this reader knows {VERSION}")
    chosen = current_model() if model is None else model
    feature_names = tuple(chosen.features)
    clause_names = tuple(clause.name for clause in chosen.clauses)
    try:
        scenarios = tuple(
            ScenarioCoverage(
                seed=int(s["seed"]),
                features=str(s["features"]),
                plans=int(s["plans"]),
                counts=tuple(int(s["counts"].get(name, 0)) for name in feature_names),
                decided=(
                    tuple(int(s["decided"].get(name, 0)) for name in clause_names)
                    if s.get("decided")
                    else ()
                ),
            )
            for s in data["per_scenario"]
        )
        report = summarise(
            str(data["profile"]),
            str(data["impl"]),
            scenarios,
            float(data["wall_seconds"]),
            model=chosen,
        )
        failures = tuple((int(f["seed"]), str(f["message"])) for f in data.get("failures", ()))
        return replace(report, failures=failures)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed {FORMAT} document: {exc!r}") from None
