"""``tracediff record``: one scenario through one implementation into a trace file."""

from __future__ import annotations

import click

from tracediff.cli.app import main, resolve_scenarios
from tracediff.cli.params import SEED, impl_option, output_option, profile_option, workload_option
from tracediff.errors import SchedulerFault
from tracediff.executor.call import ImplementationFailed
from tracediff.project.impls import parse_impl


@main.command()
@profile_option()
@workload_option
@click.option("--seed", type=SEED, required=True, help="The scenario's seed within the profile.")
@impl_option(
    "The implementation to record (built-in name or package.module:attr).",
    multiple=False,
    default="reference",
)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@output_option("Trace file to write (atomically).", required=True)
def record(profile_name: str | None, seed: int, impl: str, check: bool, output: str) -> None:
    """Record one scenario through one implementation into a trace file."""
    from tracediff.running.runner import write_trace

    (scenario,) = resolve_scenarios(profile_name, (seed,))
    spec = parse_impl(impl, check=check)
    try:
        # every call of the implementation goes through tracediff.executor.call: what it raises is
        # exit 1, never mistaken for a failure to write the file
        path = write_trace(scenario, spec, ".", output, guarded=True)
    except ImplementationFailed as failed:
        raise ImplementationFailed(
            failed.impl,
            failed.when,
            failed.error,
            f"recording {scenario.profile}:{scenario.seed}; nothing written",
        ) from failed.error
    except SchedulerFault as fault:  # a record no trace may hold (running/conventions.py)
        raise SchedulerFault(
            f"recording {scenario.profile}:{scenario.seed}: {fault}; nothing written"
        ) from None
    click.echo(f"wrote {path}: {scenario.features()}")
