"""``tracediff run``: implementations over a seed set, traces compared byte for byte.

Everything that can be checked before the run is (flags, profile, implementations, every
output path), so that bad input fails at once with exit 2 rather than after the run.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from tracediff import model as models
from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    check_context,
    check_memory,
    check_output_dir,
    check_output_file,
    check_seconds,
    exit_interrupted,
    main,
    make_console,
    resolve_equivalence,
    resolve_executor,
    resolve_impls,
    resolve_jobs,
    resolve_scenarios,
)
from tracediff.cli.params import (
    equivalence_options,
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
from tracediff.project.impls import checked
from tracediff.report.describe import plural
from tracediff.running.runner import (
    DIVERGED,
    ERROR,
    IDENTICAL,
    TIMEOUT,
    EquivalenceDocument,
    RunDocument,
    RunOptions,
    RunSummary,
    ScenarioResult,
)


# -- run ------------------------------------------------------------------------------------
@main.command()
@profile_option(
    "Seed-set profile: a built-in name, a configured one, or a .toml path (default: the "
    "configured profile, else quick)."
)
@workload_option
@seeds_option("Seeds instead of the profile's: 0..1055, 3,7, 0..9,20.")
@impl_option(
    "Implementation: built-in name, package.module:attr, entry point, or 'exec:COMMAND' "
    "(a process speaking docs/protocol.md). Repeat (default: reference, optimized)."
)
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all cores).")
@click.option("--check", is_flag=True, help="Run optimized in check mode (debug-build asserts).")
@click.option(
    "--artifacts",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the traces of diverging scenarios in this directory (default: "
    "$TRACEDIFF_ARTIFACTS or the configured artifacts directory; else none are kept).",
)
@timeout_option(
    "Per-scenario time limit in seconds; a scenario over it is a finding. Scenarios then "
    "run in worker processes, even with -j 1, so that a hang in C code is killed too."
)
@click.option(
    "--memory-limit",
    "memory_limit_mb",
    type=int,
    default=None,
    metavar="MB",
    help="Address-space limit of each worker process; an implementation going over it is an "
    "error finding (MemoryError). Scenarios then run in worker processes, even with -j 1.",
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(),
    default=None,
    metavar="DIR",
    help="Journal finished scenarios in DIR and skip those already there: rerun the same "
    "command after an interruption to finish the run. Results of other code (an "
    "implementation, tracediff or the options changed) are never reused: the run is refused.",
)
@click.option(
    "--fresh",
    is_flag=True,
    help="With --resume: start a new journal in DIR (the old one is kept as "
    "journal.jsonl.old), e.g. after the implementation's code changed.",
)
# checked below, once --artifacts and --resume exist: the file may be inside one of them
@json_file_option("Also write the summary as JSON to this file.", check=False)
@click.option(
    "--context",
    "explain_k",
    type=int,
    default=None,
    metavar="K",
    help="Explain findings with K records of context before each divergence (0: do not "
    "explain).  [default: 5]",
)
@click.option("--explain", "explain_old", type=int, default=None, hidden=True)
@click.option(
    "--regressions",
    "regressions_dir",
    default=None,
    envvar="TRACEDIFF_REGRESSIONS",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="The regression corpus (scenario .json files, see tracediff shrink --save), replayed "
    "before the seed set. Default: the configured corpus, else the built-in one.",
)
@click.option(
    "--scenario",
    "scenario_files",
    multiple=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Run this scenario .json file (e.g. one of the regression corpus; builtin:NAME is "
    "one of the built-in corpus) instead of a seed set; repeat for more.",
)
@click.option("--no-regressions", is_flag=True, help="Do not replay the regression corpus.")
@click.option(
    "--self-check",
    "self_check_flag",
    is_flag=True,
    help="Also run each implementation twice per scenario and report nondeterminism apart "
    "from divergence.",
)
@executor_option
@equivalence_options
@click.option(
    "--no-progress",
    is_flag=True,
    help="No progress bar on a terminal, and no periodic progress line in a log.",
)
def run(
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    impls: tuple[str, ...],
    jobs: int | None,
    check: bool,
    artifacts: str | None,
    timeout_s: float | None,
    memory_limit_mb: int | None,
    resume_dir: str | None,
    fresh: bool,
    json_path: str | None,
    explain_k: int | None,
    explain_old: int | None,
    regressions_dir: str | None,
    scenario_files: tuple[str, ...],
    no_regressions: bool,
    self_check_flag: bool,
    executor_text: str,
    equivalence: str,
    ulps: int | None,
    no_progress: bool,
) -> None:
    """Run implementations over a seed set and compare their traces byte for byte.

    Exit 0 all identical, 1 findings, 2 bad input; 130/143 when Ctrl-C/SIGTERM stopped it
    (the summary of what finished is printed, and kept in the --resume journal).
    """
    from tracediff.cli import settings

    timeout_s = settings.timeout(timeout_s)
    check_flags(impls, check, timeout_s, memory_limit_mb)
    compare_as = resolve_equivalence(equivalence, ulps)
    if explain_k is not None and explain_old is not None:
        raise UsageError("give --context once (--explain is its old name)")
    if explain_old is not None:
        explain_k, flag = explain_old, "--explain"
    else:
        flag = "--context"
    if explain_k is None:
        explain_k = DEFAULT_CONTEXT
    check_context(explain_k, flag)
    specs = resolve_impls(impls, check, ("reference", "optimized"))
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare (or none)")
    job_count = resolve_jobs(jobs)
    executor_spec = resolve_executor(executor_text)
    if json_path and resume_dir:
        from tracediff.running.journal import journal_path

        if Path(json_path).resolve() == journal_path(resume_dir).resolve():
            raise UsageError(
                f"--json {json_path} is the --resume journal; write the summary elsewhere"
            )
    check_output_dir(artifacts, "--artifacts")
    check_output_dir(resume_dir, "--resume")
    if fresh:
        if resume_dir is None:
            raise UsageError("--fresh starts a new --resume journal; give --resume DIR too")
        from tracediff.running.journal import start_fresh

        moved = start_fresh(resume_dir)
        if moved is not None:
            click.echo(f"run: --fresh: moved the old journal to {moved}", err=True)
    check_output_file(json_path, "--json")  # after those: it may be inside one of them
    if scenario_files:
        from tracediff.project.corpus import load_scenario

        if profile_name is not None or seeds is not None or settings.workload() is not None:
            raise UsageError(
                "--scenario runs the given files only; drop --profile/--seeds/--workload"
            )
        scenarios = [load_scenario(path) for path in scenario_files]
    else:
        scenarios = resolve_scenarios(profile_name, seeds)
    corpus_dir = None
    if not no_regressions and not scenario_files:
        source = settings.corpus(regressions_dir, [s.target for s in specs])
        corpus_dir = source.path
    if corpus_dir is not None:
        from tracediff.project.corpus import REGRESSION_PREFIX, load_corpus

        # Past failures first, every time: they are small and the likeliest to catch a bug.
        corpus = load_corpus(corpus_dir)
        labelled = [models.of(s).relabel(s, f"{REGRESSION_PREFIX}{s.profile}") for s in corpus]
        scenarios = labelled + scenarios
        if labelled:  # say which corpus is replayed (gate says so even when it is empty)
            click.echo(
                f"run: regressions: {plural(len(labelled), 'scenario')} first, from {source.label}",
                err=True,
            )
    options = RunOptions(
        impls=specs,
        jobs=job_count,
        artifacts=settings.artifacts(artifacts, None),
        timeout_s=timeout_s,
        memory_limit_mb=memory_limit_mb,
        resume=resume_dir,
        executor=executor_spec.text,
        equivalence=compare_as,
    )
    from tracediff.executor import open_executor

    with open_executor(executor_spec, jobs=job_count, memory_limit_mb=memory_limit_mb) as executor:
        summary, checked, explained = _run_explain_check(
            scenarios, options, executor, explain_k, self_check_flag, not no_progress
        )
    if json_path:
        from tracediff.atomic import write_text_atomic
        from tracediff.compare.json_report import finding_to_dict, groups_to_list

        data = summary_to_dict(summary)
        # Per finding, its explanation (kind, signature, first differing record and plan,
        # state diff), and the signature groups; empty when --explain 0 or nothing differs.
        data["explained"] = bool(explained) or summary.ok
        data["findings"] = [finding_to_dict(d) for d in explained]
        data["groups"] = groups_to_list(explained)
        if checked is not None:
            data["self_check"] = checked.to_dict()
        write_text_atomic(json_path, json.dumps(data, indent=2) + "\n")
    if summary.interrupted:
        where = f"; rerun with --resume {resume_dir} to finish" if resume_dir else ""
        click.echo(f"tracediff: stopped by {_signal_name(summary)}{where}", err=True)
        sys.exit(exit_interrupted(summary.interrupt_signal or signal.SIGINT))
    deterministic = checked is None or checked.ok
    sys.exit(EXIT_OK if summary.ok and deterministic else EXIT_FINDING)


def _run_explain_check(
    scenarios: list[Any],
    options: RunOptions,
    executor: Any,
    explain_k: int,
    self_check_flag: bool,
    show: bool,
) -> tuple[RunSummary, Any, list[Any]]:
    """The run, its explanations and the optional self-check, all on ``executor``; returns
    the summary, the self-check (or None) and the explained divergences."""
    summary = _run_with_progress(scenarios, options, show=show, executor=executor)
    for note in summary.notes:
        click.echo(f"tracediff: note: {note}", err=True)
    from tracediff.report.terminal import summary_renderable

    make_console().print(summary_renderable(summary))
    explained: list[Any] = []
    if not summary.ok and not summary.interrupted and explain_k > 0:
        from tracediff.cli.heartbeat import Counter, heartbeat
        from tracediff.compare.model import DiffReport
        from tracediff.report.terminal import report_renderable
        from tracediff.running.explain import explain_results

        findings = sum(r.status != IDENTICAL for r in summary.results)
        explaining = Counter(
            "run: explaining", total=findings, noun="finding", counts_findings=False
        )
        with heartbeat(explaining, enabled=show):

            def explained_one() -> None:
                explaining.done += 1

            outcomes = explain_results(
                scenarios,
                summary.results,
                options.impls,
                suite=scenarios[0].profile,
                context=explain_k,
                executor=executor,
                timeout_s=options.timeout_s,
                deadline_s=options.kill_after_s,
                on_explained=explained_one,
            )
        report = DiffReport(title="tracediff run", impls=summary.impls, outcomes=tuple(outcomes))
        explained = list(report.divergences)
        make_console().print(report_renderable(report))
    checked = None
    if self_check_flag and not summary.interrupted:
        from tracediff.cli.selfcheck import selfcheck_renderable
        from tracediff.running.selfcheck import self_check

        checked = self_check(
            scenarios, options.impls, timeout_s=options.timeout_s, executor=executor
        )
        make_console().print(selfcheck_renderable(checked))
    return summary, checked, explained


def check_flags(
    impls: Sequence[str], check: bool, timeout_s: float | None, memory_limit_mb: int | None
) -> None:
    """The flag values and combinations ``run`` refuses (exit 2), before any work."""
    check_seconds(timeout_s, "--timeout")
    check_memory(memory_limit_mb)
    if memory_limit_mb is not None:
        try:
            import resource  # noqa: F401
        except ImportError:
            raise UsageError("--memory-limit is not supported on this platform") from None
    chosen = list(impls) or ["reference", "optimized"]
    twins = checked()
    if check and not any(name.strip() in twins for name in chosen):
        raise UsageError(
            f"--check changes nothing here: none of {', '.join(chosen)} has a check mode "
            f"(only {', '.join(sorted(twins))} has); drop --check"
        )


def _signal_name(summary: RunSummary) -> str:
    try:
        return signal.Signals(summary.interrupt_signal or signal.SIGINT).name
    except ValueError:
        return f"signal {summary.interrupt_signal}"


def _run_with_progress(
    scenarios: list[Any], options: RunOptions, *, show: bool, executor: Any = None
) -> RunSummary:
    console = make_console(stderr=True)
    if not show or not console.is_terminal:
        from tracediff.cli.heartbeat import Counter, heartbeat

        with heartbeat(Counter("run", total=len(scenarios)), enabled=show) as counter:

            def count(result: ScenarioResult) -> None:
                counter.done += 1
                counter.findings += result.status != IDENTICAL

            return _run_scenarios_cb(scenarios, options, count, executor)
    findings = 0
    plans = 0
    progress = Progress(
        TextColumn("[bold]scenarios"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]} plans/s"),
        TextColumn("{task.fields[findings]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    with progress:
        task = progress.add_task("run", total=len(scenarios), rate="-", findings="no findings")

        def on_result(result: ScenarioResult) -> None:
            nonlocal findings, plans
            if not result.resumed:  # resumed plans were not run now: keep them out of the rate
                plans += result.impls[0].plans if result.impls else 0
            if result.status != IDENTICAL:
                findings += 1
            elapsed = progress.tasks[task].elapsed or 0.0
            progress.update(
                task,
                advance=1,
                rate=f"{plans / elapsed:,.0f}" if elapsed > 0 else "-",
                findings=f"[red]{plural(findings, 'finding')}" if findings else "no findings",
            )

        return _run_scenarios_cb(scenarios, options, on_result, executor)


def _run_scenarios_cb(
    scenarios: list[Any],
    options: RunOptions,
    on_result: Callable[[ScenarioResult], None],
    executor: Any = None,
) -> RunSummary:
    from tracediff.running.runner import run_scenarios

    return run_scenarios(scenarios, options, on_result, executor=executor)


def summary_to_dict(summary: RunSummary) -> RunDocument:
    """The versioned JSON form of a run summary."""
    return {
        "format": "tracediff-run",
        "version": 1,
        "impls": list(summary.impls),
        "ok": summary.ok,
        "interrupted": summary.interrupted,
        "signal": summary.interrupt_signal,
        "scenarios": summary.scenarios,
        "not_run": summary.skipped,
        "resumed": summary.resumed,
        "plans": summary.plans,
        "identical": summary.count(IDENTICAL),
        "diverged": summary.count(DIVERGED),
        "errors": summary.count(ERROR),
        "timeouts": summary.count(TIMEOUT),
        "wall_seconds": round(summary.wall_seconds, 3),
        "simulation_share": summary.simulation_share,
        "equivalence": equivalence_to_dict(summary),
        "notes": list(summary.notes),
        "results": [
            {
                "profile": r.profile,
                "seed": r.seed,
                "status": r.status,
                "features": r.features,
                "divergence": r.divergence,
                "plan": r.plan,
                "record_type": r.record_type,
                "failed_impl": r.failed_impl,
                "message": r.message,
                "artifacts": list(r.artifacts),
                "resumed": r.resumed,
                "floats_within_ulps": r.floats_within,
                "max_ulps": r.max_ulps,
                "impls": [
                    {"name": s.name, "plans": s.plans, "records": s.records, "digest": s.digest}
                    for s in r.impls
                ],
            }
            for r in summary.results
        ],
    }


def equivalence_to_dict(summary: RunSummary) -> EquivalenceDocument:
    """How records were compared, and what decision equivalence let through."""
    tolerated = summary.within_ulps
    return {
        "mode": summary.equivalence.mode,
        "ulps": summary.equivalence.ulps,
        "label": summary.equivalence.label,
        "byte_identical": summary.count(IDENTICAL) - len(tolerated),
        "equal_within_ulps": len(tolerated),
        "floats_within_ulps": sum(r.floats_within for r in tolerated),
        "max_ulps": summary.max_ulps,
    }
