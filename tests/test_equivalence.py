"""Decision equivalence: floats within N ULPs pass only when asked, decisions never do."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.compare.equivalence import BYTES, DECISIONS, Equivalence, FloatTally, within
from tracediff.errors import UsageError

ONE_ULP = "tests.impls.ulp:OneUlpScheduler"
DECISION = "tests.impls.slot_tiebreak:SlotTieBreakScheduler"  # diverges on quick seed 13


def test_within_counts_floats_and_refuses_everything_else() -> None:
    a = {"t": "plan", "x": [1.0, 2, True], "y": None}
    up = math.nextafter(1.0, 2.0)
    assert within(a, {"t": "plan", "x": [up, 2, True], "y": None}, 1) == FloatTally(1, 1)
    assert within(a, {"t": "plan", "x": [up, 2, True], "y": None}, 0) is None
    assert within(a, a, 0) == FloatTally(0, 0)
    for other in (
        {"t": "plan", "x": [1.0, 3, True], "y": None},  # an integer
        {"t": "plan", "x": [1.0, 2, False], "y": None},  # a boolean
        {"t": "plan", "x": [1.0, 2.0, True], "y": None},  # an int that became a float
        {"t": "plan", "x": [1.0, 2], "y": None},  # a length
        {"x": [1.0, 2, True], "t": "plan", "y": None},  # key order
        {"t": "plan", "x": [math.nan, 2, True], "y": None},  # NaN matches nothing
    ):
        assert within(a, other, 1000) is None
    assert within(0.0, -0.0, 0) == FloatTally(1, 0)


def test_equivalence_options_are_validated() -> None:
    assert Equivalence().label == "byte identity"
    assert "NOT byte identity" in Equivalence(DECISIONS, 1).label
    with pytest.raises(UsageError):
        Equivalence(BYTES, 1)
    with pytest.raises(UsageError):
        Equivalence(DECISIONS, -1)
    result = CliRunner().invoke(main, ["run", "--seeds", "0", "--ulps", "1"])
    assert result.exit_code == 2
    assert "--ulps needs --equivalence decisions" in result.output


def _run(impl: str, seeds: str, *extra: str, tmp_path: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    out = tmp_path / "run.json"
    result = CliRunner().invoke(
        main,
        ["run", "--no-progress", "--profile", "quick", "--seeds", seeds, "-j", "1",
         "--explain", "0", "--impl", "reference", "--impl", impl, "--json", str(out), *extra],
    )  # fmt: skip
    return result.exit_code, json.loads(out.read_text())


def test_one_ulp_passes_with_ulps_1_and_fails_without(tmp_path: Path) -> None:
    code, data = _run(ONE_ULP, "0..3", tmp_path=tmp_path)
    assert (code, data["diverged"]) == (1, 4)
    code, data = _run(ONE_ULP, "0..3", "--equivalence", "decisions", tmp_path=tmp_path)
    assert (code, data["diverged"]) == (1, 4)
    code, data = _run(
        ONE_ULP, "0..3", "--equivalence", "decisions", "--ulps", "1", tmp_path=tmp_path
    )
    assert code == 0
    equivalence = data["equivalence"]
    assert equivalence["mode"] == "decisions" and equivalence["ulps"] == 1
    assert "NOT byte identity" in equivalence["label"]
    assert equivalence["equal_within_ulps"] == 4 and equivalence["byte_identical"] == 0
    assert equivalence["floats_within_ulps"] > 0 and equivalence["max_ulps"] == 1
    assert all(r["max_ulps"] == 1 for r in data["results"])


def test_a_changed_decision_fails_under_both(tmp_path: Path) -> None:
    for extra in ((), ("--equivalence", "decisions", "--ulps", "4")):
        code, data = _run(DECISION, "13", *extra, tmp_path=tmp_path)
        assert (code, data["diverged"]) == (1, 1)


def test_the_verdict_says_decision_equivalent_not_identical() -> None:
    result = CliRunner().invoke(
        main,
        ["run", "--no-progress", "--seeds", "0", "-j", "1", "--impl", "reference",
         "--impl", ONE_ULP, "--equivalence", "decisions", "--ulps", "1"],
    )  # fmt: skip
    text = " ".join(result.output.split())
    assert result.exit_code == 0
    assert "decision-equivalent, NOT byte-identical" in text
    assert not text.startswith("identical") and "\nidentical: " not in result.output


def test_golden_check_labels_decision_equivalence() -> None:
    from tracediff.golden import check
    from tracediff.project.impls import parse_impl

    spec = parse_impl(ONE_ULP)
    exact = check("quick", spec, seeds=[0, 1, 2])
    assert not exact.ok and len(exact.mismatches) == 3
    tolerant = check("quick", spec, seeds=[0, 1, 2], equivalence=Equivalence(DECISIONS, 1))
    assert tolerant.ok and [w[0] for w in tolerant.within_ulps] == [0, 1, 2]
    assert "NOT byte identity" in tolerant.summary()
    assert tolerant.to_dict()["equivalence"]["within_ulps"][0]["max_ulps"] == 1


def test_the_gate_labels_decision_equivalence(tmp_path: Path) -> None:
    out = tmp_path / "gate.json"
    result = CliRunner().invoke(
        main,
        ["gate", "--profile", "quick", "--seeds", "0..2", "-j", "1", "--impl", "reference",
         "--impl", ONE_ULP, "--artifacts", str(tmp_path / "a"), "--json", str(out),
         "--equivalence", "decisions", "--ulps", "1"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "only under decision equivalence" in text
    assert "compared as decision equivalence (floats within 1 ULP; NOT byte identity)" in text


def test_the_explanation_skips_tolerated_floats_to_the_changed_decision() -> None:
    from tracediff.models.specdec.scenario.generator import generate
    from tracediff.models.specdec.scenario.profiles import load_profile
    from tracediff.project.impls import parse_impl
    from tracediff.running.explain import explain
    from tracediff.running.runner import DIVERGED, run_scenario

    scenario = generate(load_profile("quick"), 13)
    specs = (parse_impl("reference"), parse_impl("tests.impls.ulp:OneUlpSlotTieBreakScheduler"))
    exact = run_scenario(scenario, specs)
    tolerant = run_scenario(scenario, specs, equivalence=Equivalence(DECISIONS, 1))
    assert exact.status == tolerant.status == DIVERGED
    assert tolerant.divergence > exact.divergence
    floats_only = ("value", "rounding")  # the kinds of a difference in floats alone
    assert explain(scenario, specs, exact).kind in floats_only
    divergence = explain(scenario, specs, tolerant)
    assert divergence.kind not in floats_only
    assert divergence.index == tolerant.divergence
    assert any("within the --ulps tolerance" in note for note in divergence.notes)
