"""``tracediff replay``: re-drive an implementation from a trace and check every decision."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from tracediff.cli.app import EXIT_FINDING, EXIT_OK, emit_json, main, resolve_impls
from tracediff.cli.output import text_console
from tracediff.cli.params import impl_option, json_to_option
from tracediff.errors import UsageError
from tracediff.report.describe import plural

VALUE_WIDTH = 200


@main.command()
@click.argument("trace", type=click.Path(dir_okay=False))
@impl_option(
    "Implementation to replay into: built-in name, package.module:attr, entry point, or "
    "'exec:COMMAND' (docs/protocol.md) (default reference). Give two with --state to see both "
    "states side by side and the first field at which they differ."
)
@click.option("--check", is_flag=True, help="Check mode for optimized.")
@click.option(
    "--until",
    type=int,
    default=None,
    help="Stop at this plan number (after checking it) and show the state before it.",
)
@click.option(
    "--state",
    "show_state",
    is_flag=True,
    help="Show the implementation's state: before plan --until, before a mismatching plan, "
    "or at the end.",
)
@json_to_option("The result (and state)")
def replay(
    trace: str,
    impls: tuple[str, ...],
    check: bool,
    until: int | None,
    show_state: bool,
    json_path: str | None,
) -> None:
    """Feed TRACE's recorded inputs to an implementation and compare its decisions.

    Arrivals and completions are applied at their recorded clock times and each recorded
    plan record becomes a plan(now) call; every plan and retirement the implementation
    makes must equal the recorded one byte for byte. Exit 0 when all do, 1 at the first
    that does not (or when the implementation raises), 2 on bad input.
    """
    from tracediff.replay import MATCH, MISMATCH
    from tracediff.replay import replay as run_replay

    if until is not None and until < 1:
        raise UsageError(f"--until must be a plan number (1 or more), got {until}")
    _use_trace_model(trace)
    if len(impls) > 2:
        raise UsageError(f"--impl takes one implementation, or two to compare; got {len(impls)}")
    if len(impls) == 2:
        if not show_state:
            raise UsageError("two --impl compare states: add --state (and --until N)")
        _replay_pair(trace, impls, check, until, json_path)
        return
    impl = impls[0] if impls else "reference"
    (spec,) = resolve_impls((impl,), check, ("reference",))
    want_state = show_state or until is not None
    result = run_replay(trace, spec, until=until, want_state=want_state)
    if result.status == MATCH and until is not None and not result.stopped:
        raise UsageError(
            f"{trace} has no plan {until} (it has {plural(result.plans, 'plan')}); "
            "pass a smaller --until"
        )
    if json_path is not None:
        emit_json(json_path, json.dumps(result.to_dict(), indent=1))
        sys.exit(EXIT_OK if result.ok else EXIT_FINDING)
    console = text_console()
    if result.status == MATCH:
        if result.stopped:
            console.print(
                f"identical up to plan {until}: {result.decisions:,} decisions of {spec.name} "
                f"match {trace} ({result.records:,} records)",
                style="bold green",
            )
        else:
            console.print(
                f"identical: {spec.name} makes all {result.decisions:,} decisions of {trace} "
                f"({result.plans:,} plans, {result.records:,} records)",
                style="bold green",
            )
        if result.plan_record is not None:
            from tracediff.trace import TraceReader
            from tracediff.trace.checked import trace_model

            summary = trace_model(TraceReader(trace)).decision_summary(result.plan_record)
            console.print(summary, markup=False)
    elif result.status == MISMATCH:
        assert result.mismatch is not None
        m = result.mismatch
        console.print(
            f"MISMATCH at record {m.index} (plan {m.plan}, {m.record_type} record): {m.reason}",
            style="bold red",
        )
        if m.field is not None:
            expected, actual = m.values()
            console.print(f"  field    {m.field}", markup=False)
            console.print(f"  recorded {_short(expected)}", markup=False)
            console.print(f"  replayed {_short(actual)}", markup=False)
        elif m.actual is None:
            console.print(f"  recorded {_short(m.expected)}", markup=False)
        else:
            console.print(f"  {spec.name}: {_short(m.actual)}", markup=False)
        if m.plan is not None and not want_state:
            console.print(
                f"  inspect: tracediff replay {trace} --impl {impl} --until {m.plan} --state",
                markup=False,
            )
    else:
        console.print(
            f"ERROR: {spec.name} raised at record {result.error_index} "
            f"(plan {result.error_plan}): {result.message}",
            style="bold red",
            markup=False,
        )
    if want_state:
        if result.state is not None:
            from tracediff.report.state import present_state
            from tracediff.trace import TraceReader
            from tracediff.trace.checked import trace_model

            model = trace_model(TraceReader(trace))  # the trace's own model lays it out
            console.print(present_state(model, result.state, f"{spec.name} {result.state_at}"))
        elif result.state_at:
            console.print(f"state {result.state_at}", markup=False)
    sys.exit(EXIT_OK if result.ok else EXIT_FINDING)


def _use_trace_model(trace: str) -> None:
    """Make the trace's own model the one in effect, so that ``--impl`` names (``reference``)
    are its implementations: a trace is replayed by its model, and another model's
    ``reference`` would be blamed for not taking its scenario. A ``--model`` (or
    ``$TRACEDIFF_MODEL``) naming another model than the trace's is refused (exit 2)."""
    from tracediff.project import MODEL_ENV, current_model
    from tracediff.trace import TraceReader
    from tracediff.trace.checked import trace_model

    wanted = trace_model(TraceReader(trace)).name
    current = current_model().name
    if wanted == current:
        return
    if os.environ.get(MODEL_ENV, "").strip():
        raise UsageError(
            f"{trace} is a trace of the model {wanted!r}, not of {current!r} (--model or "
            f"${MODEL_ENV}); replay it with --model {wanted}, or without --model"
        )
    os.environ[MODEL_ENV] = wanted  # as --model does: every resolution sees it


