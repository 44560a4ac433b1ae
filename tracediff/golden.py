"""Golden digests: what the reference decided, per scenario, so CI need not run it again.

A *manifest* ``golden/<profile>.json`` holds, for every seed of a profile, the body digest
of the reference's trace (the same sha256 :class:`~tracediff.trace.BodyDigest` defines and
the runner reports as ``ImplStats.digest``) with its plan, record and byte counts. Checking
an implementation against it runs that implementation alone and compares digests: half the
work of a lockstep run against the reference, and a change of the reference itself shows up
as a mismatch of the reference against its own manifest. A handful of small scenarios also
keep their full trace (``golden/traces/<profile>-<seed>.trace``), for inspection with
``tracediff show`` and ``replay``, and so that a mismatch of the reference itself can be
located in them.

Manifest format, version 1 (JSON, one scenario per line so that a review diff is readable)::

    {"format": "tracediff-golden", "version": 1, "profile": "quick", "impl": "reference",
     "tracediff": "0.1.0", "traces": [3, 40],
     "scenarios": [{"seed": 0, "digest": "<sha256 hex>", "plans": 21, "records": 50,
                    "bytes": 23145, "scenario": "<16 hex>"}, ...]}

``records`` counts the compared frames, header included (as ``ImplStats.records``);
``bytes`` is the size of the compared payloads (header and records, without framing);
``scenario`` is the start of the sha256 of the header payload, so that a check can tell a
changed scenario (profile, generator or scenario defaults) from changed decisions.

Changing the golden files is a reviewed, two-step operation: ``update`` writes *pending*
files next to them (``<profile>.json.new``, ``traces/<profile>-<seed>.trace.new``) and never
overwrites an accepted file; ``review`` lists what changed (seeds added, removed, digests
changed); ``accept`` moves the pending files into place and ``reject`` deletes them. With
``CI=true`` in the environment nothing under the golden directory is written: pending files
go to the artifacts directory, and ``accept`` refuses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracediff import __version__
from tracediff.call import passes_through
from tracediff.compare.equivalence import Equivalence
from tracediff.engine.driver import drive
from tracediff.errors import NESTING, SchedulerFault, TraceFormatError, UsageError
from tracediff.executor import (
    DONE,
    KILLED,
    Executor,
    Outcome,
    ScenarioTimeout,
    grace,
    open_executor,
    time_limit,
)
from tracediff.filenames import component, inside
from tracediff.impls import ImplSpec, load, parse_impl
from tracediff.runner import private_copy
from tracediff.scenario.model import Scenario
from tracediff.trace import BodyDigest, TraceReader, encode, first_difference

FORMAT = "tracediff-golden"
VERSION = 1
DEFAULT_DIR = "golden"
DEFAULT_ARTIFACTS = "artifacts"
ARTIFACTS_ENV = "TRACEDIFF_ARTIFACTS"
PENDING = ".new"
TRACES_PER_PROFILE = 6
TRACE_MAX_BYTES = 160_000  # only small scenarios keep a full trace (the whole set ~2 MB)
SCENARIO_HASH_CHARS = 16
EXPLAIN_AT_MOST = 20  # mismatching seeds re-run against the reference to explain them

OK, MISMATCH, MISSING = "ok", "mismatch", "missing"
# kinds of a seed's mismatch
DIGEST, FAILED, NOT_IN_MANIFEST, NOT_IN_PROFILE = "digest", "failed", "not-in-manifest", "gone"

ExplainFn = Callable[[Scenario, Any, Sequence[ImplSpec]], str]


# -- environment ------------------------------------------------------------------------------
def in_ci() -> bool:
    """Whether CI=true (or 1/yes) is set: then nothing under golden/ may be written."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def artifacts_dir(explicit: str | None = None) -> Path:
    """Where CI output goes: ``explicit``, else $TRACEDIFF_ARTIFACTS, else ./artifacts."""
    return Path(explicit or os.environ.get(ARTIFACTS_ENV) or DEFAULT_ARTIFACTS)


