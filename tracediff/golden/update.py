"""``golden update``, ``review``, ``accept``, ``reject``: pending files, reviewed first."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracediff import __version__
from tracediff import model as models
from tracediff.errors import OutputError, SchedulerFault, UsageError
from tracediff.executor import (
    DONE,
    Executor,
    Notify,
)
from tracediff.golden.check import profile_scenarios
from tracediff.golden.digest import Digested, digest_scenarios, executor_for
from tracediff.golden.manifest import (
    DEFAULT_DIR,
    OK,
    PENDING,
    TRACE_MAX_BYTES,
    TRACES_PER_PROFILE,
    Entry,
    Manifest,
    manifest_path,
    pending_file,
    read_manifest,
    trace_path,
)
from tracediff.model import Scenario
from tracediff.project import artifacts_dir, in_ci
from tracediff.project.impls import ImplSpec, parse_impl


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
    # seed -> the first difference of its accepted and pending traces, where both are kept
    first_differences: tuple[tuple[int, str], ...] = ()

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
            "first_differences": {str(seed): text for seed, text in self.first_differences},
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
        scenario = scenarios[entry.seed]
        model = models.of(scenario)
        cell = model.cell(scenario)
        key = (model.size(scenario) < 2, entry.bytes, entry.seed)
        held = best.get(cell)
        if held is None or key < (
            models.of(scenarios[held.seed]).size(scenarios[held.seed]) < 2,
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
    name, scenarios = profile_scenarios(profile_name)
    chosen = executor_for(executor, jobs, len(scenarios))
    try:
        return _update(name, scenarios, spec, golden_dir, artifacts, on_result, chosen, started)
    finally:
        if executor is None:
            chosen.close()


@dataclass(frozen=True)
class TraceWork:
    """One golden trace for :func:`_write_trace_task` to write on an executor's worker:
    ``scenario`` recorded through ``spec`` into the file ``path``."""

    scenario: Scenario
    spec: ImplSpec
    path: str


def _write_trace_task(work: TraceWork, _progress: Any, _notify: Notify) -> str | OutputError:
    """The trace's path, or the OutputError of a file that could not be written (a full
    disk: the file's fault, not the implementation's, so handed back as a value)."""
    from tracediff.running.runner import write_trace

    try:
        return write_trace(work.scenario, work.spec, str(Path(work.path).parent), work.path)
    except OutputError as exc:
        return exc


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
    if pending_file(manifest_path(target, name)).exists():
        reject(name, golden_dir=golden_dir, artifacts=artifacts)  # replaced, not merged
    (target / "traces").mkdir(parents=True, exist_ok=True)
    from tracediff.atomic import write_text_atomic

    written = []
    pending_manifest = pending_file(manifest_path(target, name))
    work = [
        TraceWork(by_seed[seed], spec, str(pending_file(trace_path(target, name, seed))))
        for seed in stale_traces
    ]
    try:
        for outcome, trace in zip(executor.map(_write_trace_task, work), work, strict=True):
            if outcome.kind != DONE:
                raise SchedulerFault(f"{spec.name}: cannot write {trace.path}: {outcome.failure()}")
            if isinstance(outcome.value, OutputError):
                raise outcome.value
            written.append(trace.path)
        write_text_atomic(pending_manifest, manifest.dumps())
    except OutputError as exc:
        # a full disk is the file's fault, not the implementation's: exit 2 naming it, and
        # no half of an update left pending
        for path in written:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise OutputError(
            f"{exc}; nothing was made pending and the accepted golden files are as they were: "
            "free space and run golden update again"
        ) from None
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


def _update_hint(name: str) -> str:
    """What to run to update manifest ``name``: the command, when ``name`` is a profile
    that loads; else (a ``--workload`` profile's name, ``quick+traffic-1a2b3c4d``, which
    names no file) what to give ``golden update``, never a command that would be refused."""
    from tracediff.errors import TracediffError
    from tracediff.golden.check import update_command
    from tracediff.project import current_model
    from tracediff.project.profiles import load_profile

    try:
        load_profile(current_model(), name)
    except TracediffError:
        return (
            "run tracediff golden update with the --profile and --workload FILE whose "
            f"profile is named {name}"
        )
    return f"run {update_command(name)}"


def review_one(
    profile: str, *, golden_dir: str | Path = DEFAULT_DIR, artifacts: str | Path | None = None
) -> Change:
    """What the pending manifest of ``profile`` changes; UsageError when none is pending."""
    pending_path = pending_file(manifest_path(pending_dir(golden_dir, artifacts), profile))
    if not pending_path.exists():
        raise UsageError(
            f"no pending golden update for profile {profile!r} ({pending_path} does not exist); "
            f"{_update_hint(profile)}"
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
        s for s in new.traces if pending_file(trace_path(traces_dir, profile, s)).exists()
    }
    first = tuple(
        (seed, _first_difference(trace_path(golden_dir, profile, seed), pending_trace))
        for seed in sorted((pending_traces & old_traces) & set(new.traces))
        if (pending_trace := pending_file(trace_path(traces_dir, profile, seed))).exists()
        and trace_path(golden_dir, profile, seed).exists()
    )
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
        first_differences=first,
    )


def _first_difference(accepted: Path, pending: Path) -> str:
    """One line: where the accepted and the pending trace of a seed first differ."""
    from tracediff.errors import TracediffError
    from tracediff.running.explain import explain_traces

    try:
        report = explain_traces(str(accepted), str(pending), context=0)
    except TracediffError as exc:
        return f"cannot compare the traces: {exc}"
    found = [o.divergence for o in report.outcomes if o.divergence is not None]
    if not found:
        return "the traces are identical"
    d = found[0]
    return f"{d.signature} at {d.location}"


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
    seeds: Sequence[int] = (),
) -> list[Resolution]:
    """Move pending files into place; traces the new manifest no longer lists are removed.
    ``seeds``: accept only those seeds' entries (and traces) of one profile's pending
    update, as snapshot tools accept one snapshot; the rest stays pending."""
    if seeds:
        if profile is None:
            pending = pending_profiles(golden_dir)
            if len(pending) != 1:
                raise UsageError(
                    "--seed accepts seeds of one profile; name it with --profile "
                    f"(pending: {', '.join(pending) or 'none'})"
                )
            profile = pending[0]
        return [_accept_seeds(profile, golden_dir, seeds)]
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
        pending_manifest = pending_file(manifest_path(golden_dir, name))
        if not pending_manifest.exists():
            raise UsageError(f"no pending golden update for profile {name!r} in {golden_dir}")
        new = read_manifest(pending_manifest)
        target = manifest_path(golden_dir, name)
        old = read_manifest(target) if target.exists() else None
        moved, removed = [], []
        for seed in new.traces:
            pending_trace = pending_file(trace_path(golden_dir, name, seed))
            if pending_trace.exists():
                os.replace(pending_trace, trace_path(golden_dir, name, seed))
                moved.append(str(trace_path(golden_dir, name, seed)))
        missing = [s for s in new.traces if not trace_path(golden_dir, name, s).exists()]
        if missing:
            raise UsageError(
                f"pending manifest {pending_manifest} lists traces of seeds {missing} that "
                f"neither exist nor are pending; {_update_hint(name)} again"
            )
        os.replace(pending_manifest, target)
        moved.insert(0, str(target))
        for seed in sorted(set(old.traces if old else ()) - set(new.traces)):
            with contextlib.suppress(FileNotFoundError):
                trace_path(golden_dir, name, seed).unlink()
                removed.append(str(trace_path(golden_dir, name, seed)))
        out.append(Resolution(name, tuple(moved), tuple(removed)))
    return out


def _accept_seeds(profile: str, golden_dir: str | Path, seeds: Sequence[int]) -> Resolution:
    from tracediff.atomic import write_text_atomic

    if in_ci():
        raise UsageError("refusing to accept golden files with CI=true; accept them locally")
    pending_manifest = pending_file(manifest_path(golden_dir, profile))
    if not pending_manifest.exists():
        raise UsageError(f"no pending golden update for profile {profile!r} in {golden_dir}")
    new = read_manifest(pending_manifest)
    target = manifest_path(golden_dir, profile)
    old = read_manifest(target) if target.exists() else None
    old_entries = old.by_seed if old else {}
    wanted = set(seeds)
    unknown = sorted(wanted - set(new.by_seed) - set(old_entries))
    if unknown:
        raise UsageError(
            f"seed {unknown[0]} is in neither the accepted nor the pending golden manifest of "
            f"{profile!r}; see tracediff golden review --profile {profile}"
        )
    entries = {**old_entries}
    for seed in wanted:
        if seed in new.by_seed:
            entries[seed] = new.by_seed[seed]
        else:
            entries.pop(seed, None)
    old_traces = set(old.traces) if old else set()
    traces = (old_traces - wanted) | (wanted & set(new.traces))
    moved, removed = [], []
    for seed in sorted(wanted):
        pending_trace = pending_file(trace_path(golden_dir, profile, seed))
        if seed in new.traces and pending_trace.exists():
            os.replace(pending_trace, trace_path(golden_dir, profile, seed))
            moved.append(str(trace_path(golden_dir, profile, seed)))
        elif seed not in traces and seed in old_traces:
            with contextlib.suppress(FileNotFoundError):
                trace_path(golden_dir, profile, seed).unlink()
                removed.append(str(trace_path(golden_dir, profile, seed)))
    base = old or new
    merged = Manifest(
        profile=base.profile,
        impl=base.impl,
        tracediff=base.tracediff,
        scenarios=tuple(entries[s] for s in sorted(entries)),
        traces=tuple(sorted(traces)),
    )
    write_text_atomic(str(target), merged.dumps())
    moved.insert(0, str(target))
    if merged.same_content(new):  # nothing left pending
        pending_manifest.unlink()
        removed.append(str(pending_manifest))
    return Resolution(profile, tuple(moved), tuple(removed))


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
        pending_manifest = pending_file(manifest_path(directory, name))
        if not pending_manifest.exists():
            raise UsageError(f"no pending golden update for profile {name!r} in {directory}")
        removed = []
        new = read_manifest(pending_manifest)
        for seed in new.traces:
            path = pending_file(trace_path(directory, name, seed))
            if path.exists():
                path.unlink()
                removed.append(str(path))
        pending_manifest.unlink()
        removed.insert(0, str(pending_manifest))
        out.append(Resolution(name, (), tuple(removed)))
    return out
