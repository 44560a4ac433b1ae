"""``tracediff golden``: check, update, review, accept, reject."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    emit_json,
    main,
    resolve_equivalence,
    resolve_executor,
    resolve_impls,
    resolve_jobs,
)
from tracediff.cli.output import MAX_LISTED, progress_bar, text_console
from tracediff.cli.params import (
    equivalence_options,
    executor_option,
    impl_option,
    json_file_option,
    json_to_option,
    profile_option,
    seeds_option,
    timeout_option,
    workload_option,
)
from tracediff.errors import UsageError
from tracediff.report.describe import plural


def _profile_size(profile_name: str) -> int:
    from tracediff.project import current_model
    from tracediff.project.profiles import load_profile

    return len(load_profile(current_model(), profile_name).seeds)


golden_dir_option = click.option(
    "--golden-dir",
    default=None,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Directory of the golden manifests and traces (default: the configured one, else "
    "./golden at the project's root; check and gate fall back to the built-in digests only "
    "while it holds none).",
)


def _golden_dir(given: str | None) -> str:
    """The project's golden directory, where update writes and accept/reject/review look
    (the same place check and gate read first)."""
    from tracediff.cli import settings

    return str(settings.write_dir(given, "golden"))


artifacts_option = click.option(
    "--artifacts",
    default=None,
    help="Artifacts directory: pending files in CI, traces of mismatches (default: "
    "$TRACEDIFF_ARTIFACTS, the configured directory, else artifacts/ at the project's root).",
)


def _artifacts(given: str | None) -> str:
    from tracediff.cli import settings

    return settings.artifacts(given)


PENDING_PROFILES = "Default: every pending profile."


@main.group()
def golden() -> None:
    """Golden digests of the reference: check, update, review, accept, reject."""


@golden.command("check")
@profile_option()
@workload_option
@seeds_option("Check only these seeds of the profile: 0..71, 3,7.")
@impl_option(
    "The implementation to check (run alone) against the manifest; repeat to check "
    "several. Default: the configured candidates ([tool.tracediff] impls after the "
    "baseline), else reference."
)
@click.option("--check", "check_mode", is_flag=True, help="Check mode for optimized.")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all).")
@timeout_option("Per-scenario limit (s).")
@golden_dir_option
@artifacts_option
@json_file_option("Also write the outcome as JSON to this file.")
@executor_option
@equivalence_options
@click.option("--no-progress", is_flag=True, help="No progress bar (also off when not a TTY).")
def check_command(
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    impls: tuple[str, ...],
    check_mode: bool,
    jobs: int | None,
    timeout_s: float | None,
    golden_dir: str,
    artifacts: str | None,
    json_path: str | None,
    executor_text: str,
    equivalence: str,
    ulps: int | None,
    no_progress: bool,
) -> None:
    """Run one implementation alone and compare its digests with the profile's manifest.

    Exit 0 when every digest matches, 1 on a mismatch (each explained by a re-run against
    the reference), 2 when there is no manifest or on bad input.
    """
    from tracediff.cli import settings
    from tracediff.executor import open_executor
    from tracediff.golden import MISSING, check

    compare_as = resolve_equivalence(equivalence, ulps)
    chosen_impls, why = settings.candidates(impls)
    specs = resolve_impls(chosen_impls, check_mode, ("reference",))
    profile_name = settings.profile(profile_name)
    chosen = seeds
    size = len(chosen) if chosen is not None else _profile_size(profile_name)
    executor_spec = resolve_executor(executor_text)
    source = settings.golden_source(golden_dir)
    if source.path is None:
        raise UsageError(f"golden check: no golden manifests: {source.label}")
    console = text_console()
    outcomes = []
    with open_executor(executor_spec, jobs=resolve_jobs(jobs)) as executor:
        for spec in specs:
            with progress_bar(not no_progress, size, "golden check") as advance:
                outcome = check(
                    profile_name,
                    spec,
                    golden_dir=str(source.path),
                    timeout_s=settings.timeout(timeout_s),
                    artifacts=settings.artifacts(artifacts),
                    on_result=advance,
                    seeds=chosen,
                    executor=executor,
                    equivalence=compare_as,
                )
            if outcome.status == MISSING:
                raise UsageError(
                    f"golden check: no manifest for profile {outcome.profile} in "
                    f"{source.label}: {outcome.message}"
                )
            outcomes.append((spec, outcome))
    if json_path:
        from tracediff.atomic import write_text_atomic

        documents = [outcome.to_dict() for _spec, outcome in outcomes]
        write_text_atomic(
            json_path,
            json.dumps(documents[0] if len(documents) == 1 else documents, indent=1) + "\n",
        )
    failed = False
    for spec, outcome in outcomes:
        console.print(f"golden check: {spec.name} ({why}) against {source.label}", markup=False)
        failed |= not _print_check(console, spec, outcome)
    sys.exit(EXIT_FINDING if failed else EXIT_OK)


def _print_check(console: Console, spec: Any, outcome: Any) -> bool:
    """One implementation's golden check, as a line (ok) or a table of mismatches."""
    if outcome.ok:
        style = "bold yellow" if outcome.within_ulps else "bold green"
        console.print(outcome.summary(), style=style)
        return True
    table = Table(title=outcome.summary(), header_style="bold")
    for column in ("seed", "kind", "plans (golden → now)", "explanation"):
        table.add_column(column)
    for m in outcome.mismatches[:MAX_LISTED]:
        plans = f"{m.expected.plans if m.expected else '-'} → {m.actual.plans if m.actual else '-'}"
        table.add_row(str(m.seed), m.kind, plans, m.explanation)
    if len(outcome.mismatches) > MAX_LISTED:
        table.caption = f"... and {len(outcome.mismatches) - MAX_LISTED} more"
    console.print(table)
    if outcome.artifacts:
        folders = sorted({str(Path(a).parent) for a in outcome.artifacts})
        console.print(
            f"kept {plural(len(outcome.artifacts), 'file')} in {', '.join(folders)}", markup=False
        )
    console.print(
        f"MISMATCH: {spec.name} differs from {outcome.manifest} on "
        f"{plural(len(outcome.mismatches), 'scenario')}",
        style="bold red",
    )
    return False


