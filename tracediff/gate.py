"""The gate CI runs: the regression corpus, the profile, and the profile's golden digests.

Each scenario is run once, and counted once. The profile's lockstep run yields every
implementation's body digest as a by-product (the runner digests what it compares), so the
golden step compares those digests with the accepted manifest instead of running the
implementations (and the reference) a second time. A scenario that diverges between the
implementations is one finding of the profile, with a note when it also misses its golden
digest; a scenario on which the implementations agree with one another but not with the
manifest (the reference itself changed) is one finding of the golden step. Corpus scenarios
are labelled ``regression:<profile>:<seed>``, never as the profile's seed of that number.

Under decision equivalence (``--equivalence decisions --ulps N``) both runs compare records
within N ULPs, and a golden digest an implementation misses is accepted when the run's first
implementation reproduces that digest exactly and the others decided as it did (the lockstep
run has just checked that): the step says how many seeds passed only that way.

Every finding carries its explanation and the command that reproduces it. Every scenario,
explanation and re-run goes through one executor (the caller's, else a local pool of
``jobs`` workers or this process). Nothing here prints: progress goes to ``on_progress`` as
one-line messages.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracediff import model as models
from tracediff.compare.equivalence import Equivalence
from tracediff.compare.model import (
    DIVERGED,
    EMPTY,
    FAILED,
    IDENTICAL,
    NOT_CONFIGURED,
    PASSED,
    DiffReport,
    ScenarioOutcome,
    StepOutcome,
)
from tracediff.executor import DONE, Executor, Limits, Notify
from tracediff.filenames import component
from tracediff.model import Scenario
from tracediff.project.impls import ImplSpec
from tracediff.project.profiles import profile_options
from tracediff.report.describe import plural

if TYPE_CHECKING:
    from tracediff.golden import GoldenMismatch, Manifest

GOLDEN_SUITE = "golden"
REGRESSIONS_SUITE = "regressions"


@dataclass(frozen=True)
class GateOptions:
    profile: str  # the profile's name (its scenarios', its golden manifest's)
    scenarios: tuple[Scenario, ...]  # the profile's (or --seeds') scenarios
    impls: tuple[ImplSpec, ...]
    seeds_given: bool = False  # --seeds: check only those seeds' digests
    corpus: tuple[Path, ...] = ()  # the regression corpus's files, in order
    corpus_dir: Path | None = None
    corpus_label: str = ""  # which corpus, for the summary (tracediff.project.DataSource)
    golden_dir: Path | None = None
    golden_label: str = ""  # which manifests, for the summary
    shown: Callable[[Path], str] = str  # how a reproduce command names a file (project.relative)

    def scenario_arg(self, path: Path) -> str:
        """How ``run --scenario`` names a corpus file: ``builtin:NAME`` for the built-in
        corpus (never an installed package's path), else relative to the project's root."""
        from tracediff.project.corpus import builtin_name

        return builtin_name(path) or self.shown(path)

    jobs: int = 1
    artifacts: str = "artifacts"
    timeout_s: float | None = None
    context: int = 5
    fail_fast: bool = False
    golden_flag: str | None = None  # "--golden-dir X" as given, for reproduce commands
    equivalence: Equivalence = Equivalence()  # byte identity unless decisions mode is asked
    # The profile as the command named it, ``--workload`` file included (PROFILE@/abs/FILE,
    # tracediff.workload.compose), for the commands a report tells the user to run: a
    # --workload profile's name (quick+traffic-1a2b3c4d) is no profile they can load.
    command_profile: str = ""

    @property
    def profile_spec(self) -> str:
        return self.command_profile or self.profile


@dataclass(frozen=True)
class GateResult:
    report: DiffReport
    interrupted: int | None = None  # the signal that stopped it


def _impl_args(specs: Sequence[ImplSpec]) -> str:
    return " ".join(f"--impl {shlex.quote(spec.name)}" for spec in specs)


def reproduce_seed(profile: str, seed: int, specs: Sequence[ImplSpec]) -> str:
    return f"tracediff run {profile_options(profile)} --seeds {seed} {_impl_args(specs)}"


def run_gate(
    options: GateOptions,
    on_progress: Callable[[str], None],
    on_result: Callable[[object], None] | None = None,
    executor: Executor | None = None,
) -> GateResult:
    """Run the gate's steps and return the report (the caller presents and writes it).
    ``on_result`` sees each scenario's runner result as it finishes. Everything runs on
    ``executor`` (the caller keeps it), else on one opened here for the whole gate."""
    if executor is not None:
        return _run_gate(options, on_progress, on_result, executor)
    from tracediff.running.runner import RunOptions

    # As run's: a local pool when jobs > 1 or a time limit must be able to kill a hang.
    own = RunOptions(impls=options.impls, jobs=options.jobs, limits=Limits(options.timeout_s))
    with own.open_executor() as chosen:
        return _run_gate(options, on_progress, on_result, chosen)


def _run_gate(
    options: GateOptions,
    on_progress: Callable[[str], None],
    on_result: Callable[[object], None] | None,
    executor: Executor,
) -> GateResult:
    from tracediff.project.corpus import REGRESSION_PREFIX, load_scenario

    started = time.perf_counter()
    steps: list[StepOutcome] = []
    outcomes: list[ScenarioOutcome] = []
    interrupted: int | None = None

    # 1. the regression corpus: past failures first, so one that comes back fails by name.
    corpus = [load_scenario(path) for path in options.corpus]
    if not corpus:
        where = options.corpus_label or options.corpus_dir or "(none configured)"
        steps.append(StepOutcome("regressions", EMPTY, f"no scenarios in {where}"))
        on_progress(f"regressions: {EMPTY}: no scenarios in {where}")
    else:
        labelled = [models.of(s).relabel(s, f"{REGRESSION_PREFIX}{s.profile}") for s in corpus]
        on_progress(f"regressions: {plural(len(labelled), 'scenario')} ...")
        step, found, interrupted, _ = _run_step(
            "regressions", REGRESSIONS_SUITE, labelled, options, "regressions", executor, on_result
        )
        reproduce = {
            (s.profile, s.seed): "tracediff run --scenario "
            f"{shlex.quote(options.scenario_arg(path))} {_impl_args(options.impls)}"
            for s, path in zip(labelled, options.corpus, strict=True)
        }
        found = [
            dataclasses.replace(o, reproduce=reproduce.get((o.profile, o.seed), ""))
            if o.finding
            else o
            for o in found
        ]
        if options.corpus_label:
            step = dataclasses.replace(step, detail=f"{step.detail}; {options.corpus_label}")
        steps.append(step)
        outcomes.extend(found)
        on_progress(f"regressions: {step.status}: {step.detail}")
    stop = interrupted is not None or (options.fail_fast and steps[-1].status == FAILED)

    # 2. the profile, in lockstep; 3. its golden digests, from the same run.
    if not stop:
        name = f"profile {options.profile}"
        on_progress(f"{name}: {plural(len(options.scenarios), 'scenario')} ...")
        step, found, interrupted, results = _run_step(
            name,
            options.profile,
            list(options.scenarios),
            options,
            options.profile,
            executor,
            on_result,
        )
        found = [
            dataclasses.replace(
                o, reproduce=reproduce_seed(options.profile_spec, o.seed, options.impls)
            )
            if o.finding
            else o
            for o in found
        ]
        if interrupted is None:
            golden, found = _golden_step(options, results, found, executor)
            steps.append(golden)
            on_progress(f"golden: {golden.status}: {golden.detail}")
        steps.append(step)
        outcomes.extend(found)
        on_progress(f"{name}: {step.status}: {step.detail}")
    checked = len(outcomes)
    notes: tuple[str, ...] = ()
    if interrupted is not None:
        notes = ("interrupted: not every step ran",)
    if options.equivalence.tolerant:
        notes = (*notes, f"compared as {options.equivalence.label}")
    report = DiffReport(
        title=f"tracediff gate {profile_options(options.profile_spec)}",
        impls=tuple(spec.name for spec in options.impls),
        outcomes=tuple(outcomes),
        steps=tuple(steps),
        wall_seconds=time.perf_counter() - started,
        notes=notes,
    )
    if checked == 0 and interrupted is None:
        # Nothing was compared: a gate that passes on nothing would hide a broken set-up.
        report = dataclasses.replace(
            report,
            steps=(*report.steps, StepOutcome("scenarios", FAILED, "nothing to check")),
        )
    return GateResult(report, interrupted)


def _run_step(
    name: str,
    suite: str,
    scenarios: Sequence[Scenario],
    options: GateOptions,
    artifacts_sub: str,
    executor: Executor,
    on_result: Callable[[object], None] | None = None,
) -> tuple[StepOutcome, list[ScenarioOutcome], int | None, list[object]]:
    """Run one step's scenarios and explain its findings: (step, outcomes, stop signal,
    the runner's results)."""
    from tracediff.running.explain import explain_results
    from tracediff.running.runner import RunOptions, run_scenarios

    run_options = RunOptions(
        impls=options.impls,
        jobs=options.jobs,
        artifacts=os.path.join(options.artifacts, component(artifacts_sub)),
        limits=Limits(options.timeout_s),
        equivalence=options.equivalence,
    )
    summary = run_scenarios(scenarios, run_options, on_result, executor=executor)
    outcomes = explain_results(
        scenarios,
        summary.results,
        options.impls,
        suite=suite,
        context=options.context,
        executor=executor,
        timeout_s=options.timeout_s,
        deadline_s=run_options.kill_after_s,
    )
    findings = [r for r in summary.results if r.status != IDENTICAL]
    count = len(summary.results)
    if findings:
        kinds: dict[str, int] = {}
        for o in outcomes:
            if o.divergence is not None:
                kinds[o.divergence.kind] = kinds.get(o.divergence.kind, 0) + 1
        detail = f"{len(findings)} of {plural(count, 'scenario')}: " + ", ".join(
            f"{n} {kind}" for kind, n in sorted(kinds.items())
        )
        step = StepOutcome(name, FAILED, detail)
    elif summary.within_ulps:
        tolerated = summary.within_ulps
        floats = sum(r.floats_within for r in tolerated)
        detail = (
            f"{plural(count, 'scenario')} equal under {summary.equivalence.label}: "
            f"{len(tolerated):,} of them differ in {floats:,} floats by at most "
            f"{summary.max_ulps} ULPs; {plural(summary.plans, 'plan')}"
        )
        step = StepOutcome(name, PASSED, detail)
    else:
        identical = "identical (no float differed)" if summary.equivalence.tolerant else "identical"
        step = StepOutcome(
            name,
            PASSED,
            f"{plural(count, 'scenario')} {identical}, {plural(summary.plans, 'plan')}",
        )
    if summary.interrupted:
        step = StepOutcome(name, FAILED, f"interrupted after {count} of {len(scenarios)}")
        signum = summary.interrupt_signal or signal.SIGINT
        return step, outcomes, int(signum), list(summary.results)
    return step, outcomes, None, list(summary.results)


def _golden_step(
    options: GateOptions,
    results: Sequence[object],
    outcomes: list[ScenarioOutcome],
    executor: Executor,
) -> tuple[StepOutcome, list[ScenarioOutcome]]:
    """Compare the profile run's digests with the accepted manifest.

    Returns the step and the profile's outcomes with each golden mismatch folded in: a note
    on a scenario that is already a finding, or the scenario moved into the golden suite as
    a finding of its own when its implementations agree (the reference changed)."""
    from tracediff import golden
    from tracediff.running.runner import ScenarioResult

    if options.golden_dir is None:
        detail = options.golden_label or "no golden directory configured"
        return StepOutcome("golden", NOT_CONFIGURED, detail), outcomes
    path = golden.manifest_path(options.golden_dir, options.profile)
    if not path.exists():
        return (
            StepOutcome(
                "golden",
                NOT_CONFIGURED,
                golden.missing_message(path, options.profile_spec),
            ),
            outcomes,
        )
    manifest = golden.read_manifest(path)
    expected = manifest.by_seed
    by_seed: dict[int, ScenarioResult] = {}
    for result in results:
        assert isinstance(result, ScenarioResult)
        by_seed[result.seed] = result
    scenarios = {s.seed: s for s in options.scenarios}
    position = {o.seed: i for i, o in enumerate(outcomes)}
    out = list(outcomes)
    mismatched: dict[int, list[str]] = {}  # seed -> what differs from the manifest
    tolerated: set[int] = set()  # seeds that match only under decision equivalence
    for seed, result in by_seed.items():
        entry = expected.get(seed)
        if entry is None:
            if not options.seeds_given:
                mismatched.setdefault(seed, []).append(
                    "the manifest has no digest for this seed (the profile grew); run "
                    f"{golden.update_command(options.profile_spec)}"
                )
            continue
        if result.status != IDENTICAL and result.status != DIVERGED:
            continue  # an error or a timeout: a finding already, with no whole digest
        if (
            options.equivalence.tolerant
            and result.status == IDENTICAL
            and result.floats_within
            and result.impls
            and result.impls[0].digest == entry.digest
        ):
            # The first implementation reproduces the accepted digest exactly and the run
            # found the others deciding as it does within the tolerance.
            if any(stats.digest != entry.digest for stats in result.impls):
                tolerated.add(seed)
            continue
        for stats in result.impls:
            if stats.digest != entry.digest:
                mismatched.setdefault(seed, []).append(
                    f"{stats.name} differs from the accepted golden digest"
                )
    gone = [] if options.seeds_given else sorted(set(expected) - set(scenarios))
    rerun: list[int] = []  # seeds whose reference change is explained by a re-run
    for seed in sorted(mismatched):
        index = position.get(seed)
        if index is None:
            continue
        current = out[index]
        text = "; ".join(mismatched[seed])
        if current.finding:
            note = f"golden: {text}"
            out[index] = dataclasses.replace(
                current,
                explanation=f"{current.explanation}; {note}" if current.explanation else note,
            )
            continue
        # The implementations agree with one another but not with the manifest.
        if len(rerun) < golden.EXPLAIN_AT_MOST and seed in expected:
            rerun.append(seed)
        out[index] = dataclasses.replace(
            current,
            suite=GOLDEN_SUITE,
            status=DIVERGED,
            explanation=text,
            reproduce=_reproduce_golden(options, seed),
        )
    texts = _explain_reference_changes(
        options, manifest, [(scenarios[seed], by_seed[seed]) for seed in rerun], executor
    )
    for seed, text in zip(rerun, texts, strict=True):
        index = position[seed]
        out[index] = dataclasses.replace(out[index], explanation=text)
    for seed in gone:
        out.append(
            ScenarioOutcome(
                suite=GOLDEN_SUITE,
                profile=options.profile,
                seed=seed,
                features="-",
                status=DIVERGED,
                explanation="the manifest has a seed the profile no longer runs; run "
                f"{golden.update_command(options.profile_spec)}",
                reproduce=golden.update_command(options.profile_spec),
            )
        )
    count = len([s for s in by_seed if s in expected])
    impls = plural(len(options.impls), "implementation")
    where = f"{path.name} in {options.golden_label}" if options.golden_label else str(path)
    if mismatched or gone:
        detail = f"{plural(len(mismatched) + len(gone), 'scenario')} of {count} differ from {where}"
        return StepOutcome("golden", FAILED, detail), out
    detail = f"{impls} match all {plural(count, 'digest')} of {where} (from the profile's run)"
    if tolerated:
        detail = (
            f"{impls} match {count - len(tolerated):,} of {plural(count, 'digest')} of {where} "
            f"(from the profile's run); {plural(len(tolerated), 'scenario')} only under "
            f"{options.equivalence.label}"
        )
    return StepOutcome("golden", PASSED, detail), out


def _explain_reference_changes(
    options: GateOptions,
    manifest: object,
    pairs: Sequence[tuple[Scenario, object]],
    executor: Executor,
) -> list[str]:
    """Why each scenario on which every implementation agrees misses its golden digest:
    one re-run of the baseline per scenario, on ``executor``."""
    from tracediff import golden
    from tracediff.running.runner import ScenarioResult

    assert isinstance(manifest, golden.Manifest) and options.golden_dir is not None
    work: list[ReferenceChangeWork] = []
    for scenario, result in pairs:
        assert isinstance(result, ScenarioResult)
        stats = result.impls[0]
        actual = golden.Digested(
            seed=scenario.seed,
            status=golden.OK,
            digest=stats.digest,
            plans=stats.plans,
            records=stats.records,
            bytes=0,
            seconds=stats.seconds,
        )
        mismatch = golden.GoldenMismatch(
            scenario.seed, golden.DIGEST, manifest.by_seed[scenario.seed], actual
        )
        artifacts = os.path.join(options.artifacts, "golden")
        work.append(
            ReferenceChangeWork(
                mismatch, scenario, options.impls[0], manifest, str(options.golden_dir), artifacts
            )
        )
    if not work:
        return []
    # The re-run writes the baseline's trace and reads the golden one: one limited run.
    outcomes = executor.map(
        _reference_change_task, work, deadline_s=golden.deadline(options.timeout_s, runs=2)
    )
    prefix = "all implementations agree, but not with the accepted golden digest: "
    texts = []
    for outcome in outcomes:
        if outcome.kind == DONE:
            texts.append(prefix + str(outcome.value))
        else:
            why = outcome.failure(options.timeout_s)
            texts.append(f"{prefix}could not explain: on the re-run, {why}")
    return texts


@dataclass(frozen=True)
class ReferenceChangeWork:
    """A scenario on which every implementation agrees but misses its golden digest, for
    :func:`_reference_change_task` to explain on an executor's worker
    (:func:`tracediff.golden.explain_reference_change`'s arguments)."""

    mismatch: GoldenMismatch
    scenario: Scenario
    spec: ImplSpec
    manifest: Manifest
    golden_dir: str
    artifacts: str | None = None


def _reference_change_task(work: ReferenceChangeWork, progress: Any, _notify: Notify) -> str:
    """Executor task: golden's explanation of one reference change, as text."""
    from tracediff import golden

    try:
        return golden.explain_reference_change(
            work.mismatch,
            work.scenario,
            work.spec,
            work.manifest,
            work.golden_dir,
            work.artifacts,
        ).explanation
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and progress is None:
            raise  # in this process, Ctrl-C is the user's
        return f"could not explain: the re-run raised {type(exc).__name__}: {exc}"


def _reproduce_golden(options: GateOptions, seed: int) -> str:
    flag = f" {options.golden_flag}" if options.golden_flag else ""
    return (
        f"tracediff golden check {profile_options(options.profile_spec)} --seeds {seed} "
        f"--impl {shlex.quote(options.impls[0].name)}{flag}"
    )
