"""Typed columns end to end: deterministic bytes, a lossless round trip, precise refusals.

The built-in schedulers build their wide tables as typed columns (tracediff/trace/columns.py)
directly from ``plan()``; an implementation may also return rows, which the driver packs.
These tests hold the encoding to what comparing traces byte for byte needs: the reference
and the optimized scheduler (also in check mode, which compares its shape-built candidate
columns with ``pack_rows`` of its rows) produce the same bytes on scenarios with ragged
shapes, prefill rows, probes, refreshes and several lanes; every table of those records
unpacks to rows that pack back to the same bytes; an implementation returning rows gets
the same bytes; and a value a column cannot hold is refused with a message naming
``table[row].column``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tracediff.errors import SchedulerFault
from tracediff.models.specdec.engine.driver import drive
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched import optimized
from tracediff.models.specdec.sched.optimized import CheckedOptimizedScheduler, OptimizedScheduler
from tracediff.models.specdec.sched.record import (
    CANDIDATES,
    ELIGIBLE,
    LANE_VALUES,
    PROBES,
    PRUNED,
    TABLES,
    packed_record,
    rows_view,
)
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.trace import encode
from tracediff.trace.columns import ColumnError, TableSpec, is_packed, pack_rows, unpack_rows

# Quick-profile seeds that between them make ragged candidates, prefill rows, probes,
# refreshes, pruning and up to 11 eligible lanes (the test below says so if that changes);
# about a second in all.
SEEDS = (1, 9, 13, 18, 20)


class _Raw:
    """Wraps a scheduler to keep what its ``plan()`` returned, before the driver packs it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.plans: list[dict[str, Any]] = []

    def arrive(self, spec: Any, now: int) -> None:
        self.inner.arrive(spec, now)

    def plan(self, now: int) -> dict[str, Any]:
        record: dict[str, Any] = self.inner.plan(now)
        self.plans.append(record)
        return record

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        retired: list[int] = self.inner.complete(event, now)
        return retired


def _scenarios() -> Iterator[Scenario]:
    profile = load_profile("quick")
    return (generate(profile, seed) for seed in SEEDS)


def _trace(scenario: Scenario, scheduler: Any) -> list[bytes]:
    return [encode(record) for record in drive(scenario, scheduler)]


@pytest.fixture(scope="module")
def reference_records() -> list[tuple[Scenario, list[dict[str, Any]], list[dict[str, Any]]]]:
    """(scenario, the driver's records, what plan() itself returned) per seed."""
    out = []
    for scenario in _scenarios():
        raw = _Raw(ReferenceScheduler(scenario))
        out.append((scenario, list(drive(scenario, raw)), raw.plans))
    return out


def test_the_seeds_reach_every_kind_of_table_content(reference_records: Any) -> None:
    seen: Counter[str] = Counter()
    for _scenario, records, _raw in reference_records:
        for record in records:
            if record.get("t") != "plan":
                continue
            rows = rows_view(record)
            seen["ragged"] += any(
                c[CANDIDATES.names.index("kind")] == 1 for c in rows["candidates"]
            )
            seen["prefill"] += any(c[CANDIDATES.names.index("prefill")] for c in rows["candidates"])
            seen["probes"] += bool(rows["probes"])
            seen["refresh"] += rows["refresh"] >= 0
            seen["pruned"] += bool(rows["pruned"])
            seen["no round"] += rows["round"] is None
            seen["several lanes"] += len(rows["eligible"]) >= 8
    wanted = ("ragged", "prefill", "probes", "refresh", "pruned", "no round", "several lanes")
    assert all(seen[what] > 0 for what in wanted), f"update SEEDS: {seen}"


def test_built_in_plans_return_typed_columns(reference_records: Any) -> None:
    plans = 0
    for scenario, records, raw in reference_records:
        optimized_raw = _Raw(OptimizedScheduler(scenario))
        for _ in drive(scenario, optimized_raw):
            pass
        for record in (*raw, *optimized_raw.plans):
            for name in TABLES:
                assert is_packed(record[name]), f"{name} of plan {record['plan']} is not columns"
            plans += 1
        # the driver passes them on as they are (nothing to pack)
        driven = [r for r in records if r.get("t") == "plan"]
        assert [encode(r) for r in driven] == [encode(r) for r in raw]
    assert plans > 0


