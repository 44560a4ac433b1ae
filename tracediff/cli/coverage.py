"""``tracediff coverage``: per feature of the model's rules, the scenarios and plans that
exercised it."""

from __future__ import annotations

import dataclasses
import json
import sys

import click

from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    main,
    make_console,
    resolve_executor,
    resolve_jobs,
)
from tracediff.cli.params import (
    executor_option,
    json_file_option,
    profile_option,
    seeds_option,
    workload_option,
)
from tracediff.errors import UsageError
from tracediff.project import current_model


@main.command()
@profile_option()
@workload_option
@seeds_option("Seeds instead of the profile's: 0..1055, 3,7, 0..9,20.")
@click.option("-j", "--jobs", type=int, default=None, help="Worker processes (default: all cores).")
@json_file_option("Also write the report as JSON to this file (per feature and per scenario).")
@executor_option
@click.option("--no-progress", is_flag=True, help="No periodic progress line when stderr is a log.")
@click.option(
    "--min",
    "min_scenarios",
    type=click.IntRange(1, 1_000_000),
    default=1,
    show_default=True,
    help="Scenarios each required feature and rule clause must be exercised in; CI's gate "
    "asks 3, so that no clause is checked by one scenario only.",
)
def coverage(
    profile_name: str | None,
    seeds: tuple[int, ...] | None,
    jobs: int | None,
    json_path: str | None,
    executor_text: str,
    no_progress: bool,
    min_scenarios: int,
) -> None:
    """Per feature of the model's rules, how many scenarios and plans of a profile exercised it.

    Drives the reference over the seed set. Exits 1 when some required feature or clause is
    exercised by fewer than --min scenarios (by none, by default: the profile cannot catch a
    divergence there) or some seed could not be measured (the reference failed on it), 0
    otherwise; rows marked (info) are reported but do not decide the exit code.
    """
    from tracediff.campaign.clauses import coverage as measure
    from tracediff.campaign.clauses import coverage_to_dict
    from tracediff.cli.heartbeat import Counter, heartbeat
    from tracediff.cli.settings import profile as default_profile
    from tracediff.report.coverage import coverage_renderable

    model = current_model()
    from tracediff.project.profiles import load_profile

    profile = load_profile(model, default_profile(profile_name))
    chosen = seeds if seeds is not None else profile.seeds
    if not chosen:
        raise UsageError(f"profile {profile.name!r} names no seeds; pass --seeds")
    from tracediff.executor import open_executor

    spec = resolve_executor(executor_text)
    with (
        heartbeat(
            Counter("coverage", total=len(chosen), counts_findings=False), enabled=not no_progress
        ) as counter,
        open_executor(spec, jobs=resolve_jobs(jobs)) as executor,
    ):

        def measured() -> None:
            counter.done += 1

        report = measure(profile, chosen, executor=executor, on_result=measured)
    report = dataclasses.replace(report, min_scenarios=min_scenarios)
    make_console().print(coverage_renderable(report))
    for seed, why in report.failures[:20]:
        click.echo(f"tracediff: coverage: seed {seed} not measured: {why}", err=True)
    if json_path:
        from tracediff.atomic import write_text_atomic

        write_text_atomic(json_path, json.dumps(coverage_to_dict(report, model), indent=1) + "\n")
    sys.exit(EXIT_OK if report.ok else EXIT_FINDING)
