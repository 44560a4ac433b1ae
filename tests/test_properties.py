"""Property tests of the scheduler model over generated scenarios (Hypothesis).

Each property is checked against the reference's *trace* (what any implementation must
reproduce), recomputed independently from the recorded rows where it can be: budgets,
caps and bounds, the allocation itself, the winner rule, padding pruning, probe choice and
credit, the worker loop's invariants (one round in flight per host-stop lane, never past
``max_new``, every request retired once, state drained at the end) and determinism.

``TRACEDIFF_PROPERTY_EXAMPLES`` sets the examples per property (default 50).
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, find, given, settings
from rich.console import Console

from tracediff.cli import main
from tracediff.coverage import (
    FEATURES,
    INFORMATIONAL,
    analyse_trace,
    coverage,
    coverage_from_dict,
    coverage_to_dict,
    feature_counts,
)
from tracediff.engine.driver import drive
from tracediff.report.coverage import coverage_renderable
from tracediff.scenario.model import MAX_DRAFT, RequestSpec, Scenario, SchedulerParams
from tracediff.scenario.profiles import load_profile
from tracediff.scenario.strategies import request_specs, scenarios, scheduler_params
from tracediff.sched import formulas as F
from tracediff.sched.core import DECODING, RETIRED
from tracediff.sched.record import COLUMNS, SOURCE_PROBE, SOURCE_REFRESH, SOURCE_WINNER
from tracediff.sched.reference import ReferenceScheduler
from tracediff.trace import encode

EXAMPLES = int(os.environ.get("TRACEDIFF_PROPERTY_EXAMPLES", "50"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,  # no .hypothesis directory left behind
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SMALL = scenarios(max_requests=6, max_new=40, prompt_len=1200)


def _columns(table: str) -> dict[str, int]:
    return {name: i for i, name in enumerate(COLUMNS[table])}


EL, CA, PR, PB, RO, LN = (
    _columns(t) for t in ("eligible", "candidates", "pruned", "probes", "round", "lanes")
)


def run(scenario: Scenario) -> tuple[list[dict[str, Any]], ReferenceScheduler]:
    """The reference's records for a scenario (header first) and the scheduler at the end."""
    scheduler = ReferenceScheduler(scenario)
    return list(drive(scenario, scheduler)), scheduler


def plans(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r.get("t") == "plan"]


@dataclass(frozen=True)
class Cand:
    id: int
    kind: int
    cohort: int
    prefill: bool
    bound: int
    b_pad: int
    width: int
    prefixes: list[int]
    expected: float
    duration: int
    value: float
    budget: int

    @property
    def group(self) -> tuple[int, int, bool]:
        return (self.kind, self.cohort, self.prefill)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.b_pad, self.width, self.bound)

    def key(self) -> tuple[float, int, int, int, int, int, bool, int]:
        return F.winner_key(
            self.value,
            self.duration,
            self.cohort,
            self.b_pad,
            self.width,
            self.kind,
            self.prefill,
            self.id,
        )


def candidates(plan: dict[str, Any]) -> list[Cand]:
    return [Cand(*(row[CA[name]] for name in COLUMNS["candidates"])) for row in plan["candidates"]]


def token_budgets(plan: dict[str, Any], scenario: Scenario) -> dict[int, int]:
    """Each candidate's verification budget: the whole budget for rect candidates; for ragged
    ones min(verify_budget, T), T the token bucket it was built for.

    Derived independently of the recorded ``budget`` column, from candidate order (the token
    buckets >= the cohort in ascending order within each (kind, cohort, prefill row) group),
    and checked against it.
    """
    params = scenario.params
    budgets: dict[int, int] = {}
    ragged: dict[tuple[int, int, bool], list[Cand]] = defaultdict(list)
    for cand in candidates(plan):
        if cand.kind == F.RECT:
            budgets[cand.id] = params.verify_budget
        else:
            ragged[cand.group].append(cand)
    for (_kind, cohort, _prefill), group in ragged.items():
        buckets = [t for t in params.token_buckets if t >= cohort]
        assert len(group) == len(buckets), "one ragged candidate per token bucket >= cohort"
        for cand, tokens in zip(sorted(group, key=lambda c: c.id), buckets, strict=True):
            budgets[cand.id] = min(params.verify_budget, tokens)
    for cand in candidates(plan):
        if cand.cohort:
            assert cand.budget == budgets[cand.id], f"candidate {cand.id} records its budget"
    return budgets