# -- the manifest -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    seed: int
    digest: str
    plans: int
    records: int
    bytes: int
    scenario: str = ""  # sha256 (16 hex) of the trace header: which scenario was digested

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Manifest:
    profile: str
    impl: str
    tracediff: str
    scenarios: tuple[Entry, ...]
    traces: tuple[int, ...] = ()

    def entry(self, seed: int) -> Entry | None:
        return self.by_seed.get(seed)

    @property
    def by_seed(self) -> dict[int, Entry]:
        return {e.seed: e for e in self.scenarios}

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "profile": self.profile,
            "impl": self.impl,
            "tracediff": self.tracediff,
            "traces": list(self.traces),
            "scenarios": [e.to_dict() for e in self.scenarios],
        }

    def dumps(self) -> str:
        """The manifest as JSON text: header keys first, then one scenario per line."""
        data = self.to_dict()
        lines = ["{"]
        for key in ("format", "version", "profile", "impl", "tracediff", "traces"):
            lines.append(f" {json.dumps(key)}: {json.dumps(data[key])},")
        lines.append(' "scenarios": [')
        rows = [f"  {json.dumps(row)}" for row in data["scenarios"]]
        lines.append(",\n".join(rows))
        lines.append(" ]")
        lines.append("}")
        return "\n".join(line for line in lines if line) + "\n"

    def same_content(self, other: Manifest) -> bool:
        """Equal apart from the tracediff version that wrote it."""
        return (self.profile, self.impl, self.scenarios, self.traces) == (
            other.profile,
            other.impl,
            other.scenarios,
            other.traces,
        )


def parse_manifest(data: Any, path: str) -> Manifest:
    """A manifest from decoded JSON; TraceFormatError naming the file when it is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TraceFormatError(path, f'not a golden manifest (no "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise TraceFormatError(
            path,
            f"golden manifest version {data.get('version')!r}; this tracediff reads version "
            f"{VERSION} (regenerate it with tracediff golden update)",
        )
    try:
        entries = tuple(
            Entry(
                seed=_count(row["seed"], "seed", MAX_SEED),
                digest=_hex(row["digest"], "digest", (DIGEST_CHARS,)),
                plans=_count(row["plans"], "plans"),
                records=_count(row["records"], "records"),
                bytes=_count(row["bytes"], "bytes"),
                scenario=_hex(row.get("scenario", ""), "scenario", (0, SCENARIO_HASH_CHARS)),
            )
            for row in data["scenarios"]
        )
        manifest = Manifest(
            profile=str(data["profile"]),
            impl=str(data["impl"]),
            tracediff=str(data.get("tracediff", "")),
            scenarios=entries,
            traces=tuple(_count(s, "traces", MAX_SEED) for s in data.get("traces", ())),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        # a row that is no object, a count of inf or "x": the file's fault, named
        raise TraceFormatError(path, f"malformed golden manifest: {exc!r:.200}") from None
    if len({e.seed for e in entries}) != len(entries):
        raise TraceFormatError(path, "malformed golden manifest: a seed appears twice")
    return manifest


MAX_SEED = 2**53 - 1
DIGEST_CHARS = 64  # a sha256 in hex


def _count(value: Any, field: str, limit: int = 2**63 - 1) -> int:
    """A manifest's integer: an int (not a bool, a float or a string of digits), 0..limit;
    a malformed one is the file's fault (exit 2), never a mismatch."""
    if type(value) is not int or not 0 <= value <= limit:
        raise ValueError(f"{field} {str(value)[:40]!r} is not an integer from 0 to {limit}")
    return value


def _hex(value: Any, field: str, lengths: tuple[int, ...]) -> str:
    if not isinstance(value, str) or len(value) not in lengths or value.strip("0123456789abcdef"):
        raise ValueError(
            f"{field} {str(value)[:70]!r} is not {' or '.join(map(str, lengths))} hex digits"
        )
    return value


