"""``tracediff fuzz``: Hypothesis-searched scenarios, each failure shrunk and explained."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from tracediff.cli import settings
from tracediff.cli.app import (
    EXIT_FINDING,
    EXIT_OK,
    main,
    resolve_impls,
)
from tracediff.cli.output import text_console
from tracediff.cli.params import impl_option
from tracediff.cli.shrink_options import (
    DEFAULT_IMPLS,
    DEFAULT_SHRINK_EVALUATIONS,
    MAX_EXAMPLES,
    MAX_REQUESTS,
    impl_args,
    progress_line,
    save_directories,
    shrink_budget,
    shrink_options,
)
from tracediff.errors import UsageError
from tracediff.report.describe import plural


@main.command()
@impl_option("Implementations to compare (repeat; default reference and optimized).")
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@click.option(
    "--max-examples",
    type=int,
    default=200,
    show_default=True,
    help="Scenarios to generate and compare.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the search.")
@click.option(
    "--max-failures",
    type=int,
    default=3,
    show_default=True,
    help="Stop after this many distinct failures.",
)
@click.option(
    "--max-requests",
    type=int,
    default=6,
    show_default=True,
    help="Requests per generated scenario, at most.",
)
@shrink_budget(DEFAULT_SHRINK_EVALUATIONS)
@click.option("--save", is_flag=True, help="Save each shrunk failure into the corpus.")
@save_directories
@click.option(
    "--signature",
    "signature_name",
    type=click.Choice(["compare", "fields"]),
    default="compare",
    show_default=True,
    help="What must stay the same while shrinking: compare = the divergence explanation's "
    "kind and field path; fields = status, record type and first differing top-level field.",
)
@click.option("--no-progress", is_flag=True, help="No live progress line.")
def fuzz(
    impls: tuple[str, ...],
    check: bool,
    max_examples: int,
    seed: int,
    max_failures: int,
    max_requests: int,
    budget: int,
    timeout_s: float | None,
    max_seconds: float | None,
    timeout_old: float | None,
    save: bool,
    regressions: str | None,
    artifacts: str | None,
    signature_name: str,
    no_progress: bool,
) -> None:
    """Search generated scenarios (Hypothesis) for divergences; report each shrunk.

    Exit 1 when a failure was found, 0 when none was in --max-examples scenarios.
    """
    from tracediff import model
    from tracediff.search.fuzz import FuzzProgress
    from tracediff.search.fuzz import fuzz as run_fuzz
    from tracediff.search.shrink import SIGNATURES, describe_signature, save_regression

    options = shrink_options(budget, timeout_s, max_seconds, timeout_old)
    if max_examples < 1 or max_failures < 1 or max_requests < 1:
        raise UsageError("--max-examples, --max-failures and --max-requests must be at least 1")
    if max_examples > MAX_EXAMPLES:
        raise UsageError(
            f"--max-examples must be at most {MAX_EXAMPLES:,}, got {str(max_examples)[:30]}"
        )
    if max_requests > MAX_REQUESTS:
        raise UsageError(f"--max-requests must be at most {MAX_REQUESTS}, got {max_requests}")
    specs = resolve_impls(impls, check, DEFAULT_IMPLS)
    if len(specs) < 2:
        raise UsageError("--impl needs at least two implementations to compare")
    with progress_line(not no_progress, "fuzzing") as show:

        def on_progress(p: FuzzProgress) -> None:
            show(
                f"{p.phase}: {plural(p.examples, 'scenario')}, "
                f"{plural(p.failures, 'failure')}, {p.elapsed:.0f} s"
            )

        from tracediff.executor import open_executor

        with open_executor("local", jobs=1) as executor:  # one warm isolated worker
            result = run_fuzz(
                specs,
                max_examples=max_examples,
                seed=seed,
                max_failures=max_failures,
                max_requests=max_requests,
                shrink_options=options,
                signature_fn=SIGNATURES[signature_name],
                on_progress=on_progress,
                executor=executor,
            )
    console = text_console()
    names = " vs ".join(result.impls)
    if result.ok:
        console.print(
            f"no failure: {plural(result.examples, 'scenario')}, {names} ({result.seconds:.1f} s)",
            style="bold green",
        )
        sys.exit(EXIT_OK)
    table = Table(title=f"fuzz: {plural(len(result.failures), 'failure')}", header_style="bold")
    for column in ("signature", "found (requests)", "shrunk (requests, plans)", "saved"):
        table.add_column(column)
    saved_paths: list[str | None] = []
    for failure in result.failures:
        shrunk = failure.shrunk
        saved = ""
        if save:
            saved = str(
                save_regression(
                    shrunk,
                    regressions=str(settings.write_dir(regressions, "regressions")),
                    artifacts=settings.artifacts(artifacts, None),
                )
            )
        saved_paths.append(saved or None)
        table.add_row(
            describe_signature(failure.signature),
            str(model.of(failure.found).size(failure.found)),
            f"{shrunk.after[0]}, {shrunk.after[1]}",
            saved or "-",
        )
    console.print(table)
    _explain_failures(
        console, result.failures, specs, saved_paths, artifacts, options.run_timeout_s
    )
    console.print(
        f"DIVERGED: {plural(len(result.failures), 'distinct failure')} in "
        f"{plural(result.examples, 'scenario')} "
        f"({names}, {result.seconds:.1f} s, --seed {seed})",
        style="bold red",
    )
    sys.exit(EXIT_FINDING)


def _explain_failures(
    console: Console,
    failures: Any,
    specs: Any,
    saved: list[str | None],
    artifacts: str | None,
    timeout_s: float,
) -> None:
    """Each failure's explanation and the command that reproduces it, saved or not: an
    unsaved shrunk scenario is kept under the artifacts directory so the command works.
    The explanation runs the implementations again as the search did, in worker processes
    under the per-scenario time limit (a time limit isolates): one that kills its process
    or hangs is a finding there too, never the end of tracediff or a wait without end."""
    import tracediff
    from tracediff.project.corpus import save_scenario
    from tracediff.search.shrink import signature_slug

    names = tuple(spec.arg for spec in specs)
    keep = Path(settings.artifacts(artifacts)) / "fuzz"
    for failure, path in zip(failures, saved, strict=True):
        scenario = failure.shrunk.shrunk
        if path is None:
            # the corpus's own file form, atomically, named for the signature and the
            # scenario's content: two findings never share a file
            path = str(save_scenario(scenario, keep, signature_slug(failure.signature)))
        shown = settings.project().relative(path)
        compared = tracediff.compare_implementations(scenario, names, jobs=2, timeout=timeout_s)
        for comparison in compared.findings:
            console.print(f"{comparison.label}: {comparison.explanation}", markup=False)
        console.print(
            f"reproduce: tracediff run --scenario {shlex.quote(shown)} {impl_args(names)}",
            markup=False,
        )
