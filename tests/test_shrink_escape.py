"""Shrinking past local minima: ddmin's subsets and complements, the escape when the passes
stall above SMALL_SIZE (combinations, then fuzzed scenarios seeded from the best), and the
report of a repro that stays above it (docs/shrinking.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Hashable, Sequence
from pathlib import Path

from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import ImplSpec, parse_impl
from tracediff.running.runner import IDENTICAL, ScenarioResult, run_scenario
from tracediff.search.shrink import (
    BUDGET,
    SMALL_SIZE,
    ShrinkOptions,
    ShrinkResult,
    compare_signature,
    shrink,
)

REFERENCE = parse_impl("reference")
SLOT_TIEBREAK = parse_impl("tests.impls.slot_tiebreak:SlotTieBreakScheduler")
GROUPING = parse_impl("tests.impls.grouping:PrefillBlindGroupScheduler")
WIDTH_FIRST = parse_impl("tests.impls.mutants:WidthBeforeDurationScheduler")
STALE_ADVANCE = parse_impl("tests.impls.stale_advance:StaleAdvanceScheduler")


def _quick(seed: int) -> Scenario:
    return generate(load_profile("quick"), seed)


def _bytes(result: ShrinkResult) -> bytes:
    return json.dumps(result.shrunk.to_dict(), sort_keys=True).encode()


def _shrink_twice(seed: int, impl: ImplSpec) -> ShrinkResult:
    specs = (REFERENCE, impl)
    first = shrink(_quick(seed), specs, signature_fn=compare_signature)
    again = shrink(_quick(seed), specs, signature_fn=compare_signature)
    assert _bytes(first) == _bytes(again)
    assert (first.attempts, first.improvements, first.escapes) == (
        again.attempts,
        again.improvements,
        again.escapes,
    )
    assert first.failing and first.complete, first.stop_reason()
    after = run_scenario(first.shrunk, specs)
    assert compare_signature(first.shrunk, after, specs) == first.signature
    return first


def test_the_slot_tiebreak_from_a_32_request_seed_shrinks_to_at_most_4() -> None:
    """The issue's first case: quick seed 24 (32 requests, 116 plans), the CLI's signature."""
    assert len(_quick(24).requests) == 32
    result = _shrink_twice(24, SLOT_TIEBREAK)
    assert result.after[0] <= SMALL_SIZE, (result.after, result.stop_reason())


def test_a_grouping_bug_from_a_16_request_seed_shrinks_to_at_most_4() -> None:
    """The issue's second case: a pruning group without the prefill row, from quick seed 18
    (16 requests); it needs a decoding lane and a prompt waiting to be prefilled."""
    assert len(_quick(18).requests) == 16
    result = _shrink_twice(18, GROUPING)
    assert result.after[0] <= 2, (result.after, result.stop_reason())


def test_an_escape_finds_a_scenario_no_single_step_reaches() -> None:
    """A signature that only scenarios of 10 or more requests have, or the two requests 0
    and 9 alone: the passes keep requests 0..9, where no deletion step, merge or ddmin chunk
    (contiguous) reaches {0, 9}; the combinations of the escape do, the same way twice."""

    def far_pair(
        scenario: Scenario, result: ScenarioResult, specs: Sequence[ImplSpec]
    ) -> Hashable | None:
        ids = sorted(r.id for r in scenario.requests)
        if len(ids) >= 10 or (len(ids) == 2 and ids == [0, 9]):
            return "far"
        return None

    scenario = _quick(18)  # 16 requests, ids 0..15
    specs = (REFERENCE, REFERENCE)
    options = ShrinkOptions(max_evaluations=1000)
    first = shrink(scenario, specs, signature_fn=far_pair, options=options)
    again = shrink(scenario, specs, signature_fn=far_pair, options=options)
    assert _bytes(first) == _bytes(again) and first.escapes == again.escapes
    assert first.after[0] == 2, (first.after, first.escapes)
    assert any("combinations" in line for line in first.escapes), first.escapes


def test_a_repro_left_above_4_says_so_and_why() -> None:
    result = shrink(
        _quick(24),
        (REFERENCE, SLOT_TIEBREAK),
        options=ShrinkOptions(max_evaluations=5),
    )
    assert result.stopped == BUDGET and result.after[0] > SMALL_SIZE
    reason = result.stop_reason()
    assert f"above the target of {SMALL_SIZE}" in reason
    assert "stopped before it could look further" in reason


def test_a_scenario_that_does_not_diverge_is_left_alone() -> None:
    scenario = dataclasses.replace(_quick(18), seed=18)
    assert run_scenario(scenario, (REFERENCE, REFERENCE)).status == IDENTICAL
    result = shrink(scenario, (REFERENCE, REFERENCE))
    assert not result.failing and result.escapes == ()


def test_fewer_lanes_in_the_same_padded_shapes_take_repros_below_5() -> None:
    """Repros the passes left above 4 because a request's lane only added padding (five lanes
    pad to the 8-lane bucket): WidthBeforeDuration from quick:101 stopped at 8 requests,
    the slot tie-break from quick:23 at 5, and the stale advance from quick:101 at 6 (one
    lane more on one side, the same padded round only with every lower bucket out). The
    escape that keeps at most 4 requests with the smaller batch buckets taken out (the same
    padded shapes) takes each to at most 4."""
    from tracediff.search.shrink import load_regression

    data = Path(__file__).parent / "data" / "escape"
    for name, impl, before in (
        ("width-before-duration-quick-101.json", WIDTH_FIRST, 8),
        ("slot-tiebreak-quick-23.json", SLOT_TIEBREAK, 5),
        ("stale-advance-quick-101.json", STALE_ADVANCE, 6),
    ):
        scenario, _impls = load_regression(data / name)
        assert len(scenario.requests) == before
        specs = (REFERENCE, impl)
        first = shrink(scenario, specs, signature_fn=compare_signature)
        again = shrink(scenario, specs, signature_fn=compare_signature)
        assert _bytes(first) == _bytes(again) and first.escapes == again.escapes
        assert first.failing and first.after[0] <= SMALL_SIZE, (name, first.stop_reason())
        assert f"at {before}: same padding, fewer lanes, found one" in first.escapes, first.escapes
        assert first.shrunk.params.batch_buckets != scenario.params.batch_buckets


def test_lanes_under_moved_parameters_take_a_repro_below_5() -> None:
    """The slot tie-break from quick:17 stopped at 7 requests, three of them prefill only
    (their prefill rows shape the rounds where the probe's refill meets the tie): the
    escape that keeps only requests that run as lanes, with a few parameters moved, takes
    it to at most 4, twice to the same bytes."""
    from tracediff.search.shrink import load_regression

    scenario, _impls = load_regression(
        Path(__file__).parent / "data/escape/slot-tiebreak-quick-17.json"
    )
    assert len(scenario.requests) == 7
    assert sum(r.max_new == 1 for r in scenario.requests) == 3
    specs = (REFERENCE, SLOT_TIEBREAK)
    first = shrink(scenario, specs, signature_fn=compare_signature)
    again = shrink(scenario, specs, signature_fn=compare_signature)
    assert _bytes(first) == _bytes(again) and first.escapes == again.escapes
    assert first.failing and first.after[0] <= SMALL_SIZE, first.stop_reason()
    assert "at 7: lanes elsewhere, found one" in first.escapes, first.escapes
    assert first.shrunk.params != scenario.params


def test_lanes_in_step_take_the_stale_advance_from_quick_63_below_5() -> None:
    """StaleAdvance from quick:63 stopped at 9 requests (every other escape finds nothing
    there): the stale budget shows as a different lane set only when a request's last
    tokens are exactly the ones a ragged round in flight carries. The escape that keeps at
    most 4 lanes arriving together, accepting every draft, each a whole number of full
    rounds long, finds a repro of at most 4 with the same signature, the same bytes twice;
    without it the repro stays at 9 (docs/shrinking.md)."""
    from tracediff.models.specdec.search import lanes_in_step
    from tracediff.search.shrink import Shrinker, load_regression

    scenario, impls = load_regression(
        Path(__file__).parent / "data/escape/stale-advance-quick-63.json"
    )
    specs = tuple(parse_impl(i) for i in impls)
    assert specs == (REFERENCE, STALE_ADVANCE) and len(scenario.requests) == 9
    found = []
    for _ in range(2):
        shrinker = Shrinker(scenario, specs, signature_fn=compare_signature)
        shrinker.begin()
        lanes_in_step(shrinker)
        found.append(json.dumps(shrinker.best.to_dict(), sort_keys=True))
        assert len(shrinker.best.requests) <= SMALL_SIZE, shrinker.attempts
    assert found[0] == found[1]
    best = Scenario.from_dict(json.loads(found[0]))
    assert {r.max_new for r in best.requests} <= {16, 24, 32}
    assert {r.arrival_us for r in best.requests} == {0}
    after = run_scenario(best, specs)
    assert after.status != IDENTICAL
    assert compare_signature(best, after, specs) == shrinker.signature
