"""Explaining divergences: where, what kind, which field, and the signature that groups them.

Each deliberately broken implementation in tests/impls/ is run against the reference on a
seed of the quick profile where it diverges, and must come out with the right kind and
signature. Seeds are the smallest (fewest requests) that show each bug, to keep this fast;
the whole quick profile catches every one of them (docs/reports.md lists the counts).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tracediff.compare.fields import classify, record_changes
from tracediff.compare.floats import relative_error, ulp_distance
from tracediff.compare.model import (
    BOOKKEEPING,
    DECISION,
    ERROR,
    ROUNDING,
    STRUCTURE,
    TIMEOUT,
    ContextRow,
    Divergence,
    normalise_path,
)
from tracediff.compare.signature import SLIM_NOTE, Condenser, group_signatures
from tracediff.models.specdec.model import MODEL
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import COLUMNS
from tracediff.project.impls import ImplSpec, parse_impl
from tracediff.running.explain import MAX_EVENTS, explain, explain_many, explain_traces
from tracediff.running.runner import (
    DIVERGED,
    IDENTICAL,
    ImplStats,
    RunOptions,
    ScenarioResult,
    run_scenario,
    run_scenarios,
    trace_records,
    write_trace,
)
from tracediff.trace import encode, trace_bytes

REFERENCE = "reference"


def _specs(impl: str) -> tuple[ImplSpec, ImplSpec]:
    return parse_impl(REFERENCE), parse_impl(impl)


def _explained(impl: str, seed: int, context: int = 5) -> tuple[ScenarioResult, Divergence]:
    scenario = generate(load_profile("quick"), seed)
    specs = _specs(impl)
    result = run_scenario(scenario, specs)
    return result, explain(scenario, specs, result, context)


# -- floats ---------------------------------------------------------------------------------
def test_ulp_distance_counts_representable_doubles() -> None:
    assert ulp_distance(1.0, 1.0) == 0
    assert ulp_distance(1.0, math.nextafter(1.0, 2.0)) == 1
    assert ulp_distance(1.0, math.nextafter(math.nextafter(1.0, 0.0), 0.0)) == 2
    # across zero: the smallest subnormals on each side are two apart, ±0 are equal
    tiny = math.nextafter(0.0, 1.0)
    assert ulp_distance(-tiny, tiny) == 2
    assert ulp_distance(0.0, -0.0) == 0
    assert ulp_distance(-2.0, math.nextafter(-2.0, -3.0)) == 1
    assert ulp_distance(math.nan, 1.0) is None
    assert ulp_distance(0.1 + 0.2, 0.3) == 1


def test_relative_error() -> None:
    assert relative_error(1.0, 1.0) == 0.0
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(2.0, 1.0) == 0.5
    assert relative_error(math.inf, 1.0) is None


# -- field paths ----------------------------------------------------------------------------
def _plan(**fields: Any) -> dict[str, Any]:
    lanes = [[i, i, 2, 1] for i in range(20)]
    record: dict[str, Any] = {
        "t": "plan",
        "plan": 1283,
        "now": 5,
        "eligible": [[0, 0, 3, -1, 1, -1, [0.5, 0.25]]],
        "pruned": [[1, 2], [3, 2]],
        "round": ["winner", 0, 32, 3, -1, 0, lanes, 12.5, 9000],
    }
    record.update(fields)
    return record


def test_row_indices_become_column_names() -> None:
    a = _plan()
    b = _plan()
    b["round"] = [*a["round"][:6], [list(x) for x in a["round"][6]], *a["round"][7:]]
    b["round"][6][17][2] = 3
    (change,) = record_changes(a, b, COLUMNS)
    assert change.path == ("round", "lanes[17]", "prefix")
    assert (change.kind, change.a, change.b) == (DECISION, 2, 3)
    assert normalise_path(("plan 1283", *change.path)) == "plan: round.lanes[*].prefix"


def test_a_float_that_moved_is_a_value_change_with_ulps() -> None:
    a = _plan()
    b = _plan(eligible=[[0, 0, 3, -1, 1, -1, [0.5, math.nextafter(0.25, 1.0)]]])
    (change,) = record_changes(a, b, COLUMNS)
    assert change.path == ("eligible[0]", "curve[1]")
    assert (change.kind, change.ulps) == (ROUNDING, 1)
    assert classify([change]) == ROUNDING


def test_a_table_of_another_length_is_compared_row_by_row() -> None:
    a = _plan(pruned=[[1, 2], [3, 2]])
    b = _plan(pruned=[[3, 2], [5, 2], [6, 2]])
    changes = record_changes(a, b, COLUMNS)
    assert [c.path for c in changes] == [("pruned[0]",), ("pruned[1]",), ("pruned[2]",)]
    assert (changes[0].a, changes[0].b) == ([1, 2], [3, 2])
    assert all(c.kind == DECISION for c in changes)  # no choice fields given: all decisions
    plan_choice = MODEL.choice_fields["plan"]
    assert all(c.kind == BOOKKEEPING for c in record_changes(a, b, COLUMNS, plan_choice))


def test_changes_come_in_record_order_and_decisions_win() -> None:
    a = _plan()
    b = _plan(now=6, pruned=[[1, 2], [3, 1]])
    b["round"] = [*a["round"][:7], 12.75, 9000]
    changes = record_changes(a, b, COLUMNS)
    assert [c.path for c in changes] == [("now",), ("pruned[1]", "by"), ("round", "expected")]
    assert classify(changes) == DECISION


def test_round_marks_come_from_the_header_columns() -> None:
    from tracediff.compare.timeline import round_mark

    mark = round_mark(_plan(), COLUMNS)
    assert mark is not None
    assert (mark.plan, mark.source, mark.b_pad, mark.width, mark.lanes, mark.drafts) == (
        1283,
        "winner",
        32,
        3,
        20,
        40,
    )
    assert mark.shape == "32×3" and mark.prefixes == (2,) * 20
    assert round_mark(_plan(round=None), COLUMNS) is not None  # a plan without a round
    assert round_mark(_plan(), {}) is None  # an unknown schema draws nothing
    assert round_mark({"t": "arrival", "now": 1}, COLUMNS) is None


def test_normalise_path() -> None:
    assert normalise_path(("plan 12", "candidates[3]", "prefixes[0]")) == (
        "plan: candidates[*].prefixes[*]"
    )
    assert normalise_path(("after plan 4", "timed out")) == "after plan: timed out"


# -- the deliberately broken implementations --------------------------------------------------
BROKEN = [
    # (implementation, seed, kind, signature path, headline field below the plan)
    (
        "tests.impls.slot_tiebreak:SlotTieBreakScheduler",
        17,
        DECISION,
        "plan: round.lanes[*].prefix",
    ),
    (
        "tests.impls.summation:ReversedSumScheduler",
        12,
        ROUNDING,
        "plan: candidates[*].expected",
    ),
    (
        "tests.impls.stale_advance:StaleAdvanceScheduler",
        37,
        DECISION,
        "plan: round.lanes[*].prefix",
    ),
    ("tests.impls.eager_prune:EagerPruneScheduler", 3, BOOKKEEPING, "plan: pruned[*]"),
    ("tests.impls.tiebreak:TieBreakScheduler", 0, DECISION, "plan: round.width"),
    ("tests.impls.raises:RaisingScheduler", 0, ERROR, "plan(): raised RuntimeError"),
]


@pytest.mark.parametrize(("impl", "seed", "kind", "path"), BROKEN)
def test_each_broken_implementation_is_caught_and_classified(
    impl: str, seed: int, kind: str, path: str
) -> None:
    result, divergence = _explained(impl, seed)
    assert result.status != IDENTICAL
    assert divergence.kind == kind
    assert divergence.signature.path == path
    assert divergence.label == f"quick:{seed}"
    assert divergence.impls == (REFERENCE, impl)
    assert divergence.plan == result.plan
    assert divergence.path[0] == f"plan {divergence.plan}"
    if kind != ERROR:
        assert divergence.index == result.divergence
        assert divergence.clock is not None
        # the divergent row closes the context, and only it differs
        last = divergence.context[-1]
        assert last.index == divergence.index and not last.same
        assert all(row.same for row in divergence.context[:-1])


def test_value_divergence_reports_ulps_and_no_decision() -> None:
    _result, d = _explained("tests.impls.summation:ReversedSumScheduler", 12)
    assert all(c.kind == ROUNDING for c in d.changes)
    head = d.headline
    assert head is not None and head.ulps is not None and 1 <= head.ulps <= 4
    assert head.rel_error is not None and head.rel_error < 1e-14
    assert ulp_distance(head.a, head.b) == head.ulps
    assert d.max_ulps is not None and d.max_ulps >= head.ulps


def test_error_divergence_keeps_the_traceback_and_the_plan() -> None:
    result, d = _explained("tests.impls.raises:RaisingScheduler", 0)
    assert result.status == "error"
    assert d.plan == 5
    assert d.failed_impl == "tests.impls.raises:RaisingScheduler"
    assert "Traceback" in d.message
    assert "RuntimeError: deliberate failure at plan 5" in d.message
    # the implementation that raised has no record where the reference has plan 5
    last = d.context[-1]
    assert last.a is not None and last.a["plan"] == 5 and last.b is None
    # the timeline shows the rounds of plans 1-4 on both sides, and plan 5 only for A
    assert [m.plan for m in d.timeline_b] == [1, 2, 3, 4]
    assert 5 in [m.plan for m in d.timeline_a]


def test_the_winner_tie_break_is_caught_where_duration_breaks_a_value_tie() -> None:
    # tiebreak.py prefers the longer of two candidates at the same value. Quick seed 0 (exact
    # acceptance, a cost proportional to the padded tokens) ties values exactly, and the
    # first divergence is the plan where the shorter duration decided the reference's winner.
    result, d = _explained("tests.impls.tiebreak:TieBreakScheduler", 0)
    assert result.status == DIVERGED and d.kind == DECISION
    plan_a, plan_b = d.context[-1].a, d.context[-1].b
    assert plan_a is not None and plan_b is not None
    assert plan_a["candidates"] == plan_b["candidates"]  # the same candidates, ...
    assert plan_a["pruned"] == plan_b["pruned"]
    column = {name: i for i, name in enumerate(COLUMNS["candidates"])}
    ours = plan_a["candidates"][plan_a["winner"]]
    theirs = plan_b["candidates"][plan_b["winner"]]
    assert ours != theirs  # ... another winner:
    assert ours[column["value"]] == theirs[column["value"]]  # at the same value,
    assert ours[column["duration"]] < theirs[column["duration"]]  # the shorter one wins


def test_explain_keeps_a_bounded_context() -> None:
    _result, d = _explained("tests.impls.summation:ReversedSumScheduler", 12, context=2)
    assert 1 <= len(d.context) <= 2 + MAX_EVENTS + 1
    indices = [row.index for row in d.context]
    assert indices == sorted(indices) and indices[-1] == d.index
    # the events since the previous plan are all there, even beyond K
    plans = [i for i, row in zip(indices, d.context, strict=True) if row.a and row.a["t"] == "plan"]
    assert plans, "the previous plan record is within the context"
    _result, none = _explained("tests.impls.summation:ReversedSumScheduler", 12, context=0)
    assert none.context[-1].index == d.index


def test_explain_refuses_identical_results() -> None:
    scenario = generate(load_profile("quick"), 1)
    specs = (parse_impl(REFERENCE), parse_impl(REFERENCE))
    with pytest.raises(ValueError, match="identical"):
        explain(scenario, specs, run_scenario(scenario, specs))


def test_a_timeout_is_explained_without_running_again() -> None:
    scenario = generate(load_profile("quick"), 1)
    # an implementation that cannot even be imported: explain must not try to run it
    specs = (parse_impl(REFERENCE), ImplSpec("ghost", "no_such_module:Ghost"))
    stats = (ImplStats(REFERENCE, 9, 4, "", 0.1, 0.1), ImplStats("ghost", 8, 3, "", 2.0, 2.0))
    result = ScenarioResult(
        profile="quick",
        seed=1,
        features=scenario.features(),
        status=TIMEOUT,
        impls=stats,
        plan=3,
        failed_impl="ghost",
        message="timeout: ghost exceeded the 2 s scenario time limit at plan 3",
    )
    d = explain(scenario, specs, result)
    assert d.kind == TIMEOUT
    assert d.failed_impl == "ghost" and d.plan == 3
    assert str(d.signature) == "timeout · after plan: timed out"
    assert "2 s scenario time limit" in d.message
    assert d.notes


# -- trace files ------------------------------------------------------------------------------
def test_trace_files_explain_like_the_run(tmp_path: Path) -> None:
    scenario = generate(load_profile("quick"), 12)
    specs = _specs("tests.impls.summation:ReversedSumScheduler")
    result = run_scenario(scenario, specs)
    from_run = explain(scenario, specs, result)
    paths = [write_trace(scenario, spec, str(tmp_path)) for spec in specs]
    report = explain_traces(paths[0], paths[1])
    (outcome,) = report.outcomes
    assert outcome.status == DIVERGED
    d = outcome.divergence
    assert d is not None
    assert (d.kind, d.path, d.index, d.plan, d.clock) == (
        from_run.kind,
        from_run.path,
        from_run.index,
        from_run.plan,
        from_run.clock,
    )
    assert d.changes == from_run.changes
    assert d.context == from_run.context
    # the names come from the traces' provenance
    assert report.impls == d.impls == (REFERENCE, "tests.impls.summation:ReversedSumScheduler")
    assert d.plans == result.impls[0].plans


def _write(path: Path, records: list[dict[str, Any]]) -> str:
    header, *body = records
    path.write_bytes(trace_bytes(encode(header), [encode(r) for r in body]))
    return str(path)


def _reference_records(seed: int) -> list[dict[str, Any]]:
    return list(trace_records(generate(load_profile("quick"), seed), parse_impl(REFERENCE)))


def test_identical_trace_files(tmp_path: Path) -> None:
    records = _reference_records(1)
    report = explain_traces(_write(tmp_path / "a", records), _write(tmp_path / "b", records))
    assert report.ok and report.outcomes[0].divergence is None


def test_a_missing_record_is_structure(tmp_path: Path) -> None:
    records = _reference_records(1)
    a = _write(tmp_path / "a", records)
    b = _write(tmp_path / "b", records[:-2])
    d = explain_traces(a, b).outcomes[0].divergence
    assert d is not None and d.kind == STRUCTURE
    assert d.index == len(records) - 2
    assert d.path[-1] == "absent in B"
    assert d.context[-1].b is None


def test_different_record_types_at_one_index_are_structure(tmp_path: Path) -> None:
    records = _reference_records(1)
    index = next(i for i, r in enumerate(records) if r.get("t") == "completion")
    swapped = list(records)
    swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
    assert swapped[index]["t"] != records[index]["t"]
    d = explain_traces(_write(tmp_path / "a", records), _write(tmp_path / "b", swapped))
    div = d.outcomes[0].divergence
    assert div is not None and div.kind == STRUCTURE and div.index == index
    assert str(div.signature) == f"structure · {records[index]['t']} vs {swapped[index]['t']}"


def test_traces_of_two_scenarios_differ_in_the_header(tmp_path: Path) -> None:
    a = _write(tmp_path / "a", _reference_records(1))
    b = _write(tmp_path / "b", _reference_records(2))
    d = explain_traces(a, b).outcomes[0].divergence
    assert d is not None and d.kind == STRUCTURE and d.index == 0
    assert d.location == "header: scenario.seed"


def test_key_order_alone_is_named(tmp_path: Path) -> None:
    records = _reference_records(1)
    index = next(i for i, r in enumerate(records) if r.get("t") == "arrival")
    reordered = list(records)
    reordered[index] = dict(reversed(list(records[index].items())))
    d = explain_traces(_write(tmp_path / "a", records), _write(tmp_path / "b", reordered))
    div = d.outcomes[0].divergence
    assert div is not None and div.kind == STRUCTURE and div.path[-1] == "key order"


# -- signatures -------------------------------------------------------------------------------
def _divergence(seed: int, requests: int, plans: int, path: tuple[str, ...]) -> Divergence:
    return Divergence(
        kind=DECISION,
        profile="quick",
        seed=seed,
        features="",
        requests=requests,
        plans=plans,
        impls=("a", "b"),
        index=1,
        plan=1,
        clock=0,
        record_type="plan",
        path=path,
    )


def test_signatures_group_by_kind_and_normalised_path() -> None:
    found = [
        _divergence(1, 8, 50, ("plan 3", "pruned[0]")),
        _divergence(2, 3, 90, ("plan 7", "pruned[4]")),
        _divergence(3, 3, 40, ("plan 9", "pruned[1]")),
        _divergence(4, 1, 10, ("plan 2", "eligible[0]", "cap")),
    ]
    groups = group_signatures(found)
    assert [(str(g.signature), g.count) for g in groups] == [
        ("decision · plan: pruned[*]", 3),
        ("decision · plan: eligible[*].cap", 1),
    ]
    # smallest: fewest requests, then fewest plans
    assert groups[0].smallest.seed == 3
    assert groups[0].labels == ("quick:1", "quick:2", "quick:3")


def test_a_run_of_seeds_groups_into_one_signature_per_bug() -> None:
    profile = load_profile("quick")
    specs = _specs("tests.impls.eager_prune:EagerPruneScheduler")
    scenarios = [generate(profile, seed) for seed in (3, 12)]
    summary = run_scenarios(scenarios, RunOptions(impls=specs, jobs=1))
    assert [r.status for r in summary.results] == [DIVERGED] * 2
    divergences = [explain(s, specs, r) for s, r in zip(scenarios, summary.results, strict=True)]
    (group,) = group_signatures(divergences)
    assert str(group.signature) == "bookkeeping · plan: pruned[*]"
    assert group.count == 2 and group.smallest.size == min(d.size for d in divergences)


def test_the_condenser_keeps_context_only_for_each_smallest() -> None:
    row = ContextRow(1, {"t": "plan"}, {"t": "plan"})
    full = [
        replace(_divergence(seed, requests, 10, ("plan 3", "pruned[0]")), context=(row,))
        for seed, requests in ((1, 8), (2, 3), (3, 5))
    ]
    condenser = Condenser()
    for d in full:
        condenser.add(d)
    kept = condenser.items
    assert [d.seed for d in kept] == [1, 2, 3]
    assert [bool(d.context) for d in kept] == [False, True, False]
    assert SLIM_NOTE in kept[0].notes and kept[1].notes == ()


def test_a_finding_that_cannot_be_explained_still_gets_a_divergence() -> None:
    scenario = generate(load_profile("quick"), 1)
    specs = (parse_impl(REFERENCE), ImplSpec("ghost", "no_such_module:Ghost"))
    stats = (ImplStats(REFERENCE, 9, 4, "", 0.1, 0.1), ImplStats("ghost", 8, 3, "", 0.1, 0.1))
    result = ScenarioResult("quick", 1, scenario.features(), DIVERGED, stats, divergence=7, plan=3)
    (d,) = explain_many([(scenario, result)], specs)
    assert d.path == ("record 7", "unexplained")
    assert "could not explain: on a second run ghost" in d.notes[0]
    assert "ImplementationError" in d.notes[0]


def test_explain_many_in_worker_processes_matches_in_process() -> None:
    profile = load_profile("quick")
    specs = _specs("tests.impls.eager_prune:EagerPruneScheduler")
    scenarios = [generate(profile, seed) for seed in (0, 3)]
    work = [(s, run_scenario(s, specs)) for s in scenarios]
    assert explain_many(work, specs, jobs=2) == explain_many(work, specs, jobs=1)


def test_a_bug_in_one_column_is_named_by_that_column_and_reports_hold_no_bytes() -> None:
    # Built-ins record typed columns (bytes per column); the explanation reads them as rows,
    # so each change names its row and column, and the report serialises values, not bytes.
    from tracediff.compare import json_report
    from tracediff.compare.model import DiffReport
    from tracediff.running.explain import outcome

    result, d = _explained("tests.impls.kinds:DominatorScheduler", 0)
    assert result.status == DIVERGED
    assert d.field.startswith("pruned[") and d.field.endswith("].by")
    assert d.changes and all(c.path[0].startswith("pruned[") for c in d.changes)
    assert all(c.path[1:] == ("by",) for c in d.changes)
    assert all(isinstance(c.a, int) and c.b == c.a + 1 for c in d.changes)
    plans = [row.b for row in d.context if row.b is not None and row.b.get("t") == "plan"]
    assert plans and all(isinstance(p["pruned"], list) for p in plans)  # rows, not columns
    assert all(not isinstance(v, bytes) for p in plans for v in p.values())
    differing = d.context[-1].b
    assert differing is not None and differing["pruned"][0][1] == d.changes[0].b
    report = DiffReport("t", ("reference", "dominator"), (outcome(result, d, "quick"),), ())
    text = json_report.dumps(report)
    assert json_report.loads(text, "r.json") == report