def read_manifest(path: str | Path) -> Manifest:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFormatError(name, "does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFormatError(name, f"cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(name, f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise TraceFormatError(name, f"not a golden manifest: {NESTING}") from None
    return parse_manifest(data, name)


def manifest_path(golden_dir: str | Path, profile: str) -> Path:
    return inside(golden_dir, f"{component(profile)}.json", what="golden manifest")


def trace_path(golden_dir: str | Path, profile: str, seed: int) -> Path:
    return inside(golden_dir, "traces", f"{component(profile, seed)}.trace", what="golden trace")


def _pending(path: Path) -> Path:
    return path.with_name(path.name + PENDING)


# -- digesting one implementation alone -------------------------------------------------------
@dataclass(frozen=True)
class Digested:
    """One scenario through one implementation: its digest and counts, or its failure."""

    seed: int
    status: str  # "ok", "error" or "timeout"
    digest: str
    plans: int
    records: int
    bytes: int
    seconds: float
    message: str = ""
    scenario: str = ""  # sha256 (16 hex) of the header payload

    def entry(self) -> Entry:
        return Entry(self.seed, self.digest, self.plans, self.records, self.bytes, self.scenario)


def digest_scenario(
    scenario: Scenario,
    spec: ImplSpec,
    timeout_s: float | None = None,
    expected: str | None = None,
) -> Digested:
    """Drive one implementation through a scenario and digest its compared body.

    The digest, plan and record counts equal ``run_scenario``'s ``ImplStats`` for it.
    With the ``expected`` digest (a golden manifest's), plan records skip the schema check:
    a body with that digest is the golden trace, whose records were checked when it was
    recorded. Anything else (another digest, a failure) is digested again with every plan
    checked, so a malformed record is reported as such.
    """
    if expected is not None:
        found = _digest(scenario, spec, timeout_s, check=False)
        if found.status == OK and found.digest == expected:
            return found
    return _digest(scenario, spec, timeout_s, check=True)


def _digest(scenario: Scenario, spec: ImplSpec, timeout_s: float | None, check: bool) -> Digested:
    digest = BodyDigest()
    plans = records = size = 0
    scenario_hash = ""
    started = time.perf_counter()
    status, message = OK, ""
    try:
        with time_limit(timeout_s):
            mine = private_copy(scenario)  # the implementation may change its copy
            driver = drive(private_copy(scenario), load(spec)(mine), check=check)
            for index, record in enumerate(driver):
                payload = encode(record)
                if index == 0:
                    digest.add_header(payload)
                    scenario_hash = hashlib.sha256(payload).hexdigest()[:SCENARIO_HASH_CHARS]
                else:
                    digest.add_record(payload)
                    if record.get("t") == "plan":
                        plans += 1
                records += 1
                size += len(payload)
    except ScenarioTimeout:
        status = "timeout"
        message = f"{spec.name} exceeded the {timeout_s:g} s scenario time limit at plan {plans}"
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - an implementation failing is a finding
        status = "error"
        message = (
            str(exc)
            if isinstance(exc, SchedulerFault)
            else ("".join(traceback.format_exception_only(exc)).strip() + f" (at plan {plans + 1})")
        )
    return Digested(
        seed=scenario.seed,
        status=status,
        digest=digest.hexdigest(),
        plans=plans,
        records=records,
        bytes=size,
        seconds=time.perf_counter() - started,
        message=message,
        scenario=scenario_hash,
    )


DigestWork = tuple[Scenario, ImplSpec, float | None, str | None]


def _digest_task(args: DigestWork, progress: Any, _notify: Any) -> Digested:
    try:
        return digest_scenario(*args)
    except KeyboardInterrupt as exc:
        if progress is None and passes_through(exc):
            raise  # in this process, a real Ctrl-C is the user's
        scenario, spec, _timeout, _expected = args
        return _failed_digest(scenario, "error", f"{spec.name} raised KeyboardInterrupt")


def _failed_digest(scenario: Scenario, status: str, message: str) -> Digested:
    return Digested(scenario.seed, status, "", 0, 0, 0, 0.0, message)


def _digested(outcome: Outcome, args: DigestWork) -> Digested:
    """A worker's outcome as a Digested: a killed or dead worker is a failed scenario."""
    if outcome.kind == DONE:
        result: Digested = outcome.value
        return result
    scenario, spec, timeout_s, _expected = args
    status = "timeout" if outcome.kind == KILLED else "error"
    return _failed_digest(scenario, status, f"{spec.name}: {outcome.failure(timeout_s)}")


def deadline(timeout_s: float | None, runs: int = 1) -> float | None:
    """When a worker still on one task of ``runs`` limited runs is killed."""
    return None if timeout_s is None else runs * timeout_s + grace(timeout_s)


def _executor_for(executor: Executor | None, jobs: int, tasks: int) -> Executor:
    if executor is not None:
        return executor
    return open_executor("local" if jobs > 1 else "inline", jobs=max(1, min(jobs, tasks)))


def digest_scenarios(
    scenarios: Sequence[Scenario],
    spec: ImplSpec,
    *,
    jobs: int = 1,
    timeout_s: float | None = None,
    on_result: Callable[[Digested], None] | None = None,
    executor: Executor | None = None,
    expected: Mapping[int, str] | None = None,
) -> list[Digested]:
    """Digest every scenario through ``spec`` on ``executor`` (else worker processes when
    ``jobs`` > 1, else this process); results in input order. ``expected`` (digests by
    seed) lets a scenario that reproduces its digest skip the schema check
    (:func:`digest_scenario`)."""
    known = expected or {}
    work: list[DigestWork] = [(s, spec, timeout_s, known.get(s.seed)) for s in scenarios]
    order = sorted(range(len(work)), key=lambda i: -len(scenarios[i].requests))
    chosen = _executor_for(executor, jobs, len(work))

    def report(outcome: Outcome) -> None:
        if on_result is not None:
            on_result(_digested(outcome, work[outcome.index]))

    try:
        outcomes = chosen.map(
            _digest_task, work, deadline_s=deadline(timeout_s), on_outcome=report, order=order
        )
    finally:
        if executor is None:
            chosen.close()
    return [_digested(o, w) for o, w in zip(outcomes, work, strict=True)]


# -- check ------------------------------------------------------------------------------------
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
            return (
                f"golden {self.profile}: {self.impl} matches all {self.checked:,} digests "
                f"({self.plans:,} plans, {self.seconds:.1f} s)"
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


def _profile_scenarios(profile_name: str) -> tuple[str, list[Scenario]]:
    from tracediff.scenario.generator import generate
    from tracediff.scenario.profiles import load_profile

    profile = load_profile(profile_name)
    if not profile.seeds:
        raise UsageError(f"profile {profile.name!r} names no seeds; golden needs its seed set")
    return profile.name, [generate(profile, seed) for seed in profile.seeds]


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
    name, scenarios = _profile_scenarios(profile_name)
    path = manifest_path(golden_dir, name)
    if not path.exists():
        return GoldenOutcome(
            profile=name,
            impl=spec.name,
            manifest=str(path),
            status=MISSING,
            message=f"{path} does not exist; run tracediff golden update --profile {name}, "
            "review and accept",
        )
    manifest = read_manifest(path)
    if manifest.profile != name:
        raise TraceFormatError(str(path), f"is the manifest of profile {manifest.profile!r}")
    expected = manifest.by_seed
    if seeds is not None:
        wanted = set(seeds)
        scenarios = [s for s in scenarios if s.seed in wanted]
        expected = {seed: entry for seed, entry in expected.items() if seed in wanted}
    compare_as = equivalence or Equivalence()
    within_ulps: list[tuple[int, int, int]] = []
    chosen = _executor_for(executor, jobs, len(scenarios))
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
    from tracediff.runner import IDENTICAL

    digests = [m for m in mismatches if m.kind == DIGEST]
    reference = parse_impl(manifest.impl)
    work = [(scenarios[m.seed], reference, spec, timeout_s, equivalence) for m in digests]
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


def _lockstep_task(args: tuple[Any, ...], progress: Any, _notify: Any) -> Any:
    from tracediff.runner import run_scenario

    scenario, reference, spec, timeout_s, equivalence = args
    return run_scenario(
        scenario, (reference, spec), timeout_s=timeout_s, progress=progress, equivalence=equivalence
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
) -> list[GoldenMismatch]:
    """Explain the first EXPLAIN_AT_MOST digest mismatches by re-running them on
    ``executor`` (``explain_fn`` must be a module-level function unless it is inline)."""
    out = list(mismatches)
    rerun: list[int] = []
    for position, mismatch in enumerate(mismatches):
        if mismatch.kind == NOT_IN_MANIFEST:
            out[position] = dataclasses.replace(
                mismatch,
                explanation="the manifest has no digest for this seed (the profile grew); "
                "run tracediff golden update",
            )
        elif mismatch.kind == NOT_IN_PROFILE:
            out[position] = dataclasses.replace(
                mismatch,
                explanation="the manifest has a seed the profile no longer runs; "
                "run tracediff golden update",
            )
        elif len(rerun) < EXPLAIN_AT_MOST:
            rerun.append(position)
        else:
            out[position] = dataclasses.replace(
                mismatch, explanation=f"not re-run (only the first {EXPLAIN_AT_MOST} are)"
            )
    work = [
        (
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


def _explain_task(args: tuple[Any, ...], progress: Any, _notify: Any) -> GoldenMismatch:
    # The lockstep re-run has the time limit; the parent's deadline covers the rest.
    mismatch: GoldenMismatch = args[0]
    try:
        return _explain(*args)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:
        if isinstance(exc, KeyboardInterrupt) and progress is None:
            raise  # in this process, Ctrl-C is the user's
        why = f"the re-run raised {type(exc).__name__}: {exc}"
    return dataclasses.replace(mismatch, explanation=f"could not explain: {why}")


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
    from tracediff.runner import IDENTICAL, run_scenario

    assert mismatch.expected is not None
    reference = parse_impl(manifest.impl)
    if reference.target == spec.target:
        return _explain_reference_change(mismatch, scenario, spec, manifest, golden_dir, artifacts)
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
    from tracediff.runner import DIVERGED
    from tracediff.shrink import default_signature

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


def _explain_reference_change(
    mismatch: GoldenMismatch,
    scenario: Scenario,
    spec: ImplSpec,
    manifest: Manifest,
    golden_dir: str | Path,
    artifacts: str | Path | None,
) -> GoldenMismatch:
    """The manifest's own implementation no longer matches: compare with the golden trace
    when this seed kept one, else say what changed in the counts."""
    from tracediff.runner import write_trace

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
    from tracediff.trace.schema import checked_records

    for checked in checked_records(reader):
        if checked.index == index:
            return checked.record
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


# -- update, review, accept, reject -----------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """What a pending manifest changes compared with the accepted one."""

    profile: str
    pending: str  # path of the pending manifest
    current: str | None  # path of the accepted manifest, None if there is none yet
    added: tuple[int, ...] = ()
    removed: tuple[int, ...] = ()
    changed: tuple[tuple[Entry, Entry], ...] = ()  # (accepted, pending)
    traces_added: tuple[int, ...] = ()
    traces_removed: tuple[int, ...] = ()
    traces_changed: tuple[int, ...] = ()
    header: tuple[str, ...] = ()  # header fields that differ, as "impl: a -> b"
    scenario_changed: tuple[int, ...] = ()  # changed seeds whose scenario itself changed

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.changed
            or self.traces_added
            or self.traces_removed
            or self.traces_changed
            or self.header
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "pending": self.pending,
            "current": self.current,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [
                {
                    "seed": new.seed,
                    "digest": [old.digest, new.digest],
                    "plans": [old.plans, new.plans],
                }
                for old, new in self.changed
            ],
            "traces_added": list(self.traces_added),
            "traces_removed": list(self.traces_removed),
            "traces_changed": list(self.traces_changed),
            "header": list(self.header),
            "scenario_changed": list(self.scenario_changed),
        }


@dataclass(frozen=True)
class UpdateOutcome:
    profile: str
    status: str  # "pending" (files written), "unchanged" or "failed"
    written: tuple[str, ...] = ()
    change: Change | None = None
    failures: tuple[Digested, ...] = ()
    seconds: float = 0.0
    scenarios: int = 0
    plans: int = 0


def pending_dir(golden_dir: str | Path, artifacts: str | Path | None = None) -> Path:
    """Where pending files live: the golden directory, or ``<artifacts>/golden`` in CI."""
    if in_ci():
        return artifacts_dir(None if artifacts is None else str(artifacts)) / "golden"
    return Path(golden_dir)


def choose_traces(
    entries: Sequence[Entry], scenarios: dict[int, Scenario], limit: int = TRACES_PER_PROFILE
) -> tuple[int, ...]:
    """A handful of small scenarios that keep a full trace: the smallest one per
    (allocation, graphs) cell, preferring scenarios with more than one request."""
    best: dict[tuple[str, bool], Entry] = {}
    for entry in entries:
        if entry.bytes > TRACE_MAX_BYTES:
            continue
        params = scenarios[entry.seed].params
        cell = (params.allocation, params.ragged)
        key = (len(scenarios[entry.seed].requests) < 2, entry.bytes, entry.seed)
        held = best.get(cell)
        if held is None or key < (
            len(scenarios[held.seed].requests) < 2,
            held.bytes,
            held.seed,
        ):
            best[cell] = entry
    chosen = sorted(best.values(), key=lambda e: (e.bytes, e.seed))[:limit]
    return tuple(sorted(e.seed for e in chosen))


def update(
    profile_name: str,
    *,
    golden_dir: str | Path = DEFAULT_DIR,
    impl: str = "reference",
    jobs: int = 1,
    artifacts: str | Path | None = None,
    on_result: Callable[[Digested], None] | None = None,
    executor: Executor | None = None,
) -> UpdateOutcome:
    """Run ``impl`` over the profile and write a pending manifest (and pending traces)
    when anything differs from the accepted one; never overwrites an accepted file.
    Scenarios run on ``executor`` (else worker processes when ``jobs`` > 1, else here)."""
    started = time.perf_counter()
    spec = parse_impl(impl)
    name, scenarios = _profile_scenarios(profile_name)
    chosen = _executor_for(executor, jobs, len(scenarios))
    try:
        return _update(name, scenarios, spec, golden_dir, artifacts, on_result, chosen, started)
    finally:
        if executor is None:
            chosen.close()


def _write_trace_task(args: tuple[Scenario, ImplSpec, str], _progress: Any, _notify: Any) -> str:
    from tracediff.runner import write_trace

    scenario, spec, path = args
    return write_trace(scenario, spec, str(Path(path).parent), path)


def _update(
    name: str,
    scenarios: list[Scenario],
    spec: ImplSpec,
    golden_dir: str | Path,
    artifacts: str | Path | None,
    on_result: Callable[[Digested], None] | None,
    executor: Executor,
    started: float,
) -> UpdateOutcome:
    results = digest_scenarios(scenarios, spec, on_result=on_result, executor=executor)
    failures = tuple(r for r in results if r.status != OK)
    plans = sum(r.plans for r in results)
    if failures:
        return UpdateOutcome(
            name,
            "failed",
            failures=failures,
            seconds=time.perf_counter() - started,
            scenarios=len(results),
            plans=plans,
        )
    by_seed = {s.seed: s for s in scenarios}
    entries = tuple(r.entry() for r in results)
    manifest = Manifest(
        profile=name,
        impl=spec.name,
        tracediff=__version__,
        scenarios=entries,
        traces=choose_traces(entries, by_seed),
    )
    current_path = manifest_path(golden_dir, name)
    current = read_manifest(current_path) if current_path.exists() else None
    stale_traces = [
        seed
        for seed in manifest.traces
        if not trace_path(golden_dir, name, seed).exists()
        or (current is not None and current.entry(seed) != manifest.entry(seed))
    ]
    if current is not None and current.same_content(manifest) and not stale_traces:
        return UpdateOutcome(
            name,
            "unchanged",
            seconds=time.perf_counter() - started,
            scenarios=len(results),
            plans=plans,
        )
    target = pending_dir(golden_dir, artifacts)
    if _pending(manifest_path(target, name)).exists():
        reject(name, golden_dir=golden_dir, artifacts=artifacts)  # replaced, not merged
    (target / "traces").mkdir(parents=True, exist_ok=True)
    from tracediff.atomic import write_text_atomic

    written = []
    pending_manifest = _pending(manifest_path(target, name))
    work = [
        (by_seed[seed], spec, str(_pending(trace_path(target, name, seed))))
        for seed in stale_traces
    ]
    for outcome, (_scenario, _spec, path) in zip(
        executor.map(_write_trace_task, work), work, strict=True
    ):
        if outcome.kind != DONE:
            raise SchedulerFault(f"{spec.name}: cannot write {path}: {outcome.failure()}")
        written.append(path)
    write_text_atomic(pending_manifest, manifest.dumps())
    written.insert(0, str(pending_manifest))
    change = review_one(name, golden_dir=golden_dir, artifacts=artifacts)
    return UpdateOutcome(
        name,
        "pending",
        written=tuple(written),
        change=change,
        seconds=time.perf_counter() - started,
        scenarios=len(results),
        plans=plans,
    )


def pending_profiles(golden_dir: str | Path, artifacts: str | Path | None = None) -> list[str]:
    directory = pending_dir(golden_dir, artifacts)
    if not directory.is_dir():
        return []
    return sorted(p.name[: -len(".json" + PENDING)] for p in directory.glob("*.json" + PENDING))


def review_one(
    profile: str, *, golden_dir: str | Path = DEFAULT_DIR, artifacts: str | Path | None = None
) -> Change:
    """What the pending manifest of ``profile`` changes; UsageError when none is pending."""
    pending_path = _pending(manifest_path(pending_dir(golden_dir, artifacts), profile))
    if not pending_path.exists():
        raise UsageError(
            f"no pending golden update for profile {profile!r} ({pending_path} does not exist); "
            f"run tracediff golden update --profile {profile}"
        )
    new = read_manifest(pending_path)
    current_path = manifest_path(golden_dir, profile)
    old = read_manifest(current_path) if current_path.exists() else None
    old_entries = old.by_seed if old else {}
    new_entries = new.by_seed
    changed = tuple(
        (old_entries[s], new_entries[s])
        for s in sorted(set(old_entries) & set(new_entries))
        if old_entries[s] != new_entries[s]
    )
    header = []
    if old is not None:
        for key in ("impl", "tracediff"):
            if getattr(old, key) != getattr(new, key):
                header.append(f"{key}: {getattr(old, key)} -> {getattr(new, key)}")
    old_traces = set(old.traces) if old else set()
    traces_dir = pending_path.parent
    pending_traces = {
        s for s in new.traces if _pending(trace_path(traces_dir, profile, s)).exists()
    }
    return Change(
        profile=profile,
        pending=str(pending_path),
        current=str(current_path) if old else None,
        added=tuple(sorted(set(new_entries) - set(old_entries))),
        removed=tuple(sorted(set(old_entries) - set(new_entries))),
        changed=changed,
        traces_added=tuple(sorted(set(new.traces) - old_traces)),
        traces_removed=tuple(sorted(old_traces - set(new.traces))),
        traces_changed=tuple(sorted((pending_traces & old_traces) & set(new.traces))),
        header=tuple(header),
        scenario_changed=tuple(
            old_entry.seed
            for old_entry, new_entry in changed
            if old_entry.scenario
            and new_entry.scenario
            and old_entry.scenario != new_entry.scenario
        ),
    )


def review(
    profile: str | None = None,
    *,
    golden_dir: str | Path = DEFAULT_DIR,
    artifacts: str | Path | None = None,
) -> list[Change]:
    """The pending changes of one profile, or of every profile with a pending manifest."""
    names = [profile] if profile else pending_profiles(golden_dir, artifacts)
    return [review_one(n, golden_dir=golden_dir, artifacts=artifacts) for n in names]


@dataclass(frozen=True)
class Resolution:
    profile: str
    moved: tuple[str, ...] = ()  # accepted files now in place
    removed: tuple[str, ...] = ()  # files deleted (rejected pending files, dropped traces)


def accept(
    profile: str | None = None,
    *,
    golden_dir: str | Path = DEFAULT_DIR,
) -> list[Resolution]:
    """Move pending files into place; traces the new manifest no longer lists are removed."""
    if in_ci():
        raise UsageError(
            "refusing to accept golden files with CI=true (nothing under the golden directory "
            "is written in CI); download the pending files from the artifacts and accept locally"
        )
    names = [profile] if profile else pending_profiles(golden_dir)
    if not names:
        raise UsageError(f"no pending golden updates in {golden_dir}; run tracediff golden update")
    out = []
    for name in names:
        pending_manifest = _pending(manifest_path(golden_dir, name))
        if not pending_manifest.exists():
            raise UsageError(f"no pending golden update for profile {name!r} in {golden_dir}")
        new = read_manifest(pending_manifest)
        target = manifest_path(golden_dir, name)
        old = read_manifest(target) if target.exists() else None
        moved, removed = [], []
        for seed in new.traces:
            pending_trace = _pending(trace_path(golden_dir, name, seed))
            if pending_trace.exists():
                os.replace(pending_trace, trace_path(golden_dir, name, seed))
                moved.append(str(trace_path(golden_dir, name, seed)))
        missing = [s for s in new.traces if not trace_path(golden_dir, name, s).exists()]
        if missing:
            raise UsageError(
                f"pending manifest {pending_manifest} lists traces of seeds {missing} that "
                "neither exist nor are pending; run tracediff golden update again"
            )
        os.replace(pending_manifest, target)
        moved.insert(0, str(target))
        for seed in sorted(set(old.traces if old else ()) - set(new.traces)):
            with contextlib.suppress(FileNotFoundError):
                trace_path(golden_dir, name, seed).unlink()
                removed.append(str(trace_path(golden_dir, name, seed)))
        out.append(Resolution(name, tuple(moved), tuple(removed)))
    return out


def reject(
    profile: str | None = None,
    *,
    golden_dir: str | Path = DEFAULT_DIR,
    artifacts: str | Path | None = None,
) -> list[Resolution]:
    """Delete pending files (a pending manifest and its pending traces)."""
    directory = pending_dir(golden_dir, artifacts)
    names = [profile] if profile else pending_profiles(golden_dir, artifacts)
    if not names:
        raise UsageError(f"no pending golden updates in {directory}")
    out = []
    for name in names:
        pending_manifest = _pending(manifest_path(directory, name))
        if not pending_manifest.exists():
            raise UsageError(f"no pending golden update for profile {name!r} in {directory}")
        removed = []
        new = read_manifest(pending_manifest)
        for seed in new.traces:
            path = _pending(trace_path(directory, name, seed))
            if path.exists():
                path.unlink()
                removed.append(str(path))
        pending_manifest.unlink()
        removed.insert(0, str(pending_manifest))
        out.append(Resolution(name, (), tuple(removed)))
    return out
