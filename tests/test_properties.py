"""Property tests of the scheduler model over generated scenarios (Hypothesis).

The worker loop's invariants, checked against the reference's *trace* (one round in flight
per host-stop lane, never past ``max_new``, every request retired once, state drained at
the end), determinism, feature coverage and the scenario strategies themselves. The
[fixed] rules of each plan (caps, allocation, pruning, the winner, probes, credit, refresh,
durations and the table) are re-derived from the spec in tests/test_spec_rules.py.

``TRACEDIFF_PROPERTY_EXAMPLES`` sets the examples per property (default 50).
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, find, given, settings
from rich.console import Console

from tracediff.campaign.clauses import coverage, coverage_from_dict, coverage_to_dict
from tracediff.cli import main
from tracediff.models.specdec.coverage import FEATURES, INFORMATIONAL, analyse_trace, feature_counts
from tracediff.models.specdec.engine.driver import drive
from tracediff.models.specdec.scenario.model import RequestSpec, Scenario, SchedulerParams
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.scenario.strategies import request_specs, scenarios, scheduler_params
from tracediff.models.specdec.sched.core import DECODING, RETIRED
from tracediff.models.specdec.sched.record import COLUMNS, rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.report.coverage import coverage_renderable
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


EL, RO, LN = (_columns(t) for t in ("eligible", "round", "lanes"))


def run(scenario: Scenario) -> tuple[list[dict[str, Any]], ReferenceScheduler]:
    """The reference's records for a scenario (header first) and the scheduler at the end."""
    scheduler = ReferenceScheduler(scenario)
    return list(drive(scenario, scheduler)), scheduler


def plans(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan records, their typed tables read as rows."""
    return [rows_view(r) for r in records if r.get("t") == "plan"]


def in_flight_walk(
    records: list[dict[str, Any]],
    on_plan: Callable[[dict[str, Any], dict[int, list[list[Any]]]], None],
) -> None:
    """Call ``on_plan(plan, rounds in flight before it)`` for each plan, following
    submissions (plan records with a round) and completions."""
    in_flight: dict[int, list[list[Any]]] = {}
    for record in records[1:]:
        if record["t"] == "plan":
            on_plan(rows_view(record), dict(in_flight))
            if record["round"] is not None:
                in_flight[record["plan"]] = record["round"][RO["lanes"]]
        elif record["t"] == "completion":
            in_flight.pop(record["round"])
    assert not in_flight


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
# which only seeds 72..107 of its matrix do; 108 and 124 are exact-floats seeds, where the
# refresh tolerance and probe funding meet with equality).
COVERING_SEEDS = (8, 16, 21, 35, 53, 72, 101, 108, 124)


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
