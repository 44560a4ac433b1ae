"""Explanations that point at the cause: first divergence first, one signature per cause,
finer kinds, the state diff, small repros, machine-readable findings, report details.

Each point is pinned on a small scenario of the quick profile with a purpose-built
implementation (tests/impls/kinds.py) or one of the broken ones.
"""

from __future__ import annotations

import json
import math
from io import StringIO
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from tests.impls.kinds import AT, RAISE_AT
from tracediff.cli import main
from tracediff.compare import json_report
from tracediff.compare.fields import record_changes
from tracediff.compare.model import (
    BOOKKEEPING,
    DECISION,
    ERROR,
    ROUNDING,
    TYPE,
    VALUE,
    ContextRow,
    Divergence,
    RoundMark,
)
from tracediff.compare.signature import group_signatures
from tracediff.models.specdec.model import MODEL
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import COLUMNS
from tracediff.models.specdec.search import merge_requests
from tracediff.project.impls import load, parse_impl
from tracediff.report import describe, html
from tracediff.report.terminal import DivergenceView, groups_renderable
from tracediff.running.explain import explain, raised_in
from tracediff.running.runner import DIVERGED, IDENTICAL, ScenarioResult, run_scenario
from tracediff.running.runner import ERROR as RUN_ERROR
from tracediff.running.state import first_state_difference, state_difference
from tracediff.search.shrink import Shrinker, compare_signature, shrink

REFERENCE = parse_impl("reference")
KINDS = "tests.impls.kinds"
STALE = "tests.impls.stale_advance:StaleAdvanceScheduler"


def _explain(impl: str, seed: int) -> Divergence:
    scenario = generate(load_profile("quick"), seed)
    specs = (REFERENCE, parse_impl(impl))
    result = run_scenario(scenario, specs)
    assert result.status != IDENTICAL
    return explain(scenario, specs, result)


# -- 1. the first divergence is the finding -----------------------------------------------------
def test_a_bug_that_diverges_then_raises_is_its_divergence() -> None:
    scenario = generate(load_profile("quick"), 0)
    specs = (REFERENCE, parse_impl(f"{KINDS}:DivergeThenRaiseScheduler"))
    result = run_scenario(scenario, specs)
    assert result.status == DIVERGED and result.plan == AT
    assert "deliberate failure at plan" in result.message  # kept as context
    d = explain(scenario, specs, result)
    assert d.kind == VALUE and str(d.signature) == "value · plan: credit_after"
    assert d.plan == AT and d.plan < RAISE_AT
    assert "then failed" in d.later and "RuntimeError" in d.later
    text = _render(DivergenceView(d))
    assert "then" in text and "RuntimeError: deliberate failure" in text


def test_the_shrinker_keeps_the_divergence_not_the_later_error() -> None:
    scenario = generate(load_profile("quick"), 6)
    specs = (REFERENCE, parse_impl(f"{KINDS}:DivergeThenRaiseScheduler"))
    result = shrink(scenario, specs, signature_fn=compare_signature)
    assert str(result.signature) == "value · plan: credit_after"
    assert result.result.status == DIVERGED


# -- 2. one cause, one signature ----------------------------------------------------------------
def test_one_bug_raising_at_several_places_has_one_signature() -> None:
    found = [_explain(f"{KINDS}:CompleteRaisesScheduler", seed) for seed in range(6)]
    assert {str(d.signature) for d in found} == {"error · complete(): raised KeyError"}
    # ... although it raised at different plans of different scenarios
    assert len({d.plan for d in found}) > 1
    assert all(d.raised_in == "complete()" for d in found)
    raised = _explain("tests.impls.raises:RaisingScheduler", 0)
    assert str(raised.signature) == "error · plan(): raised RuntimeError"


def test_raised_in_reads_the_driver_call_from_the_traceback() -> None:
    assert raised_in(ValueError("no traceback")) == "encode"
    scenario = generate(load_profile("quick"), 3)
    specs = (REFERENCE, parse_impl("tests.impls.malformed:WrongKeysScheduler"))
    d = explain(scenario, specs, run_scenario(scenario, specs))
    assert d.kind == ERROR and d.raised_in == "engine"  # the driver refused the record


