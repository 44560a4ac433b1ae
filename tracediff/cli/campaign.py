"""``tracediff campaign``: a seed range on an executor, results in a resumable store;
``tracediff campaign report DIR`` renders a campaign's summary and findings again."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    check_context,
    exit_interrupted,
    main,
    make_console,
    resolve_executor,
    resolve_impls,
    resolve_jobs,
)
from tracediff.cli.params import (
    executor_option,
    impl_option,
    json_file_option,
    profile_option,
    seeds_option,
    timeout_option,
    workload_option,
)
from tracediff.compare.model import DEFAULT_CONTEXT
from tracediff.errors import UsageError
from tracediff.project import current_model
from tracediff.project.seeds import MAX_CAMPAIGN_SEEDS

REPORT_NAME = "report.json"


@main.group(invoke_without_command=True)
@profile_option()
@workload_option
@seeds_option("Seed range: 0..999999 (default: the profile's).", limit=MAX_CAMPAIGN_SEEDS)
@impl_option("Implementation (repeat; default: the configured impls, else reference, "
             "optimized).")  # fmt: skip
@click.option("--check", is_flag=True, help="Run optimized in check mode.")
@click.option("-j", "--jobs", type=int, default=None, help="Local worker processes.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="The campaign directory: its store, report.json. Rerun to resume.")  # fmt: skip
@timeout_option("Per-scenario limit (s; default: the configured one, else none).")
@click.option("--memory-limit", "memory_limit_mb", type=int, default=None, metavar="MB",
              help="Address-space limit of each worker process.")  # fmt: skip
@click.option("--max-failures", type=int, default=None, metavar="N",
              help="Stop once the campaign holds N findings.")  # fmt: skip
@click.option("--context", type=int, default=DEFAULT_CONTEXT, show_default=True,
              help="Records of context kept per explained finding.")  # fmt: skip
@click.option("--coverage", "coverage_mode", is_flag=True,
              help="A coverage campaign: feature counts of one implementation (default the "
              "reference) over the range, as tracediff coverage, in the store.")  # fmt: skip
@executor_option
@click.option("--no-progress", is_flag=True, help="No live progress line.")
@click.pass_context
def campaign(
    ctx: click.Context,
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    impls: tuple[str, ...],
    check: bool,
    jobs: int | None,
    out: str | None,
    timeout_s: float | None,
    memory_limit_mb: int | None,
    max_failures: int | None,
    context: int,
    coverage_mode: bool,
    executor_text: str,
    no_progress: bool,
) -> None:
    """Run a seed range (millions if need be) on an executor into a resumable store.

    Results stream into DIR/campaign.sqlite as they arrive; findings are explained where
    they are found and grouped by signature live. Rerun the same command to resume; seeds
    already in the store are skipped. Exit 0 all identical and all run, 1 findings,
    2 bad input; 130/143 when stopped by Ctrl-C/SIGTERM (resumable).
    """
    if ctx.invoked_subcommand is not None:
        return
    from tracediff.campaign.run import CampaignOptions, run_campaign
    from tracediff.cli import settings
    from tracediff.cli.run import check_flags
    from tracediff.executor import open_executor

    if out is not None and not out.strip():
        raise UsageError("--out: the path is empty; give a directory")
    if out is None:
        raise UsageError("campaign needs --out DIR (the campaign's store; rerun to resume)")
    if max_failures is not None and max_failures < 1:
        raise UsageError(f"--max-failures must be at least 1, got {max_failures}")
    check_context(context)
    profile_name = settings.profile(profile_name)
    timeout_s = settings.timeout(timeout_s)
    check_flags(impls, check, timeout_s, memory_limit_mb)
    if coverage_mode:
        _coverage_campaign(
            profile_name, seeds, impls, check, jobs, out, timeout_s, executor_text, no_progress
        )
    specs = resolve_impls(impls, check, ("reference", "optimized"))
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare (or none)")
    spec = resolve_executor(executor_text)
    from tracediff.project.profiles import load_profile

    profile = load_profile(current_model(), profile_name)
    chosen = seeds if seeds is not None else profile.seeds
    if not chosen:
        raise UsageError(f"profile {profile.name!r} names no seeds; pass --seeds")
    options = CampaignOptions(
        profile=profile,
        seeds=chosen,
        impls=specs,
        out=out,
        timeout_s=timeout_s,
        memory_limit_mb=memory_limit_mb,
        max_failures=max_failures,
        context=context,
    )
    with open_executor(spec, jobs=resolve_jobs(jobs), memory_limit_mb=memory_limit_mb) as executor:
        with _Live(not no_progress, len(chosen)) as on_row:
            result = run_campaign(options, executor, on_row)
    _render(out, result.impls, result.wall_seconds, result.remaining, result.stopped)
    if result.stopped in ("SIGINT", "SIGTERM"):
        import signal

        sys.exit(exit_interrupted(getattr(signal, result.stopped)))
    sys.exit(EXIT_OK if result.ok else EXIT_FINDING)


@campaign.command("report")
@click.argument("directory", type=click.Path(file_okay=False))
@json_file_option("Also write the findings as a JSON report (tracediff diff --load reads it).")
def report_command(directory: str, json_path: str | None) -> None:
    """Render a campaign's summary, signatures, throughput and findings again.

    Exit 0 when it holds no findings, 1 when it does."""
    from tracediff.campaign.store import CampaignStore

    with CampaignStore.open(directory) as store:
        identity = store.identity
    if identity.get("mode") == "coverage":
        ok = _render_coverage(directory, str(identity["profile"]), str(identity["impl"]), 0.0)
        if json_path:
            raise UsageError("--json is for comparison campaigns; this one is a coverage one")
        sys.exit(EXIT_OK if ok else EXIT_FINDING)
    with CampaignStore.open(directory) as store:
        impls = tuple(str(name) for name, _target in store.identity["impls"])
        findings = store.totals().findings
    report = _render(directory, impls, 0.0, 0, None)
    if json_path:
        from tracediff.atomic import write_text_atomic
        from tracediff.compare import json_report

        write_text_atomic(json_path, json_report.dumps(report))
    sys.exit(EXIT_FINDING if findings else EXIT_OK)


def _coverage_campaign(
    profile_name: str,
    seeds: tuple[int, ...] | None,
    impls: tuple[str, ...],
    check: bool,
    jobs: int | None,
    out: str,
    timeout_s: float | None,
    executor_text: str,
    no_progress: bool,
) -> None:
    """``campaign --coverage``: see :mod:`tracediff.campaign.coverage`. Exits."""
    from tracediff.campaign.coverage import CoverageCampaignOptions, run_coverage_campaign
    from tracediff.executor import open_executor

    (spec,) = resolve_impls(impls[:1], check, ("reference",))
    if len(impls) > 1:
        raise UsageError("campaign --coverage measures one implementation: give one --impl")
    executor_spec = resolve_executor(executor_text)
    from tracediff.project.profiles import load_profile

    profile = load_profile(current_model(), profile_name)
    chosen = seeds if seeds is not None else profile.seeds
    if not chosen:
        raise UsageError(f"profile {profile.name!r} names no seeds; pass --seeds")
    options = CoverageCampaignOptions(profile, chosen, spec.name, out, timeout_s)
    with open_executor(executor_spec, jobs=resolve_jobs(jobs)) as executor:
        result = run_coverage_campaign(options, executor)
    ok = _render_coverage(out, profile.name, spec.name, result.report.wall_seconds)
    if result.stopped in ("SIGINT", "SIGTERM"):
        import signal

        sys.exit(exit_interrupted(getattr(signal, result.stopped)))
    sys.exit(EXIT_OK if ok and result.remaining == 0 else EXIT_FINDING)


def _render_coverage(directory: str, profile: str, impl: str, wall: float) -> bool:
    """Print a coverage campaign's report from its store; whether it is complete and whole."""
    import dataclasses

    from tracediff.campaign.coverage import coverage_report, open_store
    from tracediff.report.campaign import workers_renderable
    from tracediff.report.coverage import coverage_renderable

    with open_store(directory) as store:
        report, workers = coverage_report(store, profile, impl)
    report = dataclasses.replace(report, wall_seconds=wall)
    make_console().print(coverage_renderable(report))
    make_console().print(workers_renderable(workers))
    for seed, why in report.failures[:20]:
        click.echo(f"tracediff: coverage: seed {seed} not measured: {why}", err=True)
    return report.ok


