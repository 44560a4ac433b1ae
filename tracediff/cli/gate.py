"""``tracediff gate``: the CI entry point, one command with exit code 0/1/2.

Steps (tracediff.gate runs them): the regression corpus (scenarios that once diverged,
replayed first, so a known bug that comes back fails fast and by name), the profile in
lockstep, and the profile's golden digests, checked against the digests of that same run
(the reference runs once). Each scenario is one finding at most, explained, with the
command that reproduces it; the diverging traces are kept under ``--artifacts``, and the
reports CI shows are written: JUnit XML, Markdown (also appended to
``$GITHUB_STEP_SUMMARY`` when set), HTML, the JSON report that ``tracediff diff --load``
reads back, and, under GitHub Actions, one ``::error`` annotation per finding.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    EXIT_USAGE,
    check_context,
    check_seconds,
    exit_interrupted,
    main,
    make_console,
    quiet_broken_pipe,
    resolve_equivalence,
    resolve_executor,
    resolve_impls,
    resolve_jobs,
    resolve_scenarios,
)
from tracediff.cli.params import (
    OutputFile,
    equivalence_options,
    executor_option,
    impl_option,
    json_file_option,
    profile_option,
    seeds_option,
    timeout_option,
    workload_option,
)
from tracediff.compare.model import DEFAULT_CONTEXT, DiffReport, ScenarioOutcome
from tracediff.errors import UsageError
from tracediff.project.impls import ImplSpec

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
ACTIONS_ENV = "GITHUB_ACTIONS"
REPORT_NAME = "report.json"  # written into --artifacts when there are findings
MAX_ANNOTATIONS = 50  # GitHub shows at most a few dozen per step anyway


@main.command()
@profile_option()
@workload_option
@seeds_option("Seeds instead of the profile's: 0..71, 3,7.")
@impl_option(
    "Implementation (built-in name or package.module:attr); repeat. The first is the "
    "baseline. Default: the configured impls, else reference and optimized."
)
@click.option("--check", is_flag=True, help="Run optimized in check mode.")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all cores).")
@click.option(
    "--regressions",
    "regressions_dir",
    default=None,
    envvar="TRACEDIFF_REGRESSIONS",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="The regression corpus: a directory of scenario .json files, replayed first. "
    "Default: the configured corpus, else the built-in one.",
)
@click.option(
    "--golden-dir",
    "golden_dir",
    default=None,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Where the golden manifests live. Default: the configured directory, else the "
    "built-in one.",
)
@click.option(
    "--golden", "golden_alias", default=None, hidden=True, help="Old name of --golden-dir."
)
@click.option("--junit", "junit_path", type=OutputFile(), help="Write JUnit XML here.")
@click.option(
    "--markdown",
    "markdown_path",
    type=OutputFile(),
    help=f"Markdown summary here (also appended to ${STEP_SUMMARY_ENV} when it is set).",
)
@click.option("--html", "html_path", type=OutputFile(), help="Write the HTML report here.")
@json_file_option("JSON report here (diff --load).")
@click.option(
    "--artifacts",
    default=None,
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Diverging traces and report.json are kept here, only when there are findings "
    "(default: $TRACEDIFF_ARTIFACTS, the configured directory, else ./artifacts).",
)
@timeout_option(
    "Per-scenario time limit in seconds; a scenario over it is a finding (default: the "
    "configured timeout, else none)."
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
@equivalence_options
@click.option("--no-progress", is_flag=True, help="No periodic progress line when stderr is a log.")
def gate(
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    impls: tuple[str, ...],
    check: bool,
    jobs: int | None,
    regressions_dir: str | None,
    golden_dir: str | None,
    golden_alias: str | None,
    junit_path: str | None,
    markdown_path: str | None,
    html_path: str | None,
    json_path: str | None,
    artifacts: str | None,
    timeout_s: float | None,
    context: int,
    fail_fast: bool,
    executor_text: str,
    equivalence: str,
    ulps: int | None,
    no_progress: bool,
) -> None:
    """The CI gate: the regression corpus, then the profile and its golden digests (from
    one run). Exit 0 all good, 1 findings (each scenario counted once), 2 bad input or
    nothing to check."""
    from tracediff.cli import settings
    from tracediff.gate import GateOptions, run_gate
    from tracediff.project.corpus import corpus_files

    check_context(context)
    timeout_s = settings.timeout(timeout_s)
    check_seconds(timeout_s, "--timeout")  # the configured one: the flag's is checked
    compare_as = resolve_equivalence(equivalence, ulps)
    if golden_dir is not None and golden_alias is not None:
        raise UsageError("give --golden-dir once (--golden is its old name)")
    golden_given = golden_dir if golden_dir is not None else golden_alias
    specs = resolve_impls(impls, check, settings.DEFAULT_IMPLS)
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare (or none)")
    job_count = resolve_jobs(jobs)
    executor_spec = resolve_executor(executor_text)
    artifacts_dir = settings.artifacts(artifacts)
    if Path(artifacts_dir).exists() and not Path(artifacts_dir).is_dir():
        raise UsageError(f"--artifacts {artifacts_dir} exists and is not a directory")
    corpus = settings.corpus(regressions_dir, [s.target for s in specs])
    golden_source = settings.golden_source(golden_given)
    profile = settings.profile(profile_name)
    scenarios = resolve_scenarios(profile, seeds)
    options = GateOptions(
        profile=scenarios[0].profile if scenarios else profile,
        scenarios=tuple(scenarios),
        impls=specs,
        seeds_given=seeds is not None,
        corpus=tuple(corpus_files(corpus.path)) if corpus.path is not None else (),
        corpus_dir=corpus.path,
        corpus_label=corpus.label,
        golden_dir=golden_source.path,
        golden_label=golden_source.label,
        shown=settings.project().relative,
        jobs=job_count,
        artifacts=artifacts_dir,
        timeout_s=timeout_s,
        context=context,
        fail_fast=fail_fast,
        golden_flag=f"--golden-dir {golden_given}" if golden_given else None,
        equivalence=compare_as,
        command_profile=profile,
    )
    from tracediff.cli.heartbeat import Counter, heartbeat
    from tracediff.executor import open_executor

    total = len(options.corpus) + len(options.scenarios)
    with (
        heartbeat(Counter("gate", total=total), enabled=not no_progress) as counter,
        open_executor(executor_spec, jobs=job_count) as executor,
    ):

        def count(result: object) -> None:
            counter.done += 1
            counter.findings += getattr(result, "status", "identical") != "identical"

        def progress(line: str) -> None:
            click.echo(f"gate: {line}", err=True)

        result = run_gate(options, progress, count, executor=executor)
    report = result.report
    # Files first: a reader that closes stdout early (gate | head) must not cost the reports.
    _write_reports(report, junit_path, markdown_path, html_path, json_path, artifacts_dir)
    nothing = not report.outcomes and result.interrupted is None
    if result.interrupted is not None:
        code = exit_interrupted(result.interrupted)
    elif nothing:
        code = EXIT_USAGE
    else:
        code = EXIT_OK if report.ok else EXIT_FINDING
    with quiet_broken_pipe(code):
        from tracediff.report.terminal import report_renderable

        if os.environ.get(ACTIONS_ENV) == "true":
            files = _annotation_files(options, specs, settings.project())
            for line in github_annotations(report, files):
                click.echo(line)
        make_console().print(report_renderable(report))
        if nothing:
            click.echo(
                "gate: nothing to check: no regression scenarios and no profile scenarios "
                "ran; configure [tool.tracediff] (tracediff init) or pass --profile/--seeds",
                err=True,
            )
    sys.exit(code)


def _escape(text: str, *, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (properties also escape ':' and ',')."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


@dataclass(frozen=True)
class AnnotationFiles:
    """Which file each kind of finding is anchored to in GitHub's annotations, relative to
    the project's root (None: no file of the project to point at)."""

    regressions: dict[tuple[str, int], str]  # (labelled profile, seed) -> corpus file
    manifest: str | None  # the golden manifest of the profile
    implementation: str | None  # the source of the implementation under test


