"""The optimized scheduler returns the reference's plan records byte for byte.

Every test drives both implementations through the same scenario on the simulated engine
(``tracediff.models.specdec.engine.driver.drive``) in lockstep and compares the msgpack bytes of
every
record. Scenarios are built here with ``tracediff.models.specdec.scenario.model`` so that each knob
the
optimization depends on is exercised on purpose: budget binding (small verification
budgets), fixed lanes clipped by the budget, probes past the width bound, invalid probes,
refresh, prefill rows, retirement, and up to 64 concurrent lanes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracediff.errors import SchedulerFault
from tracediff.models.specdec.bench import bench_from_dict, bench_to_dict, run_bench
from tracediff.models.specdec.engine.driver import drive
from tracediff.models.specdec.scenario import rng
from tracediff.models.specdec.scenario.model import (
    EngineTruth,
    RequestSpec,
    Scenario,
    SchedulerParams,
)
from tracediff.models.specdec.sched import allocations
from tracediff.models.specdec.sched.core import RequestState, SchedulerCore
from tracediff.models.specdec.sched.optimized import CheckedOptimizedScheduler, OptimizedScheduler
from tracediff.models.specdec.sched.record import rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler


# -- scenarios ---------------------------------------------------------------------------
def make_scenario(
    seed: int,
    requests: int,
    *,
    allocation: str = "device",
    ragged: bool = False,
    queue_depth: int = 1,
    burst: bool = False,
    max_new: int = 60,
    grammar: float = 0.0,
    host_stop: float = 0.0,
    fixed: float = 0.0,
    copy: float = 0.0,
    stops: float = 0.0,
    **params: Any,
) -> Scenario:
    """A scenario whose per-request draws are keyed by (seed, request) only."""

    def chance(tag: str, probability: float, index: int) -> bool:
        return rng.chance(seed, tag, probability, index)

    specs = []
    for i in range(requests):
        limit = rng.randint(seed, "max-new", max(1, max_new // 3), max_new, i)
        specs.append(
            RequestSpec(
                id=i,
                arrival_us=0 if burst else rng.randint(seed, "arrival", 0, 80_000, i),
                prompt_len=rng.randint(seed, "prompt", 1, 40 if burst else 1200, i),
                max_new=limit,
                proposer="copy" if chance("copy", copy, i) else "mtp",
                grammar_cap=rng.randint(seed, "cap", 0, 3, i) if chance("gr", grammar, i) else -1,
                host_stop=chance("host-stop", host_stop, i),
                fixed_width=rng.randint(seed, "fw", 0, 7, i) if chance("fixed", fixed, i) else -1,
                stop_at=rng.randint(seed, "stop", 1, limit, i) if chance("stop", stops, i) else -1,
                accept_base=0.3 + 0.7 * rng.uniform(seed, "base", i),
                accept_decay=0.5 + 0.5 * rng.uniform(seed, "decay", i),
            )
        )
    eager = ((1, 8, 16), (0, 4, 2), (1, 32, 64), (0, 16, 5)) if ragged else ()
    scheduler = SchedulerParams(
        allocation=allocation,
        ragged=ragged,
        queue_depth=queue_depth,
        eager_shapes=eager,
        **params,
    )
    scenario = Scenario("test-optimized", seed, scheduler, EngineTruth(), tuple(specs))
    scenario.validate()
    return scenario


EVERYTHING = {"grammar": 0.2, "host_stop": 0.2, "fixed": 0.2, "copy": 0.3, "stops": 0.2}

# (id, seed, requests, keyword arguments)
CASES: list[tuple[str, int, int, dict[str, Any]]] = [
    ("one-request", 1, 1, {}),
    ("two-host-q0", 2, 2, {"allocation": "host", "queue_depth": 0}),
    (
        "five-mixed-q2-ragged",
        3,
        5,
        {"allocation": "mixed", "queue_depth": 2, "ragged": True, **EVERYTHING},
    ),
    ("twelve-device-all", 4, 12, {"ragged": True, **EVERYTHING}),
    ("twelve-host-all-q0", 5, 12, {"allocation": "host", "queue_depth": 0, **EVERYTHING}),
    ("twenty-mixed-rect", 6, 20, {"allocation": "mixed", **EVERYTHING}),
    (
        "grammar-host-stop",
        7,
        10,
        {"allocation": "mixed", "grammar": 0.6, "host_stop": 0.5, "ragged": True},
    ),
    (
        "fixed-heavy-tight",
        8,
        14,
        {"fixed": 0.6, "verify_budget": 24, "ragged": True, "burst": True, "max_new": 40},
    ),
    ("copy-stops", 9, 10, {"copy": 0.8, "stops": 0.5, "allocation": "host"}),
    (
        "tight-budget",
        10,
        16,
        {"verify_budget": 20, "burst": True, "max_new": 50, "ragged": True, **EVERYTHING},
    ),
    (
        "tiny-budget-fixed",
        11,
        9,
        {"verify_budget": 9, "fixed": 0.4, "burst": True, "queue_depth": 2},
    ),
    (
        "few-slots",
        12,
        12,
        {
            "max_lanes": 4,
            "batch_buckets": (1, 2, 4),
            "burst": True,
            "allocation": "mixed",
            **EVERYTHING,
        },
    ),
    (
        "refresh-and-probes",
        13,
        8,
        {
            "refresh_period_us": 20_000,
            "probe_rate": 0.5,
            "credit_cap": 6.0,
            "probe_min_trials": 40,
            "ragged": True,
            **EVERYTHING,
        },
    ),
    ("burst-32-device", 14, 32, {"burst": True, "max_new": 30, "ragged": True}),
    (
        "burst-64-host",
        15,
        64,
        {
            "burst": True,
            "max_new": 12,
            "allocation": "host",
            "prefill_bonus_period_us": 100,
            "prefill_bonus_cap": 500.0,
        },
    ),
    (
        "burst-64-mixed-all",
        16,
        64,
        {
            "burst": True,
            "max_new": 10,
            "allocation": "mixed",
            "ragged": True,
            "prefill_bonus_period_us": 100,
            "prefill_bonus_cap": 500.0,
            "verify_budget": 96,
            **EVERYTHING,
        },
    ),
]


def case_scenarios() -> list[Any]:
    return [
        pytest.param(make_scenario(seed, requests, **kwargs), id=name)
        for name, seed, requests, kwargs in CASES
    ]


# -- comparison --------------------------------------------------------------------------
def records(scenario: Scenario, scheduler: Any) -> Iterator[tuple[str, bytes]]:
    """(record type, msgpack bytes) of every record, header first."""
    for record in drive(scenario, scheduler):
        yield record.get("t", "header"), msgpack.packb(record, use_bin_type=True)


def assert_same_trace(scenario: Scenario, contender: Any) -> int:
    """Drive reference and ``contender`` in lockstep; return the number of plans compared."""
    plans = 0
    expected_stream = records(scenario, ReferenceScheduler(scenario))
    actual_stream = records(scenario, contender)
    pairs = zip(expected_stream, actual_stream, strict=True)
    for index, ((kind, expected), (_kind, actual)) in enumerate(pairs):
        if expected != actual:
            want = msgpack.unpackb(expected, strict_map_key=False)
            got = msgpack.unpackb(actual, strict_map_key=False)
            fields = [k for k in want if want.get(k) != got.get(k)]
            pytest.fail(
                f"{scenario.features()}: record {index} ({kind} {want.get('plan')}) "
                f"differs in {fields}"
            )
        plans += kind == "plan"
    return plans


@pytest.mark.parametrize("scenario", case_scenarios())
def test_optimized_equals_reference(scenario: Scenario) -> None:
    assert assert_same_trace(scenario, OptimizedScheduler(scenario)) > 0


@pytest.mark.parametrize("scenario", case_scenarios())
def test_check_mode_passes(scenario: Scenario) -> None:
    assert assert_same_trace(scenario, CheckedOptimizedScheduler(scenario)) > 0


def test_cases_exercise_the_hard_paths() -> None:
    """The fixed cases really reach what the optimization must get right."""
    seen: dict[str, int] = dict.fromkeys(
        (
            "probe",
            "probe_past_bound",
            "probe_removes",
            "refresh",
            "pruned",
            "prefill_only",
            "no_round",
            "wide",
            "fixed_clipped",
        ),
        0,
    )
    for _name, seed, requests, kwargs in CASES:
        scenario = make_scenario(seed, requests, **kwargs)
        for record in drive(scenario, OptimizedScheduler(scenario)):
            if record.get("t") != "plan":
                continue
            record = rows_view(record)  # the typed tables as rows
            seen["no_round"] += record["round"] is None
            seen["pruned"] += bool(record["pruned"])
            seen["refresh"] += record["refresh"] >= 0
            seen["wide"] += len(record["eligible"]) >= 48
            if record["round"] is not None and not record["round"][6]:
                seen["prefill_only"] += 1
            candidates = record["candidates"]
            for row in candidates:
                prefixes = row[7]
                for lane, prefix in zip(record["eligible"], prefixes, strict=False):
                    if lane[3] >= 0 and prefix < min(lane[3], lane[2], row[4]):
                        seen["fixed_clipped"] += 1
            if record["probe"] >= 0:
                seen["probe"] += 1
                winner = candidates[record["winner"]]
                probe = record["probes"][record["probe"]]
                seen["probe_past_bound"] += probe[2] > winner[4]
                verified = sum(lane[2] for lane in record["round"][6])
                seen["probe_removes"] += verified == sum(winner[7])  # one added, one removed
    assert all(count > 0 for count in seen.values()), seen


# -- Hypothesis ----------------------------------------------------------------------------
@st.composite
def small_scenarios(draw: st.DrawFn) -> Scenario:
    requests = draw(st.integers(1, 12))
    burst = draw(st.booleans())
    specs = []
    for i in range(requests):
        max_new = draw(st.integers(1, 40))
        specs.append(
            RequestSpec(
                id=i,
                arrival_us=0 if burst else draw(st.integers(0, 60_000)),
                prompt_len=draw(st.integers(1, 700)),
                max_new=max_new,
                proposer=draw(st.sampled_from(("mtp", "copy"))),
                grammar_cap=draw(st.sampled_from((-1, -1, -1, 0, 1, 2, 3))),
                host_stop=draw(st.booleans()),
                fixed_width=draw(st.sampled_from((-1, -1, -1, 0, 1, 3, 7))),
                stop_at=draw(st.sampled_from((-1, -1, 1, max_new // 2 + 1))),
                accept_base=draw(st.floats(0.0, 1.0)),
                accept_decay=draw(st.floats(0.0, 1.0)),
            )
        )
    ragged = draw(st.booleans())
    params = SchedulerParams(
        allocation=draw(st.sampled_from(("host", "device", "mixed"))),
        ragged=ragged,
        queue_depth=draw(st.integers(0, 2)),
        verify_budget=draw(st.sampled_from((3, 8, 17, 40, 128))),
        alpha=draw(st.sampled_from((0.0, 0.3, 0.6, 1.0))),
        probe_rate=draw(st.sampled_from((0.0, 0.02, 0.5))),
        credit_cap=draw(st.sampled_from((0.5, 2.0, 10.0))),
        probe_min_trials=draw(st.sampled_from((0, 8, 1000))),
        refresh_period_us=draw(st.sampled_from((1, 30_000, 200_000))),
        eager_shapes=((1, 4, 8), (0, 8, 2)) if ragged else (),
    )
    truth = EngineTruth(
        device_truncation=draw(st.sampled_from((0.0, 0.25, 1.0))),
        copy_zero_run=draw(st.sampled_from((0.0, 0.3, 0.9))),
    )
    return Scenario("hypothesis", draw(st.integers(0, 2**31)), params, truth, tuple(specs))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_scenarios())
def test_optimized_equals_reference_on_random_scenarios(scenario: Scenario) -> None:
    assert_same_trace(scenario, CheckedOptimizedScheduler(scenario))


# -- check mode catches corruption ------------------------------------------------------
def test_check_mode_catches_a_corrupted_tracked_advance(monkeypatch: pytest.MonkeyPatch) -> None:
    def corrupted(self: SchedulerCore, state: RequestState, amount: int) -> None:
        state.tracked_advance += amount + (1 if state.spec.id == 2 else 0)

    monkeypatch.setattr(SchedulerCore, "_hold_advance", corrupted)
    scenario = make_scenario(21, 6, burst=True)
    with pytest.raises(
        SchedulerFault,
        match=r"plan \d+: check mode: pending advance of "
        r"request 2 differs",
    ):
        for _record in drive(scenario, CheckedOptimizedScheduler(scenario)):
            pass


def test_release_mode_does_not_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without check mode the scan is never run: the tracked value is the only source."""

    def scan(self: SchedulerCore, state: RequestState) -> int:
        raise AssertionError("scanned")

    monkeypatch.setattr(SchedulerCore, "pending_advance", scan)
    scenario = make_scenario(22, 6, burst=True)
    assert sum(1 for _ in drive(scenario, OptimizedScheduler(scenario))) > 0