@golden.command("update")
@profile_option()
@workload_option
@impl_option(
    "Whose digests the manifest holds. Default: the configured candidate "
    "([tool.tracediff] impls after the baseline; the first when there are several), else "
    "reference.",
    multiple=False,
)
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all).")
@golden_dir_option
@artifacts_option
@executor_option
@click.option("--no-progress", is_flag=True, help="No progress bar (also off when not a TTY).")
def update_command(
    profile_name: str | None,
    impl: str | None,
    jobs: int | None,
    golden_dir: str | None,
    artifacts: str | None,
    executor_text: str,
    no_progress: bool,
) -> None:
    """Write pending golden files (<profile>.json.new, traces/*.trace.new) when anything
    changed; accepted files are never overwritten (review, then accept or reject)."""
    from tracediff.cli import settings
    from tracediff.executor import open_executor
    from tracediff.golden import in_ci, update

    profile_name = settings.profile(profile_name)
    golden_dir = _golden_dir(golden_dir)
    executor_spec = resolve_executor(executor_text)
    chosen_impls, why = settings.candidates((impl,) if impl is not None else ())
    impl = chosen_impls[0]
    resolve_impls((impl,), False, ("reference",))  # fail fast on an unknown one
    with (
        progress_bar(not no_progress, _profile_size(profile_name), "golden update") as advance,
        open_executor(executor_spec, jobs=resolve_jobs(jobs)) as executor,
    ):
        outcome = update(
            profile_name,
            golden_dir=golden_dir,
            impl=impl,
            artifacts=_artifacts(artifacts),
            on_result=advance,
            executor=executor,
        )
    console = text_console()
    console.print(f"golden update: {impl} ({why}) into {golden_dir}", markup=False)
    if outcome.status == "failed":
        for failure in outcome.failures[:MAX_LISTED]:
            console.print(
                f"  seed {failure.seed}: {failure.status}: {failure.message}", markup=False
            )
        console.print(
            f"golden update failed: {impl} failed on "
            f"{plural(len(outcome.failures), 'scenario')} of "
            f"{outcome.profile}; nothing written",
            style="bold red",
        )
        sys.exit(EXIT_FINDING)
    if outcome.status == "unchanged":
        console.print(
            f"golden {outcome.profile}: up to date ({outcome.scenarios:,} scenarios, "
            f"{outcome.plans:,} plans, {outcome.seconds:.1f} s); nothing written",
            style="bold green",
        )
        sys.exit(EXIT_OK)
    for path in outcome.written:
        console.print(f"wrote {path}", markup=False)
    if outcome.change is not None:
        console.print(_change_renderable(outcome.change))
    where = " (CI=true: in the artifacts directory)" if in_ci() else ""
    console.print(
        f"pending{where}: review with `tracediff golden review --profile {outcome.profile}`, "
        f"then accept or reject",
        markup=False,
    )
    sys.exit(EXIT_OK)