def tokens(prefixes: list[int]) -> int:
    return sum(1 + p for p in prefixes)


def allocate(rows: list[list[Any]], bound: int, budget: int) -> list[int]:
    """SCHEDULER.md's allocation, written again from the spec over recorded eligible rows."""
    left = budget - len(rows)
    prefixes = [0] * len(rows)
    for i, row in enumerate(rows):
        fixed = row[EL["fixed_width"]]
        if fixed >= 0:
            take = min(fixed, row[EL["cap"]], bound, left)
            prefixes[i] = take
            left -= take
    slots = sorted(
        (-row[EL["curve"]][depth - 1], depth, row[EL["slot"]], i)
        for i, row in enumerate(rows)
        if row[EL["fixed_width"]] < 0
        for depth in range(1, min(bound, row[EL["cap"]]) + 1)
    )
    taken: dict[int, list[int]] = defaultdict(list)
    for _survival, depth, _slot, i in slots[: max(left, 0)]:
        taken[i].append(depth)
    for i, depths in taken.items():
        # Contiguous: a lane's taken depths are exactly 1..p.
        assert sorted(depths) == list(range(1, len(depths) + 1)), (i, depths)
        prefixes[i] = len(depths)
    return prefixes


def expected_tokens(rows: list[list[Any]], prefixes: list[int]) -> float:
    """E summed over the cohort in priority order, each lane's value left to right."""
    total = 0.0
    for row, prefix in zip(rows, prefixes, strict=True):
        value = 1.0
        for k in range(prefix):
            value = value + row[EL["curve"]][k]
        total = total + value
    return total


def in_flight_walk(
    records: list[dict[str, Any]],
    on_plan: Callable[[dict[str, Any], dict[int, list[list[Any]]]], None],
) -> None:
    """Call ``on_plan(plan, rounds in flight before it)`` for each plan, following
    submissions (plan records with a round) and completions."""
    in_flight: dict[int, list[list[Any]]] = {}
    for record in records[1:]:
        if record["t"] == "plan":
            on_plan(record, dict(in_flight))
            if record["round"] is not None:
                in_flight[record["plan"]] = record["round"][RO["lanes"]]
        elif record["t"] == "completion":
            in_flight.pop(record["round"])
    assert not in_flight


# -- budgets, caps, allocation -----------------------------------------------------------------
@PROPERTY
@given(SMALL)
def test_the_verification_budget_is_never_exceeded(scenario: Scenario) -> None:
    params = scenario.params
    for plan in plans(run(scenario)[0]):
        budgets = token_budgets(plan, scenario)
        by_id = {c.id: c for c in candidates(plan)}
        for cand in by_id.values():
            assert tokens(cand.prefixes) <= budgets[cand.id] <= params.verify_budget
            if cand.kind == F.RAGGED and cand.cohort:
                assert tokens(cand.prefixes) <= cand.width
        round_ = plan["round"]
        if round_ is None:
            continue
        used = tokens([lane[LN["prefix"]] for lane in round_[RO["lanes"]]])
        assert used <= params.verify_budget
        source = round_[RO["source"]]
        built_from = plan["refresh"] if source == SOURCE_REFRESH else plan["winner"]
        if round_[RO["lanes"]]:
            assert used <= budgets[built_from]  # a probe stays within the winner's budget
            if round_[RO["kind"]] == F.RAGGED:
                assert used <= round_[RO["width"]]


