"""The options and helpers ``shrink`` and ``fuzz`` share: the evaluation budget, the
per-candidate limits, where ``--save`` writes, and a live status line."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from tracediff.cli import settings
from tracediff.cli.app import check_seconds
from tracediff.cli.output import text_console
from tracediff.cli.params import Seconds
from tracediff.errors import UsageError

MAX_EXAMPLES = 1_000_000  # fuzz: generated scenarios; days of fuzzing, more is a typo


DEFAULT_IMPLS = ("reference", "optimized")
# The defaults, imported without the shrinker itself (it is loaded when a command runs).
DEFAULT_EVALUATIONS = 2000  # tracediff.search.shrink.DEFAULT_EVALUATIONS
DEFAULT_SHRINK_EVALUATIONS = 500  # tracediff.search.fuzz.DEFAULT_SHRINK_EVALUATIONS
DEFAULT_RUN_TIMEOUT_S = 60.0  # tracediff.search.shrink.DEFAULT_RUN_TIMEOUT_S
DEFAULT_MAX_SECONDS = 3600.0  # tracediff.search.shrink.DEFAULT_MAX_SECONDS
MAX_REQUESTS = 64  # what a scenario may hold (the generator matrix allows 1..64)


@contextmanager
def progress_line(show: bool, label: str) -> Iterator[Callable[[str], None]]:
    """A one-line live status on stderr (only on a terminal); yields its update function."""
    console = text_console(stderr=True)
    if not show or not console.is_terminal:
        yield lambda _text: None
        return
    with console.status(label) as status:
        yield lambda text: status.update(f"{label} {text}")


def impl_args(names: tuple[str, ...]) -> str:
    return " ".join(f"--impl {shlex.quote(n)}" for n in names)


def save_directories(command: Any) -> Any:
    """--regressions and --artifacts: where --save writes (shrink and fuzz alike)."""
    command = click.option(
        "--artifacts",
        default=None,
        metavar="DIR",
        type=click.Path(file_okay=False),
        help="Artifacts directory (CI); default $TRACEDIFF_ARTIFACTS, the configured one, or "
        "./artifacts.",
    )(command)
    return click.option(
        "--regressions",
        default=None,
        metavar="DIR",
        type=click.Path(file_okay=False),
        help="The regression corpus --save writes into (default: the configured corpus, else "
        "./scenarios/regressions).",
    )(command)


def shrink_budget(default_budget: int) -> Callable[[Any], Any]:
    """--budget, --timeout and --max-seconds: how far a shrink goes (shrink and fuzz alike).
    The budget counts candidate evaluations, so the repro is the same on any machine."""

    def decorate(command: Any) -> Any:
        command = click.option(
            "--timeout-s", "timeout_old", type=Seconds(), default=None, hidden=True
        )(command)  # the old name of the total time limit, now --max-seconds
        command = click.option(
            "--max-seconds",
            type=Seconds(),
            default=None,
            help="Safety cap on the whole shrink in wall-clock seconds (default "
            f"{DEFAULT_MAX_SECONDS:g}); a search it stops says so, since its repro then "
            "depends on the machine's speed.",
        )(command)
        command = click.option(
            "--timeout",
            "timeout_s",
            type=Seconds(),
            default=None,
            help="Per-candidate run limit in seconds (default: the configured timeout, else "
            f"{DEFAULT_RUN_TIMEOUT_S:g}); a candidate past it counts as a timeout.",
        )(command)
        return click.option(
            "--budget",
            type=int,
            default=default_budget,
            show_default=True,
            help="Candidate evaluations the shrink may run: the same scenario, implementations "
            "and options give the same repro on any machine.",
        )(command)

    return decorate


def shrink_options(
    budget: int, timeout_s: float | None, max_seconds: float | None, timeout_old: float | None
) -> Any:
    from tracediff.search.shrink import ShrinkOptions

    if timeout_old is not None and max_seconds is None:
        max_seconds = timeout_old
    if budget < 1:
        raise UsageError(f"--budget must be at least 1 candidate evaluation, got {budget}")
    timeout_s = settings.timeout(timeout_s)
    check_seconds(timeout_s, "--timeout")  # the configured one: the flags are Seconds
    return ShrinkOptions(
        max_evaluations=budget,
        run_timeout_s=DEFAULT_RUN_TIMEOUT_S if timeout_s is None else timeout_s,
        max_seconds=DEFAULT_MAX_SECONDS if max_seconds is None else max_seconds,
    )


# -- shrink -----------------------------------------------------------------------------------