def test_check_mode_catches_a_wrong_allocation(monkeypatch: pytest.MonkeyPatch) -> None:
    original = allocations.PlanContext.read  # every clipped allocation reads the ranking here

    def one_short(self: Any, lanes: Any, cohort: int, bound: int, left: int) -> Any:
        return original(self, lanes, cohort, bound, max(left - 1, 0))

    monkeypatch.setattr(allocations.PlanContext, "read", one_short)
    scenario = make_scenario(23, 16, burst=True, verify_budget=20)
    with pytest.raises(SchedulerFault, match=r"check mode: allocation \(cohort"):
        for _record in drive(scenario, CheckedOptimizedScheduler(scenario)):
            pass


def test_check_mode_catches_a_wrong_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    original = OptimizedScheduler._probes

    def no_removal(self: Any, *args: Any) -> Any:
        rows, plans = original(self, *args)
        return rows, [(position, -1, width) for position, _removed, width in plans]

    monkeypatch.setattr(OptimizedScheduler, "_probes", no_removal)
    scenario = make_scenario(24, 16, burst=True, verify_budget=24, max_new=40)
    with pytest.raises(SchedulerFault, match=r"check mode: (acceptance probes|shape of the)"):
        for _record in drive(scenario, CheckedOptimizedScheduler(scenario)):
            pass