def test_reference_and_optimized_give_identical_bytes(reference_records: Any) -> None:
    for scenario, records, _raw in reference_records:
        expected = [encode(record) for record in records]
        assert _trace(scenario, OptimizedScheduler(scenario)) == expected, scenario.seed
        assert _trace(scenario, CheckedOptimizedScheduler(scenario)) == expected, scenario.seed
        assert _trace(scenario, ReferenceScheduler(scenario)) == expected, "run twice"


@pytest.mark.parametrize(
    ("builder", "table", "column"),
    [
        ("candidate_columns", "candidates", "duration"),
        ("eligible_columns", "eligible", "last_served"),
        ("lane_value_columns", "lane_values", "next_progress"),
        ("probe_columns", "probes", "trials"),
    ],
)
def test_check_mode_catches_columns_that_are_not_the_rows(
    monkeypatch: pytest.MonkeyPatch, builder: str, table: str, column: str
) -> None:
    built = getattr(optimized, builder)
    at = TABLES[table].names.index(column)

    def one_off(*args: Any) -> list[Any]:
        columns = built(*args)
        if columns[at]:
            damaged = bytearray(columns[at])
            damaged[0] ^= 1  # the first row's value, one apart
            columns[at] = bytes(damaged)
        return columns

    monkeypatch.setattr(optimized, builder, one_off)
    with pytest.raises(SchedulerFault, match=rf"plan \d+: check mode: {table} columns differs"):
        for seed in SEEDS:
            scenario = generate(load_profile("quick"), seed)
            for _record in drive(scenario, CheckedOptimizedScheduler(scenario)):
                pass


def test_every_table_round_trips_through_rows(reference_records: Any) -> None:
    tables: Counter[str] = Counter()
    for _scenario, records, _raw in reference_records:
        for record in records:
            if record.get("t") != "plan":
                continue
            rows = rows_view(record)
            for name, spec in TABLES.items():
                assert isinstance(rows[name], list)
                assert all(isinstance(row, list) for row in rows[name])
                assert pack_rows(spec, rows[name]) == record[name], name
                assert unpack_rows(spec, record[name]) == rows[name], name
                tables[name] += bool(rows[name])
            again = packed_record(rows)
            assert encode(again) == encode(record)
            assert rows_view(again) == rows
    assert set(tables) == set(TABLES) and all(tables.values()), tables


def test_row_values_come_back_as_their_types(reference_records: Any) -> None:
    _scenario, records, _raw = reference_records[0]
    plan = next(rows_view(r) for r in records if r.get("t") == "plan" and r["candidates"][0] != b"")
    eligible = plan["eligible"][0] if plan["eligible"] else None
    candidate = plan["candidates"][0]
    assert type(candidate[CANDIDATES.names.index("prefill")]) is bool
    assert type(candidate[CANDIDATES.names.index("prefixes")]) is list
    assert type(candidate[CANDIDATES.names.index("expected")]) is float
    assert type(candidate[CANDIDATES.names.index("duration")]) is int
    if eligible is not None:
        curve = eligible[ELIGIBLE.names.index("curve")]
        assert type(curve) is list and len(curve) == 7
        assert all(type(value) is float for value in curve)


def test_an_implementation_returning_rows_gets_the_same_bytes() -> None:
    """The driver packs row-form tables: a reference whose plan() unpacks its tables to
    rows records exactly the reference's trace."""

    class RowsReference(ReferenceScheduler):
        def plan(self, now: int) -> dict[str, Any]:
            record = rows_view(super().plan(now))
            assert not any(is_packed(record[name]) for name in TABLES if record[name])
            return record

    scenario = generate(load_profile("quick"), SEEDS[1])
    assert _trace(scenario, RowsReference(scenario)) == _trace(
        scenario, ReferenceScheduler(scenario)
    )


# -- refusals ------------------------------------------------------------------------------------
def _candidate(**changes: Any) -> list[Any]:
    row: dict[str, Any] = {
        "id": 0,
        "kind": 1,
        "cohort": 2,
        "prefill": False,
        "bound": 7,
        "b_pad": 2,
        "width": 8,
        "prefixes": [3, 4],
        "expected": 9.5,
        "duration": 12_000,
        "value": 0.75,
        "budget": 16,
    }
    row.update(changes)
    return list(row.values())