def _annotation_files(options: Any, specs: Sequence[ImplSpec], project: Any) -> AnnotationFiles:
    from tracediff.golden import manifest_path
    from tracediff.project.corpus import REGRESSION_PREFIX, load_scenario

    def inside(path: Path | None) -> str | None:
        if path is None:
            return None
        shown = project.relative(path)
        return None if os.path.isabs(shown) else shown

    regressions = {}
    for path in options.corpus:
        scenario = load_scenario(path)
        found = inside(path)
        if found is not None:
            regressions[(f"{REGRESSION_PREFIX}{scenario.profile}", scenario.seed)] = found
    manifest = None
    if options.golden_dir is not None:
        manifest = inside(manifest_path(options.golden_dir, options.profile))
    return AnnotationFiles(regressions, manifest, inside(implementation_source(specs[-1])))


def implementation_source(spec: ImplSpec) -> Path | None:
    """The file that defines an implementation (its module, or an ``exec:`` program)."""
    import importlib.util

    from tracediff.project.impls import EXEC_PREFIX
    from tracediff.running.fingerprint import exec_files

    if spec.target.startswith(EXEC_PREFIX):
        program, scripts = exec_files(spec.target[len(EXEC_PREFIX) :])
        return scripts[0] if scripts else program
    try:
        found = importlib.util.find_spec(spec.target.partition(":")[0])
    except (ImportError, ValueError):
        return None
    if found is None or not found.origin or not os.path.isfile(found.origin):
        return None
    return Path(found.origin).resolve()