# -- 3. finer kinds -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("impl", "seed", "kind", "signature"),
    [
        (
            "tests.impls.summation:ReversedSumScheduler",
            12,
            ROUNDING,
            "plan: candidates[*].expected",
        ),
        (f"{KINDS}:ClampScheduler", 0, VALUE, "plan: credit_after"),
        (f"{KINDS}:TypeScheduler", 0, TYPE, "plan: credit_before"),
        (f"{KINDS}:DominatorScheduler", 0, BOOKKEEPING, "plan: pruned[*].by"),
        (
            "tests.impls.slot_tiebreak:SlotTieBreakScheduler",
            17,
            DECISION,
            "plan: round.lanes[*].prefix",
        ),
        (STALE, 37, DECISION, "plan: round.lanes[*].prefix"),
    ],
)
def test_each_kind_on_a_small_scenario(impl: str, seed: int, kind: str, signature: str) -> None:
    d = _explain(impl, seed)
    assert (d.kind, d.signature.path) == (kind, signature)
    assert d.requests <= 8
    if kind == DECISION:
        # knock-on floats of a decision get no ULP distance
        assert all(c.ulps is None for c in d.changes)
    if kind in (ROUNDING, VALUE):
        head = d.headline
        assert head is not None and head.ulps is not None and head.rel_error is not None
        assert (head.rel_error <= 1e-12) == (kind == ROUNDING)


def test_field_kinds_on_records() -> None:
    a = {"t": "plan", "credit": 0.0, "pruned": [[1, 2]], "round": [1, 2], "probe": 0}
    choice = MODEL.choice_fields["plan"]
    kinds = {
        c.path: c.kind
        for c in record_changes(
            a,
            {"t": "plan", "credit": 0, "pruned": [[1, 3]], "round": [1, 5], "probe": 0},
            COLUMNS,
            choice,
        )
    }
    assert kinds == {
        ("credit",): TYPE,
        ("pruned[0]", "by"): BOOKKEEPING,
        ("round", "kind"): DECISION,  # round's second column
    }
    tiny = record_changes(a, {**a, "credit": math.nextafter(0.0, 1.0)}, COLUMNS, choice)
    assert tiny[0].kind == VALUE  # from zero, any move is far more than rounding


# -- 4. the state diff --------------------------------------------------------------------------
def test_the_state_diff_names_the_cause_plans_before_the_record() -> None:
    d = _explain(STALE, 37)
    assert d.state is not None, d.state_note
    assert d.state.field.endswith(".pending_advance")
    assert d.state.field.startswith("requests[id=")
    assert d.state.plan is not None and d.plan is not None and d.state.plan < d.plan
    assert d.state.plans_before == d.plan - d.state.plan and d.state.plans_before >= 5
    assert d.state.index < (d.index or 0)
    line = describe.state_line(d)
    assert line.startswith(f"after {d.state.event}: request ")
    assert "pending_advance" in line and " vs " in line
    # in every presenter
    assert line in _render(DivergenceView(d), width=200)
    data = json_report._divergence(d)
    assert data["state"]["field"] == d.state.field and data["state"]["plans_before"] >= 5
    assert describe.state_line(d) in html.render(_report(d))


def test_signatures_of_one_cause_name_it() -> None:
    found = [_explain(STALE, seed) for seed in (37, 75, 77)]
    groups = group_signatures(found)
    assert len(groups) > 1  # the symptom differs: which part of the round
    assert {g.causes for g in groups} == {("requests[*].pending_advance",)}
    text = _render(groups_renderable(groups), width=160)
    assert "state first differs in" in text and "requests[*].pending_advance" in text
    assert json_report.groups_to_list(found)[0]["causes"] == ["requests[*].pending_advance"]


def test_a_cause_not_every_scenario_shares_says_in_how_many() -> None:
    """One story: a group whose smallest scenario's states agreed (its panel says so) does
    not claim a cause for the whole group; it says in how many scenarios the state differs."""
    import dataclasses

    d = _explain(STALE, 37)
    assert d.state is not None
    agreed = dataclasses.replace(d, state=None, state_note="the states agree", requests=0)
    (group,) = group_signatures([d, agreed])
    assert group.smallest is agreed
    assert group.causes == (f"{d.state.cause} (in 1 of 2 scenarios)",)