def test_factories_load_by_name() -> None:
    scenario = make_scenario(25, 2)
    for factory in (OptimizedScheduler, CheckedOptimizedScheduler):
        scheduler = factory(scenario)
        assert isinstance(scheduler, OptimizedScheduler)
    assert OptimizedScheduler(scenario).check is False
    assert CheckedOptimizedScheduler(scenario).check is True


# -- the bench -----------------------------------------------------------------------------
def test_bench_smoke_and_round_trip() -> None:
    result = run_bench(
        {"reference": ReferenceScheduler, "optimized": OptimizedScheduler},
        requests=(8, 12),
        allocations=("host",),
        probe=(False, True),
        repeats=2,
    )
    assert [(c.requests, c.probe) for c in result.cells] == [
        (8, False),
        (8, True),
        (12, False),
        (12, True),
    ]
    for cell in result.cells:
        assert cell.records_equal
        assert (cell.probe_rows > 0) == cell.probe
        assert cell.ratio("optimized") > 0
    assert result.growth_of("optimized", "host", True).largest == 12
    data = bench_to_dict(result)
    assert data["format"] == "tracediff-bench" and data["version"] == 1
    assert bench_from_dict(data) == result
    assert bench_from_dict(msgpack.unpackb(msgpack.packb(data))) == result