def _change_renderable(change: Any) -> Any:
    table = Table(title=f"golden {change.profile}: pending changes", header_style="bold")
    table.add_column("what")
    table.add_column("seeds")
    if change.current is None:
        table.add_row("new manifest", plural(len(change.added), "seed"))
    else:
        table.add_row("added", _seeds(change.added))
        table.add_row("removed", _seeds(change.removed))
        table.add_row(
            "digest changed",
            _seeds(tuple(new.seed for _old, new in change.changed)),
        )
        if change.scenario_changed:
            table.add_row("of which the scenario changed", _seeds(change.scenario_changed))
    table.add_row("traces added", _seeds(change.traces_added))
    table.add_row("traces removed", _seeds(change.traces_removed))
    table.add_row("traces changed", _seeds(change.traces_changed))
    for line in change.header:
        table.add_row("header", line)
    if change.changed:
        detail = Table(title="changed digests", header_style="bold")
        first = dict(change.first_differences)
        for column in ("seed", "plans", "records", "digest", "first difference"):
            detail.add_column(column, overflow="fold")
        for old, new in change.changed[:MAX_LISTED]:
            detail.add_row(
                str(new.seed),
                f"{old.plans} → {new.plans}",
                f"{old.records} → {new.records}",
                f"{old.digest[:12]} → {new.digest[:12]}",
                Text(first.get(new.seed, "- (no trace kept of this seed)")),
            )
        if len(change.changed) > MAX_LISTED:
            detail.caption = f"... and {len(change.changed) - MAX_LISTED} more"
        return Group(table, detail)
    return table


def _seeds(seeds: tuple[int, ...]) -> str:
    if not seeds:
        return "-"
    shown = ", ".join(str(s) for s in seeds[:30])
    return f"{len(seeds)}: {shown}" + (" ..." if len(seeds) > 30 else "")


@golden.command("review")
@profile_option(PENDING_PROFILES)
@golden_dir_option
@artifacts_option
@json_to_option("The changes")
def review_command(
    profile_name: str | None, golden_dir: str | None, artifacts: str | None, json_path: str | None
) -> None:
    """Show what the pending golden files change: seeds added, removed, digests changed."""
    golden_dir = _golden_dir(golden_dir)
    from tracediff.golden import review

    changes = review(profile_name, golden_dir=golden_dir, artifacts=_artifacts(artifacts))
    if json_path is not None:
        emit_json(json_path, json.dumps([c.to_dict() for c in changes], indent=1))
        return
    console = text_console()
    if not changes:
        console.print(f"no pending golden updates in {golden_dir}", markup=False)
        return
    for change in changes:
        console.print(_change_renderable(change))
        if change.empty:
            console.print("  (no change in content)")


@golden.command("accept")
@profile_option(PENDING_PROFILES)
@golden_dir_option
@click.option(
    "--seed",
    "seeds",
    type=int,
    multiple=True,
    help="Accept only this seed's change (repeat); the rest stays pending (golden review).",
)
def accept_command(
    profile_name: str | None, golden_dir: str | None, seeds: tuple[int, ...]
) -> None:
    """Move the pending golden files into place (refused with CI=true)."""
    golden_dir = _golden_dir(golden_dir)
    from tracediff.golden import accept

    for resolution in accept(profile_name, golden_dir=golden_dir, seeds=seeds):
        text_console().print(
            f"accepted golden {resolution.profile}: "
            f"{plural(len(resolution.moved), 'file')} in place"
            + (f", {len(resolution.removed)} old traces removed" if resolution.removed else ""),
            markup=False,
        )


@golden.command("reject")
@profile_option(PENDING_PROFILES)
@golden_dir_option
@artifacts_option
def reject_command(profile_name: str | None, golden_dir: str | None, artifacts: str | None) -> None:
    """Delete the pending golden files."""
    golden_dir = _golden_dir(golden_dir)
    from tracediff.golden import reject

    for resolution in reject(profile_name, golden_dir=golden_dir, artifacts=_artifacts(artifacts)):
        text_console().print(
            f"rejected golden {resolution.profile}: {len(resolution.removed)} pending files "
            "removed",
            markup=False,
        )