@PROPERTY
@given(SMALL)
def test_prefixes_are_the_contiguous_allocation_within_caps_and_bounds(
    scenario: Scenario,
) -> None:
    params = scenario.params
    for plan in plans(run(scenario)[0]):
        rows = plan["eligible"]
        for row in rows:
            curve = row[EL["curve"]]
            assert len(curve) == MAX_DRAFT
            assert all(0.0 <= s <= 1.0 for s in curve)
            assert all(a >= b for a, b in zip(curve, curve[1:], strict=False)), "monotone"
            assert 0 <= row[EL["cap"]] <= MAX_DRAFT
        budgets = token_budgets(plan, scenario)
        sizes: dict[tuple[int, bool], list[int]] = defaultdict(list)
        for cand in candidates(plan):
            if cand.cohort and cand.cohort not in sizes[(cand.kind, cand.prefill)]:
                sizes[(cand.kind, cand.prefill)].append(cand.cohort)
            cohort = rows[: cand.cohort]
            for row, prefix in zip(cohort, cand.prefixes, strict=True):
                assert 0 <= prefix <= min(row[EL["cap"]], cand.bound)
                if row[EL["fixed_width"]] >= 0:
                    assert prefix <= row[EL["fixed_width"]]
            assert cand.prefixes == allocate(cohort, cand.bound, budgets[cand.id])
            assert cand.expected == expected_tokens(cohort, cand.prefixes)
            if cand.cohort:
                assert cand.b_pad == F.bucket(params.batch_buckets, cand.cohort)
                if cand.kind == F.RECT:
                    assert cand.width == max(cand.prefixes)
                else:
                    assert cand.width == F.bucket(params.token_buckets, tokens(cand.prefixes))
                    assert cand.bound == MAX_DRAFT
        for found in sizes.values():
            assert found == F.cohort_sizes(params, len(rows))
        round_ = plan["round"]
        if round_ is None:
            continue
        caps = {row[EL["request"]]: row[EL["cap"]] for row in rows}
        lanes = round_[RO["lanes"]]
        # The round's lanes are the leading cohort in priority order.
        assert [lane[LN["request"]] for lane in lanes] == [
            row[EL["request"]] for row in rows[: len(lanes)]
        ]
        for lane in lanes:
            assert 0 <= lane[LN["prefix"]] <= caps[lane[LN["request"]]]


# -- the worker loop -----------------------------------------------------------------------------
@PROPERTY
@given(SMALL)
def test_a_host_stop_lane_never_has_two_rounds_in_flight(scenario: Scenario) -> None:
    host_stop = {r.id for r in scenario.requests if r.host_stop}

    def check(plan: dict[str, Any], in_flight: dict[int, list[list[Any]]]) -> None:
        busy = Counter(lane[LN["request"]] for lanes in in_flight.values() for lane in lanes)
        assert all(busy[rid] <= 1 for rid in host_stop)
        for row in plan["eligible"]:
            if row[EL["request"]] in host_stop:
                assert busy[row[EL["request"]]] == 0, "eligible while a round is in flight"

    in_flight_walk(run(scenario)[0], check)


@PROPERTY
@given(SMALL)
def test_no_request_generates_past_max_new_and_each_reaches_its_limit(
    scenario: Scenario,
) -> None:
    generated: Counter[int] = Counter()
    specs = {r.id: r for r in scenario.requests}
    for record in run(scenario)[0][1:]:
        if record["t"] == "completion":
            for request, _verified, _accepted, added, _finished, _offer in record["lanes"]:
                generated[request] += added
                assert generated[request] <= specs[request].max_new
    for rid, spec in specs.items():
        limit = spec.max_new if spec.stop_at < 0 else min(spec.max_new, spec.stop_at)
        assert generated[rid] == limit


@PROPERTY
@given(SMALL)
def test_pending_counts_and_advances_return_to_zero_when_the_queue_drains(
    scenario: Scenario,
) -> None:
    _records, scheduler = run(scenario)
    assert scheduler.submitted == {}
    assert set(scheduler.requests) == {r.id for r in scenario.requests}
    for state in scheduler.requests.values():
        assert state.phase == RETIRED
        assert state.pending_count == 0
        assert scheduler.pending_advance(state) == 0
        assert state.tracked_advance == 0
        assert not state.prefill_in_flight
    assert scheduler.free_slots == list(range(scenario.params.max_lanes))
    assert 0.0 <= scheduler.credit <= max(scenario.params.credit_cap, 0.0)


@PROPERTY
@given(SMALL)
def test_every_request_retires_exactly_once(scenario: Scenario) -> None:
    retired = [rid for r in run(scenario)[0][1:] if r["t"] == "retire" for rid in r["requests"]]
    assert sorted(retired) == sorted(r.id for r in scenario.requests)


