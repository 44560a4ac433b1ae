"""``golden check`` and the gate's golden step: digests against the manifest, explained."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracediff import workload
from tracediff.compare.equivalence import Equivalence
from tracediff.errors import TraceFormatError, UsageError
from tracediff.executor import (
    DONE,
    Executor,
    Notify,
)
from tracediff.filenames import component, inside
from tracediff.golden.digest import Digested, deadline, digest_scenarios, executor_for
from tracediff.golden.manifest import (
    DEFAULT_DIR,
    DIGEST,
    EXPLAIN_AT_MOST,
    FAILED,
    MISMATCH,
    MISSING,
    NOT_IN_MANIFEST,
    NOT_IN_PROFILE,
    OK,
    Entry,
    ExplainFn,
    Manifest,
    manifest_path,
    read_manifest,
    trace_path,
)
from tracediff.model import Scenario, claim
from tracediff.project.impls import ImplSpec, parse_impl
from tracediff.project.profiles import profile_options
from tracediff.trace import TraceReader, first_difference


@dataclass(frozen=True)
class GoldenMismatch:
    """A seed whose digest differs from the manifest's, with what a re-run found."""

    seed: int
    kind: str  # DIGEST, FAILED, NOT_IN_MANIFEST or NOT_IN_PROFILE
    expected: Entry | None
    actual: Digested | None
    explanation: str = ""
    reference_changed: bool | None = None  # the reference itself no longer matches
    divergence: int | None = None  # body index of the first differing record
    plan: int | None = None
    record_type: str | None = None
    artifacts: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "kind": self.kind,
            "expected": None if self.expected is None else self.expected.to_dict(),
            "actual": None
            if self.actual is None
            else {
                "status": self.actual.status,
                "digest": self.actual.digest,
                "plans": self.actual.plans,
                "records": self.actual.records,
                "bytes": self.actual.bytes,
                "message": self.actual.message,
            },
            "explanation": self.explanation,
            "reference_changed": self.reference_changed,
            "divergence": self.divergence,
            "plan": self.plan,
            "record_type": self.record_type,
            "artifacts": list(self.artifacts),
        }


