"""The round row's fast check accepts exactly what the exact check accepts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tracediff.models.specdec.engine.driver import drive
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.models.specdec.schema import _round_ok, record_problem


def _plan_with_round() -> dict[str, Any]:
    scenario = generate(load_profile("quick"), 13)
    return next(
        r
        for r in drive(scenario, ReferenceScheduler(scenario))
        if r.get("t") == "plan" and r["round"] and r["round"][6]
    )


def _damaged(where: tuple[int, ...], value: Any) -> dict[str, Any]:
    record = copy.deepcopy(_plan_with_round())
    target = record["round"]
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    return record


def test_a_real_round_takes_the_fast_path() -> None:
    record = _plan_with_round()
    assert _round_ok(record["round"]) and record_problem(record) is None


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ((0,), "loser", "round.source"),
        ((1,), True, "round.kind"),
        ((2,), 1.5, "round.b_pad"),
        ((7,), float("nan"), "round.expected"),
        ((8,), "9", "round.duration"),
        ((6, 0, 2), False, "round.lanes[0].prefix"),
        ((6, 0), [1, 2, 3], "round.lanes[0] has 3 columns"),
        ((6,), "lanes", "round.lanes"),
    ],
)
def test_anything_else_gets_the_exact_check_and_its_message(
    where: tuple[int, ...], value: Any, message: str
) -> None:
    record = _damaged(where, value)
    assert not _round_ok(record["round"])
    problem = record_problem(record)
    assert problem is not None and message in problem, problem


def test_an_integer_expected_is_still_a_number() -> None:
    record = _damaged((7,), 3)  # the exact check accepts an int where a number belongs
    assert not _round_ok(record["round"]) and record_problem(record) is None