def _render(
    directory: str, impls: tuple[str, ...], wall: float, remaining: int, stopped: str | None
) -> Any:
    """Print the summary and the explained findings; write DIR/report.json; the report."""
    from tracediff.atomic import write_text_atomic
    from tracediff.campaign.store import CampaignStore
    from tracediff.compare import json_report
    from tracediff.compare.model import DiffReport
    from tracediff.report.campaign import campaign_renderable
    from tracediff.report.terminal import report_renderable

    with CampaignStore.open(directory) as store:
        totals = store.totals()
        outcomes = tuple(
            json_report.outcome_from_dict(row.outcome, f"{store.path} seed {row.seed}")
            for row in store.rows(findings_only=True)
            if row.outcome is not None
        )
    report = DiffReport(title=f"tracediff campaign {directory}", impls=impls, outcomes=outcomes)
    if outcomes:
        # The findings first: the report's own verdict counts only the findings it holds,
        # so the campaign's summary of every scenario comes last and is the last line.
        make_console().print(report_renderable(report))
    make_console().print(
        campaign_renderable(totals, impls, wall, remaining=remaining, stopped=stopped)
    )
    write_text_atomic(str(Path(directory) / REPORT_NAME), json_report.dumps(report))
    return report


class _Live:
    """Progress on stderr: on a terminal a live line (scenarios, rate, findings,
    signatures); in a log the periodic heartbeat line."""

    def __init__(self, show: bool, total: int) -> None:
        self._show = show
        self._total = total
        self._progress: Any = None
        self._beat: Any = None

    def __enter__(self) -> Any:
        console = make_console(stderr=True)
        if not self._show:
            return None
        if not console.is_terminal:
            # A log: the periodic progress line (done of total, rate, ETA) instead of a bar.
            from tracediff.cli.heartbeat import Counter, heartbeat

            counter = Counter("campaign", total=self._total)
            self._beat = heartbeat(counter)
            self._beat.__enter__()

            def on_counted(totals: Any, _row: Any) -> None:
                counter.done = totals.scenarios
                counter.findings = totals.findings

            return on_counted
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self._progress = Progress(
            TextColumn("[bold]campaign"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[status]}"),
            console=console,
            transient=True,
        )
        self._progress.__enter__()
        task = self._progress.add_task("campaign", total=self._total, status="")

        def on_row(totals: Any, _row: Any) -> None:
            elapsed = self._progress.tasks[task].elapsed or 0.0
            rate = totals.scenarios / elapsed if elapsed > 0 else 0.0
            status = (
                f"{rate:,.1f}/s, {totals.findings} findings, "
                f"{len(totals.signatures)} signatures, {len(totals.workers)} workers"
            )
            self._progress.update(task, completed=totals.scenarios, status=status)

        return on_row

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)
        if self._beat is not None:
            self._beat.__exit__(None, None, None)