def test_states_agree_where_only_the_record_differs() -> None:
    d = _explain("tests.impls.summation:ReversedSumScheduler", 12)
    assert d.state is None and "agree" in d.state_note


def test_first_state_difference_is_a_pure_function_of_scenario_and_factories() -> None:
    scenario = generate(load_profile("quick"), 37)
    factories = [load(REFERENCE), load(parse_impl(STALE))]
    first = first_state_difference(scenario, factories)
    again = first_state_difference(scenario, factories)
    assert first == again and not isinstance(first, str)
    same = first_state_difference(scenario, [load(REFERENCE), load(parse_impl("optimized"))])
    assert isinstance(same, str) and "agree" in same


def test_state_difference_paths() -> None:
    a = {"plan": 3, "requests": [{"id": 4, "slot": 1}, {"id": 7, "slot": 2}], "t": [0.0]}
    assert state_difference(a, a) is None
    b = {"plan": 3, "requests": [{"id": 4, "slot": 1}, {"id": 7, "slot": 5}], "t": [0.0]}
    assert state_difference(a, b) == ("requests[id=7].slot", 2, 5)
    assert state_difference(a, {**a, "t": [0]}) == ("t[0]", 0.0, 0)
    assert describe.state_field_words("requests[id=7].slot") == "request 7 slot"


def test_replay_state_shows_both_implementations(tmp_path: Path) -> None:
    trace = tmp_path / "t.trace"
    runner = CliRunner()
    made = runner.invoke(
        main,
        ["record", "--profile", "quick", "--seed", "37", "--impl", "reference", "-o", str(trace)],
    )
    assert made.exit_code == 0, made.output
    shown = runner.invoke(
        main,
        ["replay", str(trace), "--impl", "reference", "--impl", STALE, "--until", "4", "--state"],
    )
    assert "pending_advance" in shown.output or "adv" in shown.output
    assert "state differs" in shown.output and "requests[id=" in shown.output


# -- 5. small repros ----------------------------------------------------------------------------
def test_shrink_reaches_four_requests_within_its_budget() -> None:
    loaded = load_profile("quick")
    specs = (REFERENCE, parse_impl(STALE))
    scenario = next(
        s
        for s in (generate(loaded, seed) for seed in loaded.seeds)
        if len(s.requests) == 8 and run_scenario(s, specs).status == DIVERGED
    )
    result = shrink(scenario, specs, signature_fn=compare_signature)  # evaluations, not seconds
    assert result.after[0] <= 4 < result.before[0]
    again = run_scenario(result.shrunk, specs)
    assert compare_signature(result.shrunk, again, specs) == result.signature


def test_merging_requests_reaches_what_deleting_cannot() -> None:
    # Interesting while the requests' total budget stays: deleting any request loses it,
    # merging two neighbours keeps it, so only the merge pass gets below three requests.
    scenario = generate(load_profile("quick"), 6)
    assert len(scenario.requests) == 3
    total = sum(r.max_new for r in scenario.requests)

    def heavy(candidate: Scenario, result: ScenarioResult, specs: object) -> str | None:
        return "heavy" if sum(r.max_new for r in candidate.requests) >= total else None

    shrinker = Shrinker(scenario, (REFERENCE, REFERENCE), signature_fn=heavy)
    shrinker._loop = lambda: merge_requests(shrinker)  # type: ignore[method-assign]  # the pass alone
    result = shrinker.shrink()
    assert result.after[0] == 1 and result.complete
    assert result.shrunk.requests[0].max_new == total


def test_cli_shrink_says_when_it_stopped_on_its_budget() -> None:
    args = ["shrink", "--profile", "quick", "--seed", "12", "--impl", "reference"]
    args += ["--impl", "tests.impls.skewed:SkewedScheduler", "--no-progress"]
    limited = CliRunner().invoke(main, [*args, "--budget", "2"])
    assert limited.exit_code == 1, limited.output
    assert "stopped at the evaluation budget (2 candidates)" in limited.output
    assert "2 of 2 evaluations used" in limited.output
    done = CliRunner().invoke(main, [*args])
    assert "stopped at a minimum: 1-minimal with respect to the passes" in done.output