# -- selection: winner, pruning, probes ------------------------------------------------------------
@PROPERTY
@given(SMALL)
def test_the_chosen_round_is_the_best_unpruned_candidate(scenario: Scenario) -> None:
    params = scenario.params
    for plan in plans(run(scenario)[0]):
        cands = candidates(plan)
        round_ = plan["round"]
        if not cands:
            assert plan["winner"] == -1 and round_ is None
            continue
        pruned = {row[PR["id"]] for row in plan["pruned"]}
        alive = [c for c in cands if c.id not in pruned]
        winner = min(alive, key=Cand.key)
        assert plan["winner"] == winner.id
        source = round_[RO["source"]]
        assert source in (SOURCE_WINNER, SOURCE_PROBE, SOURCE_REFRESH)
        chosen = winner
        if source == SOURCE_REFRESH:
            chosen = cands[plan["refresh"]]
            assert chosen.id in {c.id for c in alive} and chosen.group == winner.group
            assert chosen.value >= winner.value * (1.0 - params.refresh_tolerance)
            assert plan["probe"] == -1
        else:
            assert plan["refresh"] == -1
        if source == SOURCE_PROBE:
            continue
        lanes = round_[RO["lanes"]]
        assert [lane[LN["prefix"]] for lane in lanes] == chosen.prefixes
        assert (round_[RO["kind"]], round_[RO["b_pad"]], round_[RO["width"]]) == (
            chosen.kind,
            chosen.b_pad,
            chosen.width,
        )
        assert round_[RO["expected"]] == chosen.expected
        assert round_[RO["duration"]] == chosen.duration
        assert (round_[RO["prefill_request"]] >= 0) == chosen.prefill


@PROPERTY
@given(SMALL)
def test_pruned_candidates_are_dominated_by_their_recorded_dominator(scenario: Scenario) -> None:
    for plan in plans(run(scenario)[0]):
        cands = candidates(plan)
        by_id = {c.id: c for c in cands}
        pruned = {row[PR["id"]]: row[PR["by"]] for row in plan["pruned"]}
        assert [row[PR["id"]] for row in plan["pruned"]] == sorted(pruned)
        for x in cands:
            group = [y for y in cands if y.group == x.group and y.id != x.id]
            dominators = [
                y.id
                for y in group
                if F.dominates(y.expected, y.duration, y.shape, x.expected, x.duration, x.shape)
            ]
            if x.id in pruned:
                by = by_id[pruned[x.id]]
                assert by.group == x.group
                # The first dominator in candidate order is the one recorded.
                assert dominators and dominators[0] == by.id
            else:
                assert not dominators


@PROPERTY
@given(SMALL)
def test_acceptance_probes_are_chosen_and_paid_for_by_the_rule(scenario: Scenario) -> None:
    params = scenario.params
    for plan in plans(run(scenario)[0]):
        if plan["round"] is None:
            assert plan["credit_after"] == plan["credit_before"]
            continue
        winner = candidates(plan)[plan["winner"]]
        credit = F.accrue_credit(params, plan["credit_before"], winner.expected)
        rows = plan["eligible"]
        probes = plan["probes"]
        for probe in probes:
            row = rows[probe[PB["position"]]]
            assert probe[PB["request"]] == row[EL["request"]]
            assert row[EL["fixed_width"]] < 0
            assert probe[PB["depth"]] == winner.prefixes[probe[PB["position"]]] + 1
            assert probe[PB["depth"]] <= row[EL["cap"]]
            assert probe[PB["trials"]] < params.probe_min_trials
            assert probe[PB["expected"]] == winner.expected + probe[PB["gain"]]
            assert probe[PB["cost"]] == F.probe_cost(
                winner.expected, winner.duration, probe[PB["expected"]], probe[PB["duration"]]
            )
        affordable = [i for i, p in enumerate(probes) if p[PB["cost"]] <= credit]
        if not affordable:
            assert plan["probe"] == -1
            assert plan["credit_after"] == credit
            continue
        chosen = min(
            affordable,
            key=lambda i: (
                probes[i][PB["trials"]],
                probes[i][PB["cost"]],
                probes[i][PB["position"]],
            ),
        )
        assert plan["probe"] == chosen
        probe = probes[chosen]
        assert plan["credit_after"] == credit - max(probe[PB["cost"]], 0.0)
        round_ = plan["round"]
        assert round_[RO["source"]] == SOURCE_PROBE
        prefixes = [lane[LN["prefix"]] for lane in round_[RO["lanes"]]]
        assert prefixes[probe[PB["position"]]] == probe[PB["depth"]]
        assert round_[RO["expected"]] == probe[PB["expected"]]
        assert round_[RO["duration"]] == probe[PB["duration"]]
        for position, (row, prefix) in enumerate(zip(rows, prefixes, strict=False)):
            if row[EL["fixed_width"]] >= 0:
                assert prefix == winner.prefixes[position]


# -- determinism ---------------------------------------------------------------------------------
@PROPERTY
@given(SMALL)
def test_the_same_scenario_gives_the_same_trace_bytes_twice(scenario: Scenario) -> None:
    first = [encode(r) for r in run(scenario)[0]]
    again = [encode(r) for r in run(Scenario.from_dict(scenario.to_dict()))[0]]
    assert first == again