def _eligible(**changes: Any) -> list[Any]:
    row: dict[str, Any] = {
        "request": 5,
        "slot": 0,
        "cap": 7,
        "fixed_width": -1,
        "alloc": 0,
        "last_served": -1,
        "curve": [0.5] * 7,
    }
    row.update(changes)
    return list(row.values())


# (spec, rows, where the message must point, what it must say); a bad value in a later row
# so that the row number is checked too
BAD = [
    (CANDIDATES, [_candidate(), _candidate(kind=256)], "candidates[1].kind", "u8"),
    (CANDIDATES, [_candidate(), _candidate(kind=-1)], "candidates[1].kind", "u8"),
    (CANDIDATES, [_candidate(), _candidate(b_pad=32768)], "candidates[1].b_pad", "i16"),
    (PRUNED, [[0, 1], [2**31, 0]], "pruned[1].id", "i32"),
    (PROBES, [[0, 1, 2, 8, 0.5, 1.5, 2**63, 0.1]], "probes[0].duration", "i64"),
    (CANDIDATES, [_candidate(prefixes=[3, 256])], "candidates[0].prefixes", "u8[]"),
    (CANDIDATES, [_candidate(), _candidate(expected=math.nan)], "candidates[1].expected", "f64"),
    (LANE_VALUES, [[1, 2.0, math.inf, 5]], "lane_values[0].rate", "f64"),
    (LANE_VALUES, [[1, 2.0, 3.0, 5], [1, -math.inf, 3.0, 5]], "lane_values[1].expected", "f64"),
    (ELIGIBLE, [_eligible(curve=[0.5] * 6 + [math.nan])], "eligible[0].curve", "f64[7]"),
    (ELIGIBLE, [_eligible(curve=[0.5] * 6)], "eligible[0].curve", "f64[7]"),
    (CANDIDATES, [_candidate(), _candidate(prefill=2)], "candidates[1].prefill", "bool"),
    (CANDIDATES, [_candidate(duration=1.5)], "candidates[0].duration", "i64"),
    (CANDIDATES, [_candidate(expected="9.5")], "candidates[0].expected", "f64"),
    # a bool is a value of a bool column only, whether or not another row is wrong too
    (PRUNED, [[True, 1]], "pruned[0].id", "i32"),
    (CANDIDATES, [_candidate(), _candidate(prefixes=[3, True])], "candidates[1].prefixes", "u8[]"),
    (LANE_VALUES, [[1, 2.0, False, 5]], "lane_values[0].rate", "f64"),
    (ELIGIBLE, [_eligible(curve=[0.5] * 6 + [True])], "eligible[0].curve", "f64[7]"),
]


@pytest.mark.parametrize(
    ("spec", "rows", "where", "kind"),
    [pytest.param(*bad, id=f"{bad[2]}-{i}") for i, bad in enumerate(BAD)],
)
def test_pack_rows_names_the_value_a_column_cannot_hold(
    spec: TableSpec, rows: list[list[Any]], where: str, kind: str
) -> None:
    with pytest.raises(ColumnError) as caught:
        pack_rows(spec, rows)
    message = str(caught.value)
    assert message.startswith(f"{where} is "), message
    assert f"which a {kind} column cannot hold" in message, message


@pytest.mark.parametrize("width", [11, 13])
def test_pack_rows_refuses_a_row_of_the_wrong_width(width: int) -> None:
    row = _candidate()
    bad = row[:width] if width < len(row) else [*row, 0]
    with pytest.raises(ColumnError, match=re.escape(f"candidates[1]: a row of {width} values")):
        pack_rows(CANDIDATES, [row, bad])


def test_pack_rows_refuses_what_is_not_a_row() -> None:
    with pytest.raises(ColumnError, match=re.escape("pruned[1] is int 7, expected a row")):
        pack_rows(PRUNED, [[0, 1], 7])  # type: ignore[list-item]


def test_the_driver_names_the_table_row_and_column_of_a_bad_row() -> None:
    class WideCap(ReferenceScheduler):
        def plan(self, now: int) -> dict[str, Any]:
            record = rows_view(super().plan(now))
            if record["eligible"]:
                record["eligible"][0][ELIGIBLE.names.index("cap")] = 300
            return record

    scenario = generate(load_profile("quick"), SEEDS[1])
    with pytest.raises(
        SchedulerFault, match=r"plan \d+: malformed plan record: eligible\[0\]\.cap"
    ):
        for _record in drive(scenario, WideCap(scenario)):
            pass
