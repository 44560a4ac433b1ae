"""Every [fixed] rule, re-derived from the spec's words and checked against the reference.

``tests/spec_oracle.py`` is a second, independent reading of docs/scheduler.md: it follows a
trace with state of its own and derives each plan record (eligibility, caps, curves, the
prefill row, candidates, allocation, E, shapes, durations and the table, pruning, the
winner, credit, acceptance probes, refresh, the round, lane values) and each retirement,
comparing them with what the reference recorded, bit for bit. It imports nothing from
``tracediff.models.specdec.sched``, so a mistake shared by the formulas module and both
implementations
still shows here. The records are the contract: the reference is only run, never read.

Scenarios come from the Hypothesis strategies (with the generator's tie-making regimes:
exact acceptance, quantised durations, a linear cost) and from profile seeds; they reach
batch buckets of 8, 12 and 16. ``TRACEDIFF_PROPERTY_EXAMPLES`` sets the examples per
property (default 30).
"""

from __future__ import annotations

import dataclasses
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from tests.spec_oracle import OracleStats, check_trace
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario, SchedulerParams
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.scenario.strategies import scenarios, scheduler_params
from tracediff.project.impls import parse_impl
from tracediff.running.runner import trace_records

EXAMPLES = int(os.environ.get("TRACEDIFF_PROPERTY_EXAMPLES", "30"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
REFERENCE = parse_impl("reference")


@st.composite
def tie_params(draw: st.DrawFn) -> SchedulerParams:
    """Scheduler parameters with the regimes that make exact ties: acceptance 1.0 (whole
    expected tokens), durations on a coarse quantum (and a refresh period met exactly), a
    prior proportional to the padded tokens."""
    params: SchedulerParams = draw(scheduler_params())
    if draw(st.booleans()):
        params = dataclasses.replace(params, alpha=1.0)
    quantum = draw(st.sampled_from([1, 1000, 2000, 4000]))
    if quantum > 1:
        period = draw(st.sampled_from([params.refresh_period_us, 50_000, 100_000]))
        period = -(-period // quantum) * quantum if draw(st.booleans()) else period
        params = dataclasses.replace(params, duration_quantum_us=quantum, refresh_period_us=period)
    if draw(st.booleans()):
        rate = draw(st.sampled_from([100, 200, 400]))
        params = dataclasses.replace(params, base_us=0, lane_us=0, token_us=rate)
    return params


@st.composite
def batch_params(draw: st.DrawFn) -> SchedulerParams:
    """As ``tie_params`` on the default buckets and lane count, so that 8 to 16 requests
    make batches of 8 and more."""
    params: SchedulerParams = draw(tie_params())
    defaults = SchedulerParams()
    eager = tuple(
        shape
        for shape in params.eager_shapes
        if shape[1] in defaults.batch_buckets
        and (shape[0] == 0 or shape[2] in defaults.token_buckets)
    )
    return dataclasses.replace(
        params,
        batch_buckets=defaults.batch_buckets,
        token_buckets=defaults.token_buckets,
        max_lanes=defaults.max_lanes,
        eager_shapes=eager,
    )


def _check(scenario: Scenario) -> OracleStats:
    records = list(trace_records(scenario, REFERENCE))
    stats = check_trace(scenario, records)
    target(float(stats.max_b_pad), label="largest B_pad")
    return stats


@PROPERTY
@given(scenarios(max_requests=6, max_new=40, prompt_len=1200, params=tie_params()))
def test_small_scenarios_follow_every_rule(scenario: Scenario) -> None:
    _check(scenario)


@PROPERTY
@given(
    scenarios(
        min_requests=10,
        max_requests=16,
        max_new=40,
        prompt_len=256,
        arrival_window_us=10_000,
        params=batch_params(),
    )
)
def test_batches_of_8_and_12_follow_every_rule(scenario: Scenario) -> None:
    _check(scenario)


# Quick-profile seeds of 16 and 32 requests whose regimes make the tie-breaks decide; between
# them every rule below decides at least once (the test says so if the generator changes).
PROFILE_SEEDS = (22, 56, 64, 91)

# What the oracle must have seen decide over PROFILE_SEEDS: otherwise the check above them
# is weaker than it looks.
MUST_DECIDE = (
    "a host-stop lane held back",
    "no token left: not a lane",
    "cap by 7",
    "cap by remaining - 1",
    "cap by offer",
    "cap by offer (device lane)",
    "cap by grammar cap",
    "winner over another by value",
    "winner over another by duration",
    "winner over another by cohort",
    "winner over another by width",
    "winner over another by order",
    "pruned by E",
    "pruned by duration",
    "pruned by both",
    "pruned by tie on width",
    "pruned by tie on bound",
    "pruned: first of several dominators",
    "rank cut by survival",
    "rank cut by depth",
    "rank cut by slot",
    "probe chosen by trials",
    "probe chosen by cost",
    "probe chosen by position",
    "probe removes a slot",
    "probe removes nothing",
    "probe past the bound",
    "probe unfunded",
    "probe not offered: does not fit",
    "trials exactly probe_min_trials: no probe",
    "credit at its cap",
    "refresh accepted",
    "refresh rejected",
    "a shape observed exactly refresh_period ago",
    "table: first observation",
    "table: updated",
    "table: prefill cost taken off",
)


def test_profile_scenarios_follow_every_rule_and_make_each_decide() -> None:
    profile = load_profile("quick")
    stats = OracleStats()
    for seed in PROFILE_SEEDS:
        scenario = generate(profile, seed)
        check_trace(scenario, list(trace_records(scenario, REFERENCE)), stats)
    silent = [what for what in MUST_DECIDE if not stats.counts[what]]
    assert not silent, f"update PROFILE_SEEDS: on quick {PROFILE_SEEDS} {silent} never decided"
    assert stats.max_b_pad >= 16


# The oracle is only worth its keep if it tells a wrong trace from a right one: each
# deliberately broken implementation of tests/impls/ (one clause of one rule changed) on a
# quick seed where it diverges from the reference, named by the rule that catches it.
BROKEN = [
    ("mutants:SwappedTieBreakScheduler", 78, "the winner rule"),
    ("mutants:FirstAtBestValueScheduler", 78, "the winner rule"),
    ("mutants:WidthBeforeDurationScheduler", 78, "the winner rule"),
    ("tiebreak:TieBreakScheduler", 0, "the winner rule"),
    ("mutants:FreshAtPeriodScheduler", 56, "timing probe"),
    ("mutants:ProbeTrialsOffByOneScheduler", 6, "acceptance probes"),
    ("mutants:PruneKeepsEqualScheduler", 26, "padding pruning"),
    ("mutants:TableTruncatesScheduler", 3, "duration: table"),
    ("summation:ReversedSumScheduler", 12, "E: lane values left to right"),
    ("slot_tiebreak:SlotTieBreakScheduler", 17, "the chosen round"),
    ("stale_advance:StaleAdvanceScheduler", 37, "the cap min"),
    ("eager_prune:EagerPruneScheduler", 3, "padding pruning"),
    ("skewed:SkewedScheduler", 1, "credit accrual and payment"),
]


@pytest.mark.parametrize(
    ("impl", "seed", "rule"), [pytest.param(*b, id=b[0].split(":")[1]) for b in BROKEN]
)
def test_the_oracle_rejects_a_trace_that_breaks_one_rule(impl: str, seed: int, rule: str) -> None:
    scenario = generate(load_profile("quick"), seed)
    records = trace_records(scenario, parse_impl(f"tests.impls.{impl}"))
    with pytest.raises(AssertionError, match=re.escape(rule)):
        check_trace(scenario, records)
