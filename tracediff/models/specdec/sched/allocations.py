"""What one optimized ``plan()`` computes once and shares across its candidates and probes.

The techniques are explained in the essay of ``sched/optimized.py`` ("One ranking of free
slots", "Running totals", "One cursor per (cohort, bound)"): the free slots of the eligible
lanes ranked once, what every lane wants under each width bound with the running totals of
E over the priority order, and one cursor per (cohort, bound) that reads the ranking once
however many budgets ask. Every float here is produced by the same operations, on the same
operands and in the same order as in the reference (``formulas``); only repetitions are
avoided.
"""

from __future__ import annotations

import itertools

from tracediff.models.specdec.scenario.model import MAX_DRAFT
from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.core import Lane

# One allocation: (prefixes, E, max prefix, verified tokens Σ(1 + p), prefixes as u8 bytes).
Allocation = tuple[list[int], float, int, int, bytes]

# Per width bound: (want per lane, and by cohort size n = 0..lanes the unclipped
# allocation's E and Σ prefix, and the wants as u8 bytes).
Wants = tuple[list[int], list[float], list[int], bytes]


class PlanContext:
    """What one ``plan()`` call computes once and shares across candidates and probes."""

    __slots__ = (
        "allocations",
        "by_cohort",
        "cursors",
        "curves",
        "fixed_positions",
        "limits",
        "per_bound",
        "ranking",
        "size",
        "slots",
        "sums",
    )

    def __init__(self, lanes: list[Lane], curves: list[list[float]]) -> None:
        self.curves = curves
        self.size = len(lanes)
        self.sums = [F.prefix_sums(curve) for curve in curves]
        self.slots = [lane.slot for lane in lanes]
        # A lane's want before the width bound: cap, or min(fixed_width, cap) when fixed.
        self.limits = [
            lane.cap if lane.fixed_width < 0 else min(lane.fixed_width, lane.cap) for lane in lanes
        ]
        self.fixed_positions = [p for p, lane in enumerate(lanes) if lane.fixed_width >= 0]
        self.ranking: list[tuple[int, int]] | None = None
        self.cursors: dict[tuple[int, int], Cursor] = {}
        self.by_cohort: dict[int, list[tuple[int, int]]] = {}
        # bound -> (want per lane, lane value of that want per lane)
        self.per_bound: dict[int, Wants] = {}
        self.allocations: dict[tuple[int, int, int], Allocation] = {}

    def wants(self, bound: int) -> Wants:
        """What every lane wants under ``bound`` when the budget does not bind, and for each
        cohort size n the allocation's E and tokens over the first n lanes (running totals
        in priority order: the same additions expected_tokens makes)."""
        entry = self.per_bound.get(bound)
        if entry is None:
            limits = self.limits
            # caps never exceed MAX_DRAFT: under the widest bound every lane wants its limit
            want = limits if bound >= MAX_DRAFT else [b if b < bound else bound for b in limits]
            values = [sums[p] for sums, p in zip(self.sums, want, strict=True)]
            entry = self.per_bound[bound] = (
                want,
                F.running_expected_tokens(values),
                list(itertools.accumulate(want, initial=0)),
                bytes(want),
            )
        return entry

    def ranked(self, lanes: list[Lane]) -> list[tuple[int, int]]:
        """Free slots (position, depth) of every non-fixed lane, best first."""
        if self.ranking is None:
            # (depth, slot, position) order, so the stable sort on -s breaks its ties as
            # slot_rank does; built by comprehensions, which run at C speed per slot.
            order = sorted(range(self.size), key=self.slots.__getitem__)
            free = [(p, lanes[p].cap) for p in order if lanes[p].fixed_width < 0]
            curves = self.curves
            entries = [(p, d) for d in range(1, MAX_DRAFT + 1) for p, cap in free if d <= cap]
            keys = [-curves[p][d - 1] for p, d in entries]
            self.ranking = [entries[i] for i in sorted(range(len(keys)), key=keys.__getitem__)]
        return self.ranking

    def cohort_ranking(self, lanes: list[Lane], cohort: int) -> list[tuple[int, int]]:
        """The ranking's slots of the first ``cohort`` lanes (one comprehension per cohort,
        in C; the widest-bound cursors then read it without skipping)."""
        found = self.by_cohort.get(cohort)
        if found is None:
            found = self.by_cohort[cohort] = [e for e in self.ranked(lanes) if e[0] < cohort]
        return found

    def forced(self, cohort: int, bound: int, budget: int) -> tuple[list[int], int]:
        """Prefixes after the fixed lanes took theirs, and the free budget left."""
        prefixes = [0] * cohort
        left = budget - cohort
        want = self.wants(bound)[0]
        for position in self.fixed_positions:
            if position >= cohort:
                break
            take = want[position]
            if take > left:
                take = left
            prefixes[position] = take
            left -= take
        return prefixes, left

    def allocate(self, lanes: list[Lane], cohort: int, bound: int, budget: int) -> Allocation:
        key = (cohort, bound, budget)
        found = self.allocations.get(key)
        if found is not None:
            return found
        want, running_e, running_tokens, want_bytes = self.wants(bound)
        if running_tokens[cohort] <= budget - cohort:
            # the budget does not bind: every lane gets its want
            prefixes = want[:cohort]
            found = (
                prefixes,
                running_e[cohort],
                max(prefixes),
                cohort + running_tokens[cohort],
                want_bytes[:cohort],
            )
        elif self.fixed_positions and self.fixed_positions[0] < cohort:
            prefixes, left = self.forced(cohort, bound, budget)
            if left > 0:
                self.take(lanes, prefixes, cohort, bound, left)
            values = [sums[p] for sums, p in zip(self.sums, prefixes, strict=False)]
            found = (
                prefixes,
                F.expected_tokens(values),
                max(prefixes),
                cohort + sum(prefixes),
                bytes(prefixes),
            )
        else:
            # no fixed lane in the cohort: the free slots are the whole allocation, and the
            # cursor already holds its lane values, widest prefix and Σ prefix
            cursor = self.read(lanes, cohort, bound, budget - cohort)
            prefixes = list(cursor.free)
            found = (
                prefixes,
                F.expected_tokens(cursor.values),
                cursor.widest,
                cohort + cursor.taken,
                bytes(prefixes),
            )
        self.allocations[key] = found
        return found

    def take(
        self, lanes: list[Lane], prefixes: list[int], cohort: int, bound: int, left: int
    ) -> None:
        """Lay the first ``left`` ranked free slots of the cohort under the bound over
        ``prefixes`` (which hold the fixed lanes' forced takes)."""
        for position, depth in enumerate(self.read(lanes, cohort, bound, left).free):
            if depth:
                prefixes[position] = depth

    def read(self, lanes: list[Lane], cohort: int, bound: int, left: int) -> Cursor:
        """The (cohort, bound) cursor, moved to where it has taken ``left`` free slots (or
        every one there is).

        The slots a (cohort, bound) takes under a larger budget start with those it takes
        under a smaller one (the same filtered ranking, read further), and a plan asks for
        the ragged budgets of a cohort in increasing order: so one cursor per (cohort,
        bound) reads the ranking once, however many budgets ask. A lane's slots come in
        depth order, so taking (position, depth) sets its free prefix to ``depth`` and its
        lane value to ``sums[position][depth]``; the cursor keeps both per lane, the count
        taken (the Σ of the free prefixes) and the deepest slot taken (the widest prefix).
        """
        key = (cohort, bound)
        cursor = self.cursors.get(key)
        if cursor is None or cursor.taken > left:
            cursor = self.cursors[key] = Cursor(cohort)
        taken = cursor.taken
        if taken < left:
            index, free, values, widest = cursor.index, cursor.free, cursor.values, cursor.widest
            sums = self.sums
            ranking = self.ranked(lanes)
            end = len(ranking)
            if bound >= MAX_DRAFT:  # every slot of the cohort's lanes qualifies
                if cohort < self.size:
                    ranking = self.cohort_ranking(lanes, cohort)
                    end = len(ranking)
                stop = index + left - taken
                if stop > end:
                    stop = end
                for position, depth in ranking[index:stop]:
                    free[position] = depth
                    values[position] = sums[position][depth]
                    if depth > widest:
                        widest = depth
                taken += stop - index
                index = stop
            else:
                while index < end:
                    position, depth = ranking[index]
                    index += 1
                    if position < cohort and depth <= bound:
                        free[position] = depth
                        values[position] = sums[position][depth]
                        if depth > widest:
                            widest = depth
                        taken += 1
                        if taken == left:
                            break
            cursor.index, cursor.taken, cursor.widest = index, taken, widest
        return cursor


class Cursor:
    """Where one (cohort, bound) stopped reading the ranking: the next index, the free
    slots taken so far, each lane's free prefix and its lane value (1.0 at prefix 0), and
    the deepest slot taken."""

    __slots__ = ("free", "index", "taken", "values", "widest")

    def __init__(self, cohort: int) -> None:
        self.index = 0
        self.taken = 0
        self.free = [0] * cohort
        self.values = [1.0] * cohort  # prefix_sums(curve)[0] is 1.0 for every lane
        self.widest = 0