@dataclass(frozen=True)
class GoldenOutcome:
    """The result of checking one implementation against one profile's manifest."""

    profile: str
    impl: str
    manifest: str  # its path
    status: str  # OK, MISMATCH or MISSING (no manifest for the profile)
    checked: int = 0
    plans: int = 0
    mismatches: tuple[GoldenMismatch, ...] = ()
    seconds: float = 0.0
    message: str = ""
    artifacts: tuple[str, ...] = ()
    # Σ wall time of driving each scenario, and of the implementation's decisions in it
    driving_seconds: float = 0.0
    plan_seconds: float = 0.0
    equivalence: Equivalence = Equivalence()
    # Decision equivalence: (seed, floats that differed, max ULPs) of each seed whose digest
    # differs but whose decisions, re-run against the reference, are the same.
    within_ulps: tuple[tuple[int, int, int], ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def skipped(self) -> bool:
        """No manifest exists for the profile: nothing was checked (not a finding)."""
        return self.status == MISSING

    @property
    def simulation_share(self) -> float | None:
        """What driving cost on top of the implementation's own decisions (0.25: a quarter
        more): the simulated engine, the driver, encoding and digesting. None when no
        decision was timed."""
        if self.plan_seconds <= 0:
            return None
        return (self.driving_seconds - self.plan_seconds) / self.plan_seconds

    def summary(self) -> str:
        if self.status == MISSING:
            return f"golden {self.profile}: no manifest ({self.message})"
        if self.ok and self.within_ulps:
            floats = sum(w[1] for w in self.within_ulps)
            worst = max(w[2] for w in self.within_ulps)
            exact = self.checked - len(self.within_ulps)
            return (
                f"golden {self.profile}: {self.impl} matches {exact:,} of {self.checked:,} "
                f"digests; {len(self.within_ulps):,} scenarios only under "
                f"{self.equivalence.label} ({floats:,} floats, at most {worst} ULPs)"
            )
        if self.ok:
            share = self.simulation_share
            beside = "" if share is None else f"; simulation and harness +{share:.0%} of plan()"
            return (
                f"golden {self.profile}: {self.impl} matches all {self.checked:,} digests "
                f"({self.plans:,} plans, {self.seconds:.1f} s{beside})"
            )
        return (
            f"golden {self.profile}: {self.impl} differs on {len(self.mismatches):,} of "
            f"{self.checked:,} scenarios"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "tracediff-golden-check",
            "version": 1,
            "profile": self.profile,
            "impl": self.impl,
            "manifest": self.manifest,
            "status": self.status,
            "ok": self.ok,
            "checked": self.checked,
            "plans": self.plans,
            "seconds": round(self.seconds, 3),
            "simulation_share": (
                None if self.simulation_share is None else round(self.simulation_share, 4)
            ),
            "message": self.message,
            "mismatches": [m.to_dict() for m in self.mismatches],
            "artifacts": list(self.artifacts),
            "equivalence": {
                "mode": self.equivalence.mode,
                "ulps": self.equivalence.ulps,
                "label": self.equivalence.label,
                "within_ulps": [
                    {"seed": seed, "floats": floats, "max_ulps": ulps}
                    for seed, floats, ulps in self.within_ulps
                ],
            },
        }


def profile_scenarios(
    profile_name: str, seeds: Sequence[int] | None = None
) -> tuple[str, list[Scenario]]:
    """The profile's name and its scenarios, in its seed order; with ``seeds``, only those
    of them (the others are not generated)."""
    from tracediff.project import current_model

    model = current_model()
    from tracediff.project.profiles import load_profile

    profile = load_profile(model, profile_name)
    if not profile.seeds:
        raise UsageError(f"profile {profile.name!r} names no seeds; golden needs its seed set")
    wanted = None if seeds is None else set(seeds)
    chosen = [seed for seed in profile.seeds if wanted is None or seed in wanted]
    return profile.name, [claim(model, model.generate(profile, seed)) for seed in chosen]


def update_command(profile_name: str) -> str:
    """The command that writes the pending manifest of ``profile_name`` (a command's
    profile string, ``--workload`` included): what every hint about a missing or stale
    manifest tells the user to run. Never the manifest's name: ``quick+traffic-1a2b3c4d``
    is not a profile ``golden update`` can load."""
    return f"tracediff golden update {profile_options(profile_name)}"


def missing_message(path: Path, profile_name: str) -> str:
    """Why there is no manifest at ``path`` for ``profile_name``, and what to run.

    A ``--workload`` profile's manifest was named ``PROFILE+STEM`` before its name carried
    the workload's tag (:meth:`tracediff.workload.WorkloadSet.profile_name`); one found
    under that name is not read (it may be another file's of the same stem, the collision
    the tag ends), but named, so that nobody wonders where their digests went."""
    text = f"{path} does not exist; run {update_command(profile_name)}, review and accept"
    if workload.split(profile_name)[1] is None:
        return text
    stem = path.name[: -len(".json")]
    tag = len("-") + workload.TAG_CHARS
    old = path.with_name(f"{stem[:-tag]}.json")
    if len(stem) <= tag or not old.is_file():
        return text
    return (
        f"{text}, then delete {old.name} (a manifest named as before workload manifests "
        "carried the workload's content digest, which another file of the same name could "
        "share: not read)"
    )


def check(
    profile_name: str,
    spec: ImplSpec,
    *,
    golden_dir: str | Path = DEFAULT_DIR,
    jobs: int = 1,
    timeout_s: float | None = None,
    artifacts: str | Path | None = None,
    explain_fn: ExplainFn | None = None,
    on_result: Callable[[Digested], None] | None = None,
    seeds: Sequence[int] | None = None,
    executor: Executor | None = None,
    equivalence: Equivalence | None = None,
) -> GoldenOutcome:
    """Run ``spec`` alone over the profile and compare its digests with the manifest.

    Under a tolerant ``equivalence`` (decisions within N ULPs), every seed whose digest
    differs is re-run in lockstep against the manifest's implementation; it passes, and is
    listed in ``within_ulps``, when that implementation still matches its own digest and the
    two decide the same.

    ``seeds`` restricts the check to those seeds of the profile (each must be in the
    manifest); by default every seed is checked and seeds missing on either side are
    mismatches.

    Seeds that differ are re-run in lockstep against the manifest's implementation (the
    reference) to say where the traces first differ (``explain_fn`` may replace that
    explanation). With ``artifacts``, their traces are kept there. Digests and re-runs run
    on ``executor`` (else worker processes when ``jobs`` > 1, else this process).
    """
    started = time.perf_counter()
    name, scenarios = profile_scenarios(profile_name, seeds)
    path = manifest_path(golden_dir, name)
    if not path.exists():
        return GoldenOutcome(
            profile=name,
            impl=spec.name,
            manifest=str(path),
            status=MISSING,
            message=missing_message(path, profile_name),
        )
    manifest = read_manifest(path)
    if manifest.profile != name:
        raise TraceFormatError(str(path), f"is the manifest of profile {manifest.profile!r}")
    expected = manifest.by_seed
    if seeds is not None:
        wanted = set(seeds)
        expected = {seed: entry for seed, entry in expected.items() if seed in wanted}
    compare_as = equivalence or Equivalence()
    within_ulps: list[tuple[int, int, int]] = []
    chosen = executor_for(executor, jobs, len(scenarios))
    try:
        results = digest_scenarios(
            scenarios,
            spec,
            timeout_s=timeout_s,
            on_result=on_result,
            executor=chosen,
            expected={seed: entry.digest for seed, entry in expected.items()},
        )
        mismatches = _mismatches(results, expected, scenarios)
        if compare_as.tolerant:
            mismatches, within_ulps = _tolerate(
                mismatches, {s.seed: s for s in scenarios}, spec, manifest, timeout_s,
                compare_as, chosen,
            )  # fmt: skip
        explained = _explain_all(
            mismatches,
            {s.seed: s for s in scenarios},
            spec,
            manifest,
            golden_dir,
            artifacts,
            timeout_s,
            explain_fn,
            chosen,
            update_command(profile_name),
        )
    finally:
        if executor is None:
            chosen.close()
    kept = tuple(a for m in explained for a in m.artifacts)
    return GoldenOutcome(
        profile=name,
        impl=spec.name,
        manifest=str(path),
        status=OK if not explained else MISMATCH,
        checked=len(results),
        plans=sum(r.plans for r in results),
        mismatches=tuple(explained),
        seconds=time.perf_counter() - started,
        artifacts=kept,
        driving_seconds=sum(r.seconds for r in results),
        plan_seconds=sum(r.plan_seconds for r in results),
        equivalence=compare_as,
        within_ulps=tuple(within_ulps),
    )


def _mismatches(
    results: Sequence[Digested], expected: dict[int, Entry], scenarios: Sequence[Scenario]
) -> list[GoldenMismatch]:
    by_seed = {s.seed: s for s in scenarios}
    mismatches: list[GoldenMismatch] = []
    for result in results:
        entry = expected.get(result.seed)
        if entry is None:
            mismatches.append(GoldenMismatch(result.seed, NOT_IN_MANIFEST, None, result))
        elif result.status != OK:
            mismatches.append(GoldenMismatch(result.seed, FAILED, entry, result))
        elif result.digest != entry.digest:
            mismatches.append(GoldenMismatch(result.seed, DIGEST, entry, result))
    for seed in sorted(set(expected) - set(by_seed)):
        mismatches.append(GoldenMismatch(seed, NOT_IN_PROFILE, expected[seed], None))
    return mismatches


def _tolerate(
    mismatches: list[GoldenMismatch],
    scenarios: dict[int, Scenario],
    spec: ImplSpec,
    manifest: Manifest,
    timeout_s: float | None,
    equivalence: Equivalence,
    executor: Executor,
) -> tuple[list[GoldenMismatch], list[tuple[int, int, int]]]:
    """Digest mismatches that decision equivalence accepts, taken out of ``mismatches``."""
    from tracediff.running.runner import IDENTICAL

    digests = [m for m in mismatches if m.kind == DIGEST]
    reference = parse_impl(manifest.impl)
    work = [
        LockstepWork(scenarios[m.seed], reference, spec, timeout_s, equivalence) for m in digests
    ]
    accepted: dict[int, tuple[int, int, int]] = {}
    outcomes = executor.map(_lockstep_task, work, deadline_s=deadline(timeout_s, runs=2))
    for mismatch, outcome in zip(digests, outcomes, strict=True):
        assert mismatch.expected is not None
        result = outcome.value if outcome.kind == DONE else None
        if (
            result is not None
            and result.status == IDENTICAL
            and result.impls
            and result.impls[0].digest == mismatch.expected.digest
        ):
            accepted[mismatch.seed] = (mismatch.seed, result.floats_within, result.max_ulps)
    kept = [m for m in mismatches if not (m.kind == DIGEST and m.seed in accepted)]
    return kept, [accepted[seed] for seed in sorted(accepted)]


@dataclass(frozen=True)
class LockstepWork:
    """A digest mismatch's scenario for :func:`_lockstep_task` to run in lockstep, the
    manifest's implementation beside ``spec``, under ``equivalence`` (whether it accepts
    the difference) and the time limit (``None``: none)."""

    scenario: Scenario
    reference: ImplSpec
    spec: ImplSpec
    timeout_s: float | None = None
    equivalence: Equivalence = Equivalence()


def _lockstep_task(work: LockstepWork, progress: Any, _notify: Notify) -> Any:
    from tracediff.running.runner import run_scenario

    return run_scenario(
        work.scenario,
        (work.reference, work.spec),
        timeout_s=work.timeout_s,
        progress=progress,
        equivalence=work.equivalence,
    )


def _explain_all(
    mismatches: list[GoldenMismatch],
    scenarios: dict[int, Scenario],
    spec: ImplSpec,
    manifest: Manifest,
    golden_dir: str | Path,
    artifacts: str | Path | None,
    timeout_s: float | None,
    explain_fn: ExplainFn | None,
    executor: Executor,
    update: str = "tracediff golden update",
) -> list[GoldenMismatch]:
    """Explain the first EXPLAIN_AT_MOST digest mismatches by re-running them on
    ``executor`` (``explain_fn`` must be a module-level function unless it is inline);
    ``update`` is the command that updates the manifest (update_command)."""
    out = list(mismatches)
    rerun: list[int] = []
    for position, mismatch in enumerate(mismatches):
        if mismatch.kind == NOT_IN_MANIFEST:
            out[position] = dataclasses.replace(
                mismatch,
                explanation="the manifest has no digest for this seed (the profile grew); "
                f"run {update}",
            )
        elif mismatch.kind == NOT_IN_PROFILE:
            out[position] = dataclasses.replace(
                mismatch,
                explanation=f"the manifest has a seed the profile no longer runs; run {update}",
            )
        elif len(rerun) < EXPLAIN_AT_MOST:
            rerun.append(position)
        else:
            out[position] = dataclasses.replace(
                mismatch, explanation=f"not re-run (only the first {EXPLAIN_AT_MOST} are)"
            )
    work = [
        MismatchWork(
            mismatches[p],
            scenarios[mismatches[p].seed],
            spec,
            manifest,
            str(golden_dir),
            None if artifacts is None else str(artifacts),
            timeout_s,
            explain_fn,
        )
        for p in rerun
    ]
    # A re-run drives the reference and the implementation, and may write a trace.
    outcomes = executor.map(_explain_task, work, deadline_s=deadline(timeout_s, runs=3))
    for position, outcome in zip(rerun, outcomes, strict=True):
        if outcome.kind == DONE:
            out[position] = outcome.value
        else:
            out[position] = dataclasses.replace(
                mismatches[position],
                explanation=f"could not explain: on the re-run, {outcome.failure(timeout_s)}",
            )
    return out


@dataclass(frozen=True)
class MismatchWork:
    """A digest mismatch for :func:`_explain_task` to explain on an executor's worker by
    re-running its scenario (:func:`_explain`'s arguments): the implementation checked, the
    manifest and its directory, where to keep traces (``None``: nowhere), the time limit
    of the re-run and the model's explanation of a difference (module-level, to pickle)."""

    mismatch: GoldenMismatch
    scenario: Scenario
    spec: ImplSpec
    manifest: Manifest
    golden_dir: str
    artifacts: str | None = None
    timeout_s: float | None = None
    explain_fn: ExplainFn | None = None


def _explain_task(work: MismatchWork, progress: Any, _notify: Notify) -> GoldenMismatch:
    # The lockstep re-run has the time limit; the parent's deadline covers the rest.
    try:
        return _explain(
            work.mismatch,
            work.scenario,
            work.spec,
            work.manifest,
            work.golden_dir,
            work.artifacts,
            work.timeout_s,
            work.explain_fn,
        )
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and progress is None:
            raise  # in this process, Ctrl-C is the user's
        why = f"the re-run raised {type(exc).__name__}: {exc}"
    return dataclasses.replace(work.mismatch, explanation=f"could not explain: {why}")


def _explain(
    mismatch: GoldenMismatch,
    scenario: Scenario,
    spec: ImplSpec,
    manifest: Manifest,
    golden_dir: str | Path,
    artifacts: str | Path | None,
    timeout_s: float | None,
    explain_fn: ExplainFn | None,
) -> GoldenMismatch:
    from tracediff.running.runner import IDENTICAL, run_scenario

    assert mismatch.expected is not None
    reference = parse_impl(manifest.impl)
    if reference.target == spec.target:
        return explain_reference_change(mismatch, scenario, spec, manifest, golden_dir, artifacts)
    keep = None if artifacts is None else str(artifacts)
    result = run_scenario(scenario, (reference, spec), artifacts=keep, timeout_s=timeout_s)
    reference_changed = result.impls[0].digest != mismatch.expected.digest
    parts = [SCENARIO_CHANGED] if _scenario_changed(mismatch) else []
    if result.status == IDENTICAL:
        parts.append(
            f"{spec.name} decides as {reference.name} does now, but {reference.name} no longer "
            "matches the manifest: the reference changed (golden update, then review)"
        )
    elif explain_fn is not None:
        parts.append(explain_fn(scenario, result, (reference, spec)))
    else:
        parts.append(_describe_result(scenario, result, (reference, spec)))
    if reference_changed and result.status != IDENTICAL:
        parts.append(f"note: {reference.name} itself no longer matches the manifest either")
    return dataclasses.replace(
        mismatch,
        explanation="; ".join(parts),
        reference_changed=reference_changed,
        divergence=result.divergence,
        plan=result.plan,
        record_type=result.record_type,
        artifacts=tuple(result.artifacts),
    )


SCENARIO_CHANGED = (
    "the scenario itself changed since the manifest was written (its trace header differs: "
    "the profile, the generator or the scenario defaults changed)"
)


def _scenario_changed(mismatch: GoldenMismatch) -> bool:
    expected, actual = mismatch.expected, mismatch.actual
    return bool(
        expected is not None
        and actual is not None
        and expected.scenario
        and actual.scenario
        and expected.scenario != actual.scenario
    )


def _describe_result(scenario: Scenario, result: Any, specs: Sequence[ImplSpec]) -> str:
    """One line: where the lockstep run found the first difference, and in which field."""
    from tracediff.running.runner import DIVERGED
    from tracediff.search.shrink import default_signature

    a, b = specs[0].name, specs[1].name
    if result.status != DIVERGED:
        last = result.message.strip().splitlines()[-1] if result.message.strip() else ""
        return f"{result.failed_impl or b} {result.status} at plan {result.plan}: {last}"
    signature = default_signature(scenario, result, specs)
    field_text = f", field {signature.field}" if signature and signature.field else ""
    return (
        f"diverges from {a} at record {result.divergence} "
        f"(plan {result.plan}, {result.record_type} record{field_text})"
    )


def explain_reference_change(
    mismatch: GoldenMismatch,
    scenario: Scenario,
    spec: ImplSpec,
    manifest: Manifest,
    golden_dir: str | Path,
    artifacts: str | Path | None,
) -> GoldenMismatch:
    """The manifest's own implementation no longer matches: compare with the golden trace
    when this seed kept one, else say what changed in the counts."""
    from tracediff.running.runner import write_trace

    assert mismatch.expected is not None and mismatch.actual is not None
    actual, expected = mismatch.actual, mismatch.expected
    if actual.status != OK:
        return dataclasses.replace(
            mismatch,
            explanation=f"{spec.name} now fails on this scenario: {actual.message}",
            reference_changed=True,
        )
    if _scenario_changed(mismatch):
        return dataclasses.replace(
            mismatch,
            explanation=SCENARIO_CHANGED + "; if intended: tracediff golden update, review, accept",
            reference_changed=True,
        )
    golden_trace = trace_path(golden_dir, manifest.profile, mismatch.seed)
    kept: tuple[str, ...] = ()
    text = (
        f"{spec.name} no longer produces the golden trace (plans {expected.plans} -> "
        f"{actual.plans}, records {expected.records} -> {actual.records})"
    )
    if artifacts is not None or golden_trace.exists():
        directory = str(artifacts) if artifacts is not None else None
        if directory is None:
            import tempfile

            directory = tempfile.mkdtemp(prefix="tracediff-golden-")
        new_trace = write_trace(scenario, spec, directory)
        kept = (new_trace,) if artifacts is not None else ()
        if golden_trace.exists():
            index = first_difference(str(golden_trace), new_trace)
            if index is not None:
                record = _record_at(TraceReader(str(golden_trace)), index)
                where = "" if record is None else f" ({_record_text(record)})"
                text += f"; first difference from {golden_trace} at record {index}{where}"
        if artifacts is None:
            with contextlib.suppress(OSError):
                os.unlink(new_trace)
                os.rmdir(directory)
    return dataclasses.replace(
        mismatch,
        explanation=text + "; if intended: tracediff golden update, review, accept",
        reference_changed=True,
        artifacts=kept,
    )


def _record_at(reader: TraceReader, index: int) -> dict[str, Any] | None:
    """The golden trace's record at body ``index``, checked against the trace schema."""
    from tracediff.trace.checked import checked_records

    for checked in checked_records(reader):
        if checked.index == index:
            found: dict[str, Any] = checked.record
            return found
    return None


def _record_text(record: dict[str, Any]) -> str:
    parts = [str(record.get("t", "header"))]
    if "plan" in record:
        parts.append(f"plan {record['plan']}")
    return ", ".join(parts)


def gate_step(
    profile_name: str,
    impl_spec: ImplSpec,
    jobs: int,
    artifacts: str | Path | None,
    *,
    golden_dir: str | Path = DEFAULT_DIR,
    timeout_s: float | None = None,
    explain_fn: ExplainFn | None = None,
    seeds: Sequence[int] | None = None,
    executor: Executor | None = None,
    equivalence: Equivalence | None = None,
) -> GoldenOutcome:
    """The golden step of ``tracediff gate``: check one implementation against a profile's
    manifest; the outcome's JSON goes into ``artifacts`` (with the traces of mismatches).

    A profile without a manifest gives status MISSING (``outcome.skipped``): not a finding.
    """
    outcome = check(
        profile_name,
        impl_spec,
        golden_dir=golden_dir,
        jobs=jobs,
        timeout_s=timeout_s,
        artifacts=artifacts,
        explain_fn=explain_fn,
        seeds=seeds,
        executor=executor,
        equivalence=equivalence,
    )
    if artifacts is not None and not outcome.ok:
        from tracediff.atomic import write_text_atomic

        root = Path(artifacts)
        root.mkdir(parents=True, exist_ok=True)
        name = component("golden", outcome.profile, impl_spec.name)
        report = inside(root, f"{name}.json", what="--artifacts")
        write_text_atomic(report, json.dumps(outcome.to_dict(), indent=1) + "\n")
        outcome = dataclasses.replace(outcome, artifacts=(*outcome.artifacts, str(report)))
    return outcome