def github_annotations(report: DiffReport, files: AnnotationFiles | None = None) -> list[str]:
    """One ``::error`` workflow command per finding (GitHub Actions shows them on the run),
    anchored with ``file=`` to the regression file, the golden manifest or the
    implementation's source, following GitHub's workflow-command syntax."""
    lines = []
    findings = report.findings
    for outcome in findings[:MAX_ANNOTATIONS]:
        title = f"tracediff {outcome.suite}: {outcome.label} {_kind(outcome)}"
        message = _annotation_text(outcome)
        where = _annotation_file(outcome, files)
        props = f"file={_escape(where, prop=True)}," if where else ""
        lines.append(f"::error {props}title={_escape(title, prop=True)}::{_escape(message)}")
    if len(findings) > MAX_ANNOTATIONS:
        more = len(findings) - MAX_ANNOTATIONS
        lines.append(f"::error title=tracediff::{more} more findings in the reports")
    return lines


def _annotation_file(outcome: ScenarioOutcome, files: AnnotationFiles | None) -> str | None:
    from tracediff.gate import GOLDEN_SUITE, REGRESSIONS_SUITE

    if files is None:
        return None
    if outcome.suite == REGRESSIONS_SUITE:
        return files.regressions.get((outcome.profile, outcome.seed))
    if outcome.suite == GOLDEN_SUITE:
        return files.manifest
    return files.implementation


def _kind(outcome: ScenarioOutcome) -> str:
    return outcome.divergence.kind if outcome.divergence is not None else outcome.status


def _annotation_text(outcome: ScenarioOutcome) -> str:
    from tracediff.report import describe

    d = outcome.divergence
    parts = []
    if d is not None:
        parts.append(f"{d.signature} at {d.location} ({describe.where(d)})")
    if outcome.explanation:
        parts.append(outcome.explanation)
    if outcome.reproduce:
        parts.append(f"reproduce: {outcome.reproduce}")
    return "\n".join(parts) or outcome.status


def _write_reports(
    report: DiffReport,
    junit_path: str | None,
    markdown_path: str | None,
    html_path: str | None,
    json_path: str | None,
    artifacts: str,
) -> None:
    from tracediff.atomic import write_text_atomic
    from tracediff.compare import json_report
    from tracediff.report import html, junit, markdown

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