def _replay_pair(
    trace: str, impls: tuple[str, ...], check: bool, until: int | None, json_path: str | None
) -> None:
    """Both implementations replayed to the same point; their states side by side."""
    from tracediff.replay import MATCH
    from tracediff.replay import replay as run_replay
    from tracediff.report.describe import short, state_field_words
    from tracediff.report.state import state_pair_table
    from tracediff.running.state import state_difference

    specs = resolve_impls(impls, check, ("reference",))
    results = [run_replay(trace, spec, until=until, want_state=True) for spec in specs]
    if until is not None and all(r.status == MATCH and not r.stopped for r in results):
        raise UsageError(
            f"{trace} has no plan {until} (it has {results[0].plans} plans); pass a smaller --until"
        )
    states = [r.state for r in results]
    difference = None
    if states[0] is not None and states[1] is not None:
        difference = state_difference(states[0], states[1])
    if json_path is not None:
        data = {
            "format": "tracediff-replay-states",
            "version": 1,
            "trace": trace,
            "until": until,
            "replays": [r.to_dict() for r in results],
            "state_difference": None
            if difference is None
            else {"field": difference[0], "a": difference[1], "b": difference[2]},
        }
        emit_json(json_path, json.dumps(data, indent=1))
        sys.exit(EXIT_OK if difference is None else EXIT_FINDING)
    console = text_console()
    for spec, result in zip(specs, results, strict=True):
        verdict = "matches the trace" if result.ok else f"{result.status} at record "
        if not result.ok:
            verdict += str(
                result.mismatch.index if result.mismatch is not None else result.error_index
            )
        console.print(f"{spec.name}: {verdict}; state {result.state_at}", markup=False)
    if difference is None:
        console.print("states agree", style="bold green")
    else:
        field, a, b = difference
        console.print(
            f"state differs: {field} ({state_field_words(field)}): {short(a)} vs {short(b)}",
            style="bold red",
            markup=False,
        )
    console.print(state_pair_table(specs[0].name, specs[1].name, states[0], states[1]))
    sys.exit(EXIT_OK if difference is None else EXIT_FINDING)


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 3] + "..."
