"""``tracediff gate``: the CI entry point, one command with exit code 0/1/2.

Steps, in order: the regression corpus (scenarios that once diverged, replayed first, so a
known bug that comes back fails fast and by name), the golden digests of the profile (a
hook ``tracediff golden`` fills in), then the profile itself. Every finding is explained
(kind, field, signature), the diverging traces are kept under ``--artifacts``, and the
reports CI shows are written: JUnit XML, Markdown (also appended to
``$GITHUB_STEP_SUMMARY`` when set), HTML, and the JSON report that ``tracediff diff --load``
reads back.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    _console,
    _executor_spec,
    _impl_specs,
    _jobs,
    _scenarios,
    check_context,
    check_output_file,
    check_seconds,
    executor_option,
    exit_interrupted,
    main,
)
from tracediff.compare.model import (
    DEFAULT_CONTEXT,
    DIVERGED,
    EMPTY,
    ERROR,
    FAILED,
    NOT_CONFIGURED,
    PASSED,
    DiffReport,
    ScenarioOutcome,
    StepOutcome,
)
from tracediff.errors import UsageError
from tracediff.impls import ImplSpec
from tracediff.regressions import DEFAULT_DIR
from tracediff.report.describe import plural
from tracediff.scenario.model import Scenario

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
REPORT_NAME = "report.json"  # written into --artifacts when there are findings


@main.command()
@click.option("--profile", "profile_name", default="quick", show_default=True)
@click.option("--seeds", default=None, help="Seeds instead of the profile's: 0..71, 3,7.")
@click.option(
    "--impl",
    "impls",
    multiple=True,
    help="Implementation (built-in name or package.module:attr); repeat. Default: reference, "
    "optimized.",
)
@click.option("--check", is_flag=True, help="Run optimized in check mode.")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all cores).")
@click.option(
    "--regressions",
    "regressions_dir",
    default=DEFAULT_DIR,
    show_default=True,
    envvar="TRACEDIFF_REGRESSIONS",
    type=click.Path(file_okay=False),
    help="The regression corpus: a directory of scenario .json files, replayed first.",
)
@click.option(
    "--golden",
    "golden_dir",
    default="golden",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the golden digests live.",
)
@click.option("--junit", "junit_path", type=click.Path(dir_okay=False), help="JUnit XML here.")
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False),
    help=f"Markdown summary here (also appended to ${STEP_SUMMARY_ENV} when it is set).",
)
@click.option("--html", "html_path", type=click.Path(dir_okay=False), help="HTML report here.")
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), help="JSON report here (diff --load)."
)
@click.option(
    "--artifacts",
    default="artifacts",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Diverging traces and report.json are kept here (only when there are findings).",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=float,
    default=None,
    help="Per-scenario time limit in seconds; a scenario over it is a finding.",
)
@click.option(
    "--context",
    type=int,
    default=DEFAULT_CONTEXT,
    show_default=True,
    help="Records shown before each divergence.",
)
@click.option("--fail-fast", is_flag=True, help="Stop after the first step with findings.")
@executor_option
def gate(
    profile_name: str,
    seeds: str | None,
    impls: tuple[str, ...],
    check: bool,
    jobs: int | None,
    regressions_dir: str,
    golden_dir: str,
    junit_path: str | None,
    markdown_path: str | None,
    html_path: str | None,
    json_path: str | None,
    artifacts: str,
    timeout_s: float | None,
    context: int,
    fail_fast: bool,
    executor_text: str,
) -> None:
    """The CI gate: regressions, golden digests, then the profile. Exit 0 all good,
    1 findings, 2 bad input."""
    from tracediff.regressions import load_corpus

    check_context(context)
    check_seconds(timeout_s, "--timeout")
    specs = _impl_specs(impls, check, ("reference", "optimized"))
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare (or none)")
    job_count = _jobs(jobs)
    executor_spec = _executor_spec(executor_text)
    for path, flag in (
        (junit_path, "--junit"),
        (markdown_path, "--markdown"),
        (html_path, "--html"),
        (json_path, "--json"),
    ):
        check_output_file(path, flag)
    if Path(artifacts).exists() and not Path(artifacts).is_dir():
        raise UsageError(f"--artifacts {artifacts} exists and is not a directory")
    corpus = load_corpus(regressions_dir, missing_ok=regressions_dir == DEFAULT_DIR)
    scenarios = _scenarios(profile_name, seeds)

    started = time.perf_counter()
    steps: list[StepOutcome] = []
    outcomes: list[ScenarioOutcome] = []
    plan = [
        ("regressions", corpus, "regressions"),
        ("golden", [], "golden"),
        (f"profile {profile_name}", scenarios, profile_name),
    ]
    interrupted: int | None = None
    from tracediff.executor import open_executor

    with open_executor(executor_spec, jobs=job_count) as executor:
        for name, step_scenarios, suite in plan:
            if name == "golden":
                step, found = golden_step(
                    profile_name,
                    specs,
                    golden_dir,
                    job_count,
                    artifacts,
                    seeds=[s.seed for s in scenarios] if seeds else None,
                    executor=executor,
                    timeout_s=timeout_s,
                )
            elif not step_scenarios:
                step, found = StepOutcome(name, EMPTY, f"no scenarios in {regressions_dir}"), []
            else:
                count = plural(len(step_scenarios), "scenario")
                click.echo(f"gate: {name}: {count} ...", err=True)
                step, found, interrupted = _run_step(
                    name,
                    suite,
                    step_scenarios,
                    specs,
                    jobs=job_count,
                    artifacts=os.path.join(artifacts, _safe(suite)),
                    timeout_s=timeout_s,
                    context=context,
                    executor=executor,
                )
            steps.append(step)
            outcomes.extend(found)
            click.echo(f"gate: {step.name}: {step.status}: {step.detail}", err=True)
            if interrupted is not None or (fail_fast and step.status == FAILED):
                break
    report = DiffReport(
        title=f"tracediff gate --profile {profile_name}",
        impls=tuple(spec.name for spec in specs),
        outcomes=tuple(outcomes),
        steps=tuple(steps),
        wall_seconds=time.perf_counter() - started,
        notes=("interrupted: not every step ran",) if interrupted is not None else (),
    )
    from tracediff.report.terminal import report_renderable

    _console().print(report_renderable(report))
    _write_reports(report, junit_path, markdown_path, html_path, json_path, artifacts)
    if interrupted is not None:
        sys.exit(exit_interrupted(interrupted))
    sys.exit(EXIT_OK if report.ok else EXIT_FINDING)


def golden_step(
    profile: str,
    specs: Sequence[ImplSpec],
    golden_dir: str,
    jobs: int,
    artifacts: str,
    seeds: Sequence[int] | None = None,
    executor: Any = None,
    timeout_s: float | None = None,
) -> tuple[StepOutcome, list[ScenarioOutcome]]:
    """The golden-digest step: every implementation must reproduce the accepted digests.

    ``golden/<profile>.json`` holds the reference's body digests as last accepted. An
    implementation matching them decides exactly as that reference did, so this step
    catches an unintended change of the reference itself as well as of the optimized one.
    A profile without a manifest is reported as "not configured" and does not fail the gate.
    With ``seeds`` (the gate's ``--seeds``) only those seeds are checked.
    """
    from tracediff.golden import DIGEST, gate_step

    found: list[ScenarioOutcome] = []
    details = []
    for spec in specs:
        outcome = gate_step(
            profile,
            spec,
            jobs,
            os.path.join(artifacts, "golden"),
            golden_dir=golden_dir,
            seeds=seeds,
            executor=executor,
            timeout_s=timeout_s,
        )
        if outcome.skipped:
            return StepOutcome("golden", NOT_CONFIGURED, outcome.message), []
        details.append(outcome.summary())
        for mismatch in outcome.mismatches:
            found.append(
                ScenarioOutcome(
                    suite="golden",
                    profile=outcome.profile,
                    seed=mismatch.seed,
                    features=mismatch.explanation or mismatch.kind,
                    status=DIVERGED if mismatch.kind == DIGEST else ERROR,
                    plans=mismatch.actual.plans if mismatch.actual else 0,
                )
            )
    return StepOutcome("golden", FAILED if found else PASSED, "; ".join(details)), found


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _run_step(
    name: str,
    suite: str,
    scenarios: Sequence[Scenario],
    specs: Sequence[ImplSpec],
    *,
    jobs: int,
    artifacts: str,
    timeout_s: float | None,
    context: int,
    executor: Any = None,
) -> tuple[StepOutcome, list[ScenarioOutcome], int | None]:
    """Run one step's scenarios, explain its findings; (step, outcomes, stop signal)."""
    from tracediff.compare.explain import explain_results
    from tracediff.runner import IDENTICAL, RunOptions, run_scenarios

    options = RunOptions(impls=tuple(specs), jobs=jobs, artifacts=artifacts, timeout_s=timeout_s)
    summary = run_scenarios(scenarios, options, executor=executor)
    outcomes = explain_results(
        scenarios,
        summary.results,
        specs,
        suite=suite,
        context=context,
        jobs=jobs,
        executor=executor,
        timeout_s=timeout_s,
        deadline_s=options.kill_after_s,
    )
    findings = [r for r in summary.results if r.status != IDENTICAL]
    explained = [o.divergence for o in outcomes if o.divergence is not None]
    count = len(summary.results)
    if findings:
        kinds: dict[str, int] = {}
        for d in explained:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        detail = f"{len(findings)} of {count} scenarios: " + ", ".join(
            f"{n} {kind}" for kind, n in sorted(kinds.items())
        )
        step = StepOutcome(name, FAILED, detail)
    else:
        step = StepOutcome(name, PASSED, f"{count} scenarios identical, {summary.plans:,} plans")
    if summary.interrupted:
        step = StepOutcome(name, FAILED, f"interrupted after {count} of {len(scenarios)}")
        signum = getattr(summary, "interrupt_signal", None) or signal.SIGINT
        return step, outcomes, int(signum)
    return step, outcomes, None


def _write_reports(
    report: DiffReport,
    junit_path: str | None,
    markdown_path: str | None,
    html_path: str | None,
    json_path: str | None,
    artifacts: str,
) -> None:
    from tracediff.atomic import write_text_atomic
    from tracediff.report import html, json_report, junit, markdown

    if junit_path:
        write_text_atomic(junit_path, junit.render(report))
    summary_path = os.environ.get(STEP_SUMMARY_ENV)
    if markdown_path or summary_path:
        text = markdown.render(report)
        if markdown_path:
            write_text_atomic(markdown_path, text)
        if summary_path:
            # GitHub appends every step's summary to one file: append, never replace.
            with open(summary_path, "a", encoding="utf-8") as handle:
                handle.write(text + "\n")
    if html_path:
        write_text_atomic(html_path, html.render(report))
    text = json_report.dumps(report)
    if json_path:
        write_text_atomic(json_path, text)
    if report.findings:
        Path(artifacts).mkdir(parents=True, exist_ok=True)
        write_text_atomic(os.path.join(artifacts, REPORT_NAME), text)
        click.echo(
            f"gate: kept the diverging traces and {REPORT_NAME} in {artifacts}/ "
            f"(tracediff diff --load {os.path.join(artifacts, REPORT_NAME)})",
            err=True,
        )