# -- coverage ------------------------------------------------------------------------------------
# A handful of quick-profile seeds that between them exercise every feature (found by a greedy
# cover over the whole quick profile, features and rule clauses; seed 72 runs at queue depth 2,
# which only seeds 72..107 of its matrix do).
COVERING_SEEDS = (8, 16, 21, 35, 53, 72, 101)


class _Observed(ReferenceScheduler):
    """The reference, counting from its own state what coverage derives from records."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.seen: Counter[str] = Counter()

    def plan(self, now: int) -> dict[str, Any]:
        held = any(
            s.spec.host_stop
            and s.phase == DECODING
            and s.pending_count > 0
            and s.spec.max_new - s.generated - self.pending_advance(s) >= 1
            for s in self.requests.values()
        )
        self.seen["host-stop held back"] += held
        self.seen["queued round"] += len(self.submitted) >= 1
        self.seen["two rounds queued"] += len(self.submitted) >= 2
        return super().plan(now)


@PROPERTY
@given(SMALL)
def test_coverage_derived_from_records_agrees_with_the_scheduler_state(
    scenario: Scenario,
) -> None:
    scheduler = _Observed(scenario)
    records = list(drive(scenario, scheduler))
    result = analyse_trace(records)
    counts = result.counts
    assert list(counts) == list(FEATURES)
    for feature, seen in scheduler.seen.items():
        assert counts[feature] == seen, feature
    all_plans = plans(records)
    assert result.plans == len(all_plans)
    assert counts["no round"] == sum(1 for p in all_plans if p["round"] is None)
    assert counts["pruned candidates"] == sum(1 for p in all_plans if p["pruned"])
    assert counts["retirement"] == sum(1 for r in records[1:] if r["t"] == "retire")
    bands = [f for f in FEATURES if f.startswith("requests ")]
    assert sorted(counts[b] for b in bands) == [0] * (len(bands) - 1) + [len(all_plans)]
    with_lanes = [p for p in all_plans if p["round"] is not None and p["round"][RO["lanes"]]]
    assert sum(counts[f] for f in INFORMATIONAL) == len(with_lanes)
    assert counts["rect graph"] + counts["ragged graph"] == len(with_lanes)


def test_a_few_quick_seeds_cover_every_feature() -> None:
    report = coverage(load_profile("quick"), COVERING_SEEDS)
    assert report.missing == ()
    assert report.complete
    assert report.seeds == COVERING_SEEDS
    assert [f.name for f in report.features] == list(FEATURES)
    assert report.plans == sum(s.plans for s in report.scenarios) > 0
    for i, feature in enumerate(report.features):
        assert feature.plans == sum(s.counts[i] for s in report.scenarios)
        assert feature.scenarios <= feature.plans
        assert feature.required == (feature.name not in INFORMATIONAL)
        if feature.required:
            assert feature.scenarios > 0


def test_coverage_is_the_same_in_worker_processes_and_reads_back() -> None:
    profile = load_profile("quick")
    alone = coverage(profile, (5, 3, 1))
    pooled = coverage(profile, (5, 3, 1), jobs=2)
    assert alone.seeds == pooled.seeds == (5, 3, 1)  # in the order given
    assert alone.features == pooled.features and alone.scenarios == pooled.scenarios
    data = json.loads(json.dumps(coverage_to_dict(pooled)))
    assert data["format"] == "tracediff-coverage" and data["version"] == 2
    back = coverage_from_dict(data)
    assert back.features == pooled.features and back.scenarios == pooled.scenarios
    assert back.missing == pooled.missing
    with pytest.raises(ValueError, match="version"):
        coverage_from_dict({**data, "version": 99})
    with pytest.raises(ValueError, match="not a tracediff-coverage"):
        coverage_from_dict({"format": "something else"})


def test_one_request_misses_the_features_that_need_several() -> None:
    report = coverage(load_profile("quick"), (0,))
    assert not report.complete  # quick seed 0: 1 request, host allocation, rect, queue 0
    assert report.scenarios[0].features.startswith("1 request, host allocation, rect")
    missing = {"requests 2-4", "allocation mixed", "ragged graph", "queued round"}
    assert missing <= set(report.missing)
    assert "requests 1" not in report.missing and "allocation host" not in report.missing
    with pytest.raises(ValueError, match="header"):
        feature_counts(iter([]))


def test_the_coverage_table_renders_at_a_fixed_width() -> None:
    report = coverage(load_profile("quick"), (0,))
    console = Console(file=io.StringIO(), width=100, color_system=None, highlight=False)
    console.print(coverage_renderable(report))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    for feature in FEATURES:
        assert feature in text
    assert "MISSING: profile quick never exercises" in text


def test_cli_coverage_writes_json_and_exits_0_when_complete(tmp_path: Path) -> None:
    out = tmp_path / "cov.json"
    seeds = ",".join(str(s) for s in COVERING_SEEDS)
    result = CliRunner().invoke(
        main, ["coverage", "--profile", "quick", "--seeds", seeds, "-j", "1", "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "complete: every feature exercised" in result.output
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["missing"] == [] and data["scenarios"] == len(COVERING_SEEDS)
    assert [s["seed"] for s in data["per_scenario"]] == list(COVERING_SEEDS)
    assert coverage_from_dict(data).complete


def test_cli_coverage_exits_1_when_a_feature_is_missing_and_2_on_bad_input(
    tmp_path: Path,
) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["coverage", "--seeds", "0", "-j", "1"])
    assert result.exit_code == 1, result.output
    assert "MISSING" in result.output
    bad = runner.invoke(main, ["coverage", "--seeds", "9..1"])
    assert bad.exit_code == 2 and "bad seed range" in bad.output
    nowhere = runner.invoke(main, ["coverage", "--seeds", "0", "--json", str(tmp_path / "no/x")])
    assert nowhere.exit_code == 2 and "does not exist" in nowhere.output
    unknown = runner.invoke(main, ["coverage", "--profile", "nope"])
    assert unknown.exit_code == 2 and "unknown profile" in unknown.output


# -- the strategies themselves -------------------------------------------------------------------
@PROPERTY
@given(scenarios(max_requests=8))
def test_generated_scenarios_are_valid_and_round_trip(scenario: Scenario) -> None:
    scenario.validate()
    assert Scenario.from_dict(json.loads(json.dumps(scenario.to_dict()))) == scenario
    assert 1 <= len(scenario.requests) <= 8
    assert all(1 <= r.max_new <= 40 and 1 <= r.prompt_len <= 1200 for r in scenario.requests)


@PROPERTY
@given(request_specs(max_new=5), scheduler_params(allocation="mixed", queue_depth=2))
def test_request_and_parameter_strategies_respect_their_arguments(
    spec: RequestSpec, params: SchedulerParams
) -> None:
    assert 1 <= spec.max_new <= 5
    assert params.allocation == "mixed" and params.queue_depth == 2
    assert params.max_lanes <= params.batch_buckets[-1]
    assert params.ragged or not params.eager_shapes


@pytest.mark.parametrize(
    ("feature", "holds"),
    [
        ("host allocation", lambda s: s.params.allocation == "host"),
        ("device allocation", lambda s: s.params.allocation == "device"),
        ("mixed allocation", lambda s: s.params.allocation == "mixed"),
        ("ragged with eager shapes", lambda s: s.params.ragged and s.params.eager_shapes),
        ("rect", lambda s: not s.params.ragged),
        ("queue depth 0", lambda s: s.params.queue_depth == 0),
        ("queue depth 2", lambda s: s.params.queue_depth == 2),
        ("a binding budget", lambda s: s.params.verify_budget < 16),
        ("fewer lanes than requests", lambda s: s.params.max_lanes < len(s.requests)),
        ("grammar", lambda s: any(r.grammar for r in s.requests)),
        ("host stop", lambda s: any(r.host_stop for r in s.requests)),
        ("fixed width", lambda s: any(r.fixed for r in s.requests)),
        ("copy proposer", lambda s: any(r.proposer == "copy" for r in s.requests)),
        ("stop string", lambda s: any(0 <= r.stop_at < r.max_new for r in s.requests)),
        (
            "ids not 0..n-1",
            lambda s: sorted(r.id for r in s.requests) != list(range(len(s.requests))),
        ),
        (
            "every request feature at once",
            lambda s: any(
                r.grammar and r.host_stop and r.fixed and r.proposer == "copy" and r.stop_at >= 0
                for r in s.requests
            ),
        ),
    ],
)
def test_the_scenario_strategy_reaches_every_feature(
    feature: str, holds: Callable[[Scenario], bool]
) -> None:
    found = find(
        scenarios(),
        holds,
        settings=settings(database=None, max_examples=2000, phases=[Phase.generate]),
    )
    assert holds(found), feature
