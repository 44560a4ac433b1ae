"""The optimized scheduler's tables as typed columns, built without row objects.

The plan record stores its tables as typed columns (``record.TABLES``; the format in
docs/trace-format.md). The reference builds rows and packs them; the optimized scheduler
builds each column in a few C-level passes over what it already holds (lanes, probe rows,
the candidates' shapes), and keeps the candidate table itself as columns
(:class:`CandidateTable`), building a row only for what reads one: the winner, its group
and check mode. The bytes are the reference's: ``pack_values`` writes the same typed
column ``pack_rows`` would (tests/test_columns.py checks both against each other).
"""

from __future__ import annotations

from typing import Any

from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.allocations import Allocation
from tracediff.models.specdec.sched.core import Lane
from tracediff.models.specdec.sched.record import ELIGIBLE, LANE_VALUES, PROBES
from tracediff.trace.columns import pack_values

# One candidate's shape: (kind, cohort, bound, budget, b_pad, width, allocation, table
# estimate), the columns of its row that do not depend on the prefill row.
Shape = tuple[int, int, int, int, int, int, Allocation, int]


def eligible_columns(lanes: list[Lane], curves: list[list[float]]) -> list[Any]:
    """The eligible table as typed columns (``record.ELIGIBLE``): one pass over the lanes,
    one C-level transposition, one conversion per column."""
    if not lanes:
        return ELIGIBLE.empty()
    rows = [(n.request, n.slot, n.cap, n.fixed_width, n.alloc, n.state.last_served) for n in lanes]
    requests, slots, caps, fixed, allocs, served = zip(*rows, strict=True)
    return [
        pack_values("i", requests),
        pack_values("h", slots),
        bytes(caps),
        pack_values("b", fixed),
        bytes(allocs),
        pack_values("i", served),
        pack_values("d", [value for curve in curves for value in curve]),
    ]


def probe_columns(rows: list[list[Any]]) -> list[Any]:
    """The probes table as typed columns (``record.PROBES``), from its rows."""
    if not rows:
        return PROBES.empty()
    position, request, depth, trials, gain, expected, duration, cost = zip(*rows, strict=True)
    return [
        pack_values("h", position),
        pack_values("i", request),
        bytes(depth),
        pack_values("i", trials),
        pack_values("d", gain),
        pack_values("d", expected),
        pack_values("q", duration),
        pack_values("d", cost),
    ]


def lane_value_columns(rows: list[list[Any]]) -> list[Any]:
    """The lane values table as typed columns (``record.LANE_VALUES``), from its rows."""
    if not rows:
        return LANE_VALUES.empty()
    request, expected, rate, progress = zip(*rows, strict=True)
    return [
        pack_values("i", request),
        pack_values("d", expected),
        pack_values("d", rate),
        pack_values("q", progress),
    ]


def candidate_columns(
    shapes: list[Shape], halves: int, durations: list[int], values: list[float]
) -> list[Any]:
    """The candidates table as typed columns, built from the shapes in a few C-level passes.

    Row i of each half is shape i; the half with a prefill row repeats the first half's
    columns except ``id``, ``prefill``, ``duration`` and ``value``, so those columns are
    the first half's bytes repeated. A prefix list has one entry per cohort lane, so the
    ragged ``prefixes`` column's lengths are the cohort sizes.
    """
    kinds, cohorts, bounds, budgets, b_pads, widths, allocations, _ = zip(*shapes, strict=True)
    count = len(shapes)
    return [
        pack_values("i", range(count * halves)),
        bytes(kinds) * halves,
        pack_values("h", cohorts) * halves,
        bytes(count) + b"\x01" * count if halves == 2 else bytes(count),
        bytes(bounds) * halves,
        pack_values("h", b_pads) * halves,
        pack_values("h", widths) * halves,
        [
            pack_values("H", cohorts) * halves,
            b"".join([allocation[4] for allocation in allocations]) * halves,
        ],
        pack_values("d", [allocation[1] for allocation in allocations]) * halves,
        pack_values("q", durations),
        pack_values("d", values),
        pack_values("h", budgets) * halves,
    ]


class CandidateTable:
    """The candidate table as columns: the shapes of the first half (no prefill row), each
    candidate's duration and value, and the (start, end) range of every (kind, cohort)
    group in the first half. Candidate i is shape ``i % size``; it has the prefill row when
    ``i >= prefill_from``. A candidate's row (``record.CANDIDATE_COLUMNS`` order, plus its
    budget) is built only when something reads it: the winner, its group, check mode."""

    __slots__ = ("durations", "groups", "prefill_from", "shapes", "size", "total", "values")

    def __init__(
        self,
        shapes: list[Shape],
        total: int,
        prefill_from: int,
        durations: list[int],
        values: list[float],
        groups: list[tuple[int, int]],
    ) -> None:
        self.shapes, self.size, self.total = shapes, len(shapes), total
        self.prefill_from, self.durations, self.values = prefill_from, durations, values
        self.groups = groups

    def row(self, i: int) -> list[Any]:
        kind, cohort, bound, budget, b_pad, width, allocation, _ = self.shapes[i % self.size]
        return [
            i,
            kind,
            cohort,
            i >= self.prefill_from,
            bound,
            b_pad,
            width,
            allocation[0],
            allocation[1],
            self.durations[i],
            self.values[i],
            budget,
        ]

    def rows(self) -> list[list[Any]]:
        return [self.row(i) for i in range(self.total)]

    def budget(self, i: int) -> int:
        return self.shapes[i % self.size][3]

    def key(self, i: int) -> tuple[float, int, int, int, int, int, bool, int]:
        kind, cohort, _bound, _budget, b_pad, width, _allocation, _ = self.shapes[i % self.size]
        return F.winner_key(
            self.values[i],
            self.durations[i],
            cohort,
            b_pad,
            width,
            kind,
            i >= self.prefill_from,
            i,
        )

    def group_of(self, i: int) -> range:
        """The candidates of i's (kind, cohort, prefill row) group."""
        offset = self.size if i >= self.size else 0
        for start, end in self.groups:
            if start <= i - offset < end:
                return range(start + offset, end + offset)
        return range(i, i + 1)
