"""The command group and what every command shares: error mapping, option parsing.

Exit codes: 0 all equal / all good; 1 a divergence, a scheduler error or a timeout (the
findings); 2 bad input or usage. Errors print one line naming the file, seed or flag and
what to do; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click
from rich.console import Console

from tracediff import __version__
from tracediff.errors import TracediffError, UsageError
from tracediff.impls import ImplSpec, load, parse_impl

EXIT_OK, EXIT_FINDING, EXIT_USAGE = 0, 1, 2


def _console(stderr: bool = False) -> Console:
    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def _fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    click.echo(f"tracediff: error: {message}", err=True)
    sys.exit(code)


class TracediffGroup(click.Group):
    """Maps TracediffError to one line on stderr and its exit code (no traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TracediffError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            _fail(str(exc), exc.exit_code)


@click.group(cls=TracediffGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracediff")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Differential trace testing: prove an optimized implementation decides as before."""
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# -- shared option handling -------------------------------------------------------------------
def _impl_specs(values: Sequence[str], check: bool, default: Sequence[str]) -> tuple[ImplSpec, ...]:
    chosen = list(values) or list(default)
    specs = tuple(parse_impl(v, check=check) for v in chosen)
    for spec in specs:
        load(spec)  # fail fast, with exit 2, before any worker starts
    return specs


def _scenarios(profile_name: str | None, seeds_text: str | None) -> list[Any]:
    from tracediff.scenario.generator import generate
    from tracediff.scenario.profiles import load_profile, parse_seeds

    profile = load_profile(profile_name or "quick")
    seeds = parse_seeds(seeds_text) if seeds_text else profile.seeds
    if not seeds:
        raise UsageError(f"profile {profile.name!r} names no seeds; pass --seeds")
    return [generate(profile, seed) for seed in seeds]


def _jobs(value: int | None) -> int:
    from tracediff.runner import default_jobs

    if value is None:
        return default_jobs()
    if value < 1:
        raise UsageError(f"-j/--jobs must be at least 1, got {value}")
    return value