# -- 6. machine-readable findings ---------------------------------------------------------------
def test_run_json_carries_each_finding_and_the_groups(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = CliRunner().invoke(
        main,
        [
            "run", "--seeds", "0,3", "--impl", "reference",
            "--impl", f"{KINDS}:DominatorScheduler", "-j", "1", "--no-regressions",
            "--no-progress", "--json", str(out),
        ],
    )  # fmt: skip
    assert done.exit_code == 1, done.output
    data = json.loads(out.read_text())
    (first, _second) = data["findings"]
    assert first["kind"] == BOOKKEEPING
    assert first["signature"] == {"kind": "bookkeeping", "path": "plan: pruned[*].by"}
    assert first["record"] >= 1 and first["plan"] >= 1 and first["field"].startswith("pruned[")
    assert first["state"] is None and first["state_note"]
    (group,) = data["groups"]
    assert group["count"] == 2 and group["scenarios"] == ["quick:0", "quick:3"]
    assert all(ord(c) < 128 for c in first["field"] + group["path"])


# -- 7. reports ---------------------------------------------------------------------------------
def test_rounds_table_never_says_same_for_rounds_that_differ() -> None:
    mark = RoundMark(
        plan=4, now=10, source="winner", kind=0, b_pad=1, width=3, lanes=1, prefill=False
    )
    record_a = {
        "t": "plan",
        "plan": 4,
        "round": ["winner", 0, 1, 3, -1, 0, [[0, 0, 3, 1]], 1.0, 90],
    }
    record_b = {**record_a, "round": ["winner", 0, 1, 3, -1, 0, [[0, 0, 3, 1]], 1.0, 95]}
    d = _explain("tests.impls.summation:ReversedSumScheduler", 12)
    d = d.__class__(**{**d.__dict__, "context": (ContextRow(9, record_a, record_b),), "plan": 4})
    d = d.__class__(**{**d.__dict__, "timeline_a": (mark,), "timeline_b": (mark,)})
    assert describe.rounds_differ(d, 4, mark, mark).strip() == "(round differs: duration)"
    text = _render(DivergenceView(d))
    rounds = text[text.index("rounds around") :]
    assert "≡ same" not in rounds and "duration" in rounds


def test_html_marks_the_differing_part_and_explains_bar_labels() -> None:
    d = _explain("tests.impls.summation:ReversedSumScheduler", 12)
    page = html.render(_report(d))
    head = d.headline
    assert head is not None
    a, b = repr(head.a), repr(head.b)  # two floats a few ULPs apart: a long common prefix
    same = next(i for i, (x, y) in enumerate(zip(a + " ", b + " ", strict=False)) if x != y)
    assert same >= 8
    assert f"{a[:same]}<mark>{a[same:]}</mark>" in page
    assert f"{b[:same]}<mark>{b[same:]}</mark>" in page
    assert "1×7" in page and "1q8" in page


def test_a_summary_is_never_cut_before_the_value_that_differs() -> None:
    long_a = {"t": "plan", "plan": 1, "now": 0, "eligible": list(range(40)) + [1]}
    long_b = {**long_a, "eligible": list(range(40)) + [2]}
    left = describe.record_summary(long_a, 5, long_b)
    right = describe.record_summary(long_b, 5, long_a)
    assert left.endswith("39, 1]") and right.endswith("39, 2]")
    assert "≠eligible=" in left


# -- helpers --------------------------------------------------------------------------------------
def _render(renderable: object, width: int = 100) -> str:
    console = Console(width=width, file=StringIO(), color_system=None)
    console.print(renderable)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


def _report(d: Divergence) -> object:
    from tracediff.compare.model import DiffReport, ScenarioOutcome

    return DiffReport(
        title="t",
        impls=d.impls,
        outcomes=(ScenarioOutcome("quick", d.profile, d.seed, d.features, DIVERGED, divergence=d),),
    )


assert RUN_ERROR == ERROR
