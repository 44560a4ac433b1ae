"""The optimized scheduler: the reference's decisions and arithmetic, computed fewer times.

Designing the fast path
=======================

``ReferenceScheduler`` is the specification; this module must return plan records whose
msgpack bytes equal the reference's for every call. Floating point forbids "equivalent"
algebra (a sum regrouped is a different number), so every technique below keeps each float
produced by the same operations, on the same operands, in the same order: it only avoids
*repeating* them. The arithmetic stays in ``formulas.py``; this module only calls it less.

Curves and prefix sums once per call.
    The reference evaluates every cohort lane's survival curve for every candidate, again
    for every probe, and again for the lane values. Here ``formulas.survival_curve`` runs
    once per eligible lane per ``plan()``; its list also goes into the ``eligible`` row.
    ``formulas.prefix_sums`` turns each curve into the lane values for p = 0..7 with the
    same left-to-right additions as ``formulas.lane_value``, so ``sums[p]`` has the bits of
    ``lane_value(curve, p)``. A candidate's E is still ``formulas.expected_tokens`` over its
    cohort's lane values in priority order: the summation order is the spec, so it is never
    replaced by a gain accumulated in rank order. (The running total of an *unclipped*
    allocation, below, is that same left-to-right sum read part-way.)

One ranking of free slots.
    A free slot (lane, depth)'s rank key ``slot_rank(s_k, k, slot)`` depends on neither the
    cohort, the width bound nor the budget. The slots of every non-fixed eligible lane are
    sorted once per call, lazily, the first time some allocation needs them; a candidate
    with cohort n and bound W takes the first ``left`` slots of that list with position < n
    and depth <= W. Filtering a sorted list keeps its order, so this is exactly the sorted
    subset the reference builds per candidate; prefixes stay contiguous because a lane's
    keys increase with depth. The sort uses ``-s`` as the key over a list built in
    (depth, slot, position) order: Python's sort is stable, so ties on ``-s`` keep that
    order, which is the order of the tuple ``(slot_rank(...), position)``. Check mode sorts
    the tuples and compares.

Skip the ranking when the budget does not bind.
    Each lane wants ``min(W, cap)`` drafts (``min(fixed_width, cap, W)`` when fixed). When
    the cohort's total want fits ``budget - n`` nobody is clipped and every lane gets its
    want: the prefixes are a slice of one per-bound list, and E, the widest prefix and the
    verified tokens of the first n lanes are entry n of running totals kept per bound
    (``formulas.running_expected_tokens``: ``expected_tokens`` from 0.0, left to right, each
    partial total kept, so entry n has the bits of the n-lane sum). No ranking is consulted
    and nothing is summed twice. At 8 lanes no rect candidate binds.

One cursor per (cohort, bound).
    When the budget binds, the allocation takes the first ``left`` ranked slots of the
    cohort under the bound. Under a larger budget the same (cohort, bound) takes those and
    more, further down the same filtered ranking, and a plan asks for a cohort's ragged
    budgets in increasing order: so a cursor per (cohort, bound) remembers where it stopped
    and the free prefixes it has set, and each larger budget reads on from there. The
    ranking is read once per (cohort, bound), not once per budget. Fixed lanes have no free
    slot; their forced takes (which depend on the budget) are laid over the cursor's free
    prefixes.

Allocations shared across shapes.
    An allocation depends on (n, W, budget) only: the rect candidate with W = 7 and the
    ragged one whose token bucket reaches the verification budget share it, and the
    candidates with a prefill row share every allocation of the candidates without one
    (they differ only by a constant prefill cost in the duration). Rect bounds are
    allocated from 7 down: when the allocation under W + 1 has no prefix wider than W, it
    is the allocation under W too (fixed lanes take the same, clipped or not, and its free
    slots, all no deeper than W, are the first ones of the smaller ranking as well), so it
    is reused with its E. Each allocation is computed once.

Candidates as columns.
    The candidates are never built as rows. Their shapes (kind, cohort, bound, budget,
    B_pad, width, allocation, table estimate) are listed once; durations and values are two
    lists (the prefill-row half: the same shapes, every duration raised by the prefill
    cost, the bonus in the value), and the record's columns are packed from those lists.
    The winner rule needs no pass over rows: a pruned candidate's dominator has at least
    its E and at most its duration, hence at least its value, so the highest value over all
    candidates belongs to an unpruned one, and only the unpruned candidates at that value
    are compared by ``formulas.winner_key``. A row is built for the winner, for the members
    of its group when a refresh is considered, and in check mode for all.

Durations from the table.
    ``table_estimate`` is read once per distinct shape per call; integer µs, no float.

Padding pruning within groups.
    The reference compares all pairs and keeps, for each pruned candidate, the *first* in
    candidate order that dominates it, among candidates of the same (kind, cohort, prefill
    row). Scanning only the candidate's group, in candidate order, finds the same first
    dominator with ``formulas.dominates``; a cheap necessary condition (E_y >= E_x and
    d_y <= d_x) is tested inline first. The prefill-row half of the candidates repeats the
    first half with every duration raised by one constant, which changes no comparison,
    so its pruned entries are the first half's shifted by the half's length.

Winner and refresh.
    The winner is the smallest ``formulas.winner_key``; its first component is ``-value``, so
    only candidates tied at the highest value need a key. Refresh follows the reference.

Acceptance probes from the winner's ranking.
    The reference re-runs the whole allocation per probe. Let ``left`` be the winner's free
    budget after its fixed lanes and T the free slots it took (the first T of its ranking R).
    Forcing lane i to p_i + 1 is valid (the forced drafts, fixed lanes included, all fit)
    exactly when p_i + 1 <= ``left``: a fixed lane is clipped only when ``left`` reaches 0.
    The probe then takes the first ``left - p_i - 1`` slots of R without lane i. If the
    budget binds (T == left) that is the winner's non-i slots minus the last-ranked one;
    if it does not (T < left, so every free slot of R was taken, p_i = min(W, cap_i)
    included) it is all of them. So: added = (i, p_i + 1), removed = the last-ranked non-i
    slot the winner took when the budget binds, nothing otherwise; ``formulas.probe_gain``
    and ``formulas.probe_cost`` then get the same operands as in the reference (which passes
    ``-(-s)``: negation is exact, so that is ``s``). A rect probe's width follows from the
    winner's widest prefix and how many lanes have it, a ragged probe's token count from the
    winner's. Check mode re-runs the reference allocation for every probe and compares.

Lane values once.
    Only the chosen round's lane values are built (``sums[p]``, ``formulas.service_rate``).

Pending advance tracked.
    ``SchedulerCore`` maintains ``RequestState.tracked_advance`` at commit and completion;
    ``pending_advance`` returns it instead of scanning every submitted lane.

Eligible lanes in one pass.
    The core's ``eligible_lanes`` calls ``pending_advance`` and ``lane_alloc`` per request
    and sorts with a key function. Here the tracked advance is read inline, a request's
    allocation (fixed by its spec and the scenario) is kept after its first plan, and the
    lanes are sorted on ready-made (last served, slot) pairs; check mode compares the list
    with the core's.

Check mode (the "debug build")
==============================

``OptimizedScheduler(scenario, check=True)`` (or ``CheckedOptimizedScheduler``) asserts on
every use that the tracked pending advance equals the scan, and after computing a plan
compares every cached or derived value with its reference-style recomputation: the slot
ranking, each allocation's prefixes and E, the pruned list (the reference's all-pairs
pruning), each probe's validity and prefixes, the chosen round's shape and lane values.
A mismatch raises :class:`tracediff.errors.SchedulerFault` naming the plan and the value.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tracediff.errors import SchedulerFault
from tracediff.models.specdec.scenario.model import MAX_DRAFT, Scenario
from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.allocations import Allocation, PlanContext
from tracediff.models.specdec.sched.core import (
    DECODING,
    DRAINING,
    Lane,
    RequestState,
    SchedulerCore,
    SubmittedLane,
    SubmittedRound,
)
from tracediff.models.specdec.sched.record import (
    CANDIDATES,
    SOURCE_PROBE,
    SOURCE_REFRESH,
    SOURCE_WINNER,
    TABLES,
    empty_plan_record,
    plan_record,
)
from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler
from tracediff.models.specdec.sched.tables import (
    CandidateTable,
    Shape,
    candidate_columns,
    eligible_columns,
    lane_value_columns,
    probe_columns,
)
from tracediff.trace.columns import pack_rows, pack_values

# Columns of a candidate row (record.CANDIDATE_COLUMNS).
_ID, _KIND, _COHORT, _PREFILL, _BOUND, _B_PAD, _WIDTH, _PREFIXES, _E, _DURATION, _VALUE = range(11)


def _first(pair: tuple[Any, Any]) -> Any:
    return pair[0]


def _key(row: list[Any]) -> tuple[float, int, int, int, int, int, bool, int]:
    return F.winner_key(
        row[_VALUE],
        row[_DURATION],
        row[_COHORT],
        row[_B_PAD],
        row[_WIDTH],
        row[_KIND],
        row[_PREFILL],
        row[_ID],
    )


class OptimizedScheduler(SchedulerCore):
    """SchedulerCore with the techniques of docs/optimized.md; ``check=True`` is the debug build."""

    name = "optimized"

    def __init__(self, scenario: Scenario, check: bool = False) -> None:
        super().__init__(scenario)
        self.check = check
        self._allocs: dict[int, int] = {}  # request id -> its lanes' allocation (HOST/DEVICE)
        # Only its pure helpers (allocate, shape_of, prune) are used, for cross-checks.
        self._spec = ReferenceScheduler(scenario) if check else None

    # -- eligible lanes -----------------------------------------------------------------
    def eligible_lanes(self) -> list[Lane]:
        """``SchedulerCore.eligible_lanes`` with its per-lane calls inlined: the tracked
        pending advance, the lane's allocation (fixed per request: read from a cache) and
        the priority sort on (last served, slot) pairs built once. Check mode compares
        with the core's."""
        lanes = []
        allocs = self._allocs
        for state in self.requests.values():
            if state.phase != DECODING:
                continue
            spec = state.spec
            if spec.host_stop and state.pending_count > 0:
                continue
            remaining = spec.max_new - state.generated - self.pending_advance(state)
            if remaining < 1:
                continue
            alloc = allocs.get(spec.id)
            if alloc is None:
                alloc = allocs[spec.id] = self.lane_alloc(spec)
            cap = remaining - 1 if remaining <= MAX_DRAFT else MAX_DRAFT
            if state.offer < cap:
                cap = state.offer  # drafts that were not proposed cannot be verified
            if spec.grammar and spec.grammar_cap < cap:
                cap = spec.grammar_cap
            lanes.append(
                (
                    (state.last_served, state.slot),
                    Lane(spec.id, state.slot, cap, spec.fixed_width, alloc, state),
                )
            )
        lanes.sort(key=_first)
        found = [lane for _key, lane in lanes]
        if self.check:
            expected = SchedulerCore.eligible_lanes(self)
            if found != expected:
                self._fault("eligible lanes", found, expected)
        return found

    # -- retirement -----------------------------------------------------------------------
    def retire_candidates(self, completed: SubmittedRound) -> Iterable[RequestState]:
        """Only the completed round's requests: a request retires when it drains with no
        lane in flight, and both happen only when a round of its completes (one that
        drained earlier with none in flight retired then). Check mode compares the
        requests that qualify with those of the core's scan of every request."""
        states = [self.requests[lane.request] for lane in completed.lanes]
        if self.check:

            def ready(found: Iterable[RequestState]) -> list[int]:
                return sorted(
                    s.spec.id for s in found if s.phase == DRAINING and s.pending_count == 0
                )

            mine, scanned = ready(states), ready(self.requests.values())
            if mine != scanned:
                self._fault("requests ready to retire", mine, scanned)
        return states

    # -- completion ------------------------------------------------------------------------
    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        """``SchedulerCore.complete`` with its per-round work done once: the same state
        changes in the same order, with the same integer arithmetic (the table update is
        ``formulas.updated_estimate``; the observed time loses the prefill's prior cost),
        and retirement looked for among the round's own requests (``retire_candidates``)."""
        submitted = self.submitted.pop(event["round"])
        requests = self.requests
        release = self._release_advance
        lanes = submitted.lanes
        for lane, result in zip(lanes, event["lanes"], strict=True):
            _request_id, verified, accepted, tokens, finished, offer = result
            state = requests[lane.request]
            generated = state.generated = state.generated + tokens
            if verified:
                trials = state.trials
                for k in range(verified):
                    trials[k] += 1
            if accepted:
                accepts = state.accepts
                for k in range(accepted):
                    accepts[k] += 1
            state.pending_count -= 1
            release(state, 1 + lane.prefix)
            state.offer = offer
            if state.phase == DECODING and (finished or generated >= state.spec.max_new):
                state.phase = DRAINING
        prefill_request = submitted.prefill_request
        if prefill_request >= 0:
            state = requests[prefill_request]
            state.prefill_in_flight = False
            state.prefilled += submitted.prefill_tokens
            if state.prefilled >= state.spec.prompt_len:
                state.phase = DECODING
        if lanes:
            observed = event["observed_us"]
            if prefill_request >= 0:
                observed -= F.prefill_cost(self.params, submitted.prefill_tokens)
            key = (submitted.kind, submitted.b_pad, submitted.width)
            estimate = self.table_estimate(*key)
            self.table[key] = [F.updated_estimate(estimate, observed if observed > 1 else 1), now]
        return self.retire_drained(submitted)

    # -- pending advance ---------------------------------------------------------------
    def pending_advance(self, state: RequestState) -> int:
        tracked = state.tracked_advance
        if self.check:
            scanned = SchedulerCore.pending_advance(self, state)
            if scanned != tracked:
                self._fault(f"pending advance of request {state.spec.id}", tracked, scanned)
        return tracked

    def _fault(self, what: str, mine: Any, recomputed: Any) -> None:
        raise SchedulerFault(
            f"plan {self.plan_number}: check mode: {what} differs: optimized {mine!r}, "
            f"recomputed {recomputed!r}"
        )

    # -- plan ----------------------------------------------------------------------------
    def plan(self, now: int) -> dict[str, Any]:
        self.plan_number += 1
        number = self.plan_number
        params = self.params
        lanes = self.eligible_lanes()
        prefill = self.prefill_candidate()
        alpha, weight = params.alpha, params.prior_weight
        curves = [
            F.survival_curve(lane.state.trials, lane.state.accepts, alpha, weight) for lane in lanes
        ]
        eligible = eligible_columns(lanes, curves)
        # check mode: the rows as the lanes are now (commit changes last_served)
        eligible_rows = (
            [
                [n.request, n.slot, n.cap, n.fixed_width, n.alloc, n.state.last_served, c]
                for n, c in zip(lanes, curves, strict=True)
            ]
            if self.check
            else []
        )
        credit_before = self.credit
        if not lanes and prefill is None:
            return empty_plan_record(plan=number, now=now, eligible=eligible, credit=self.credit)
        context = PlanContext(lanes, curves)
        durations: dict[tuple[int, int, int], int] = {}
        prefill_tokens = 0
        bonus = 0.0
        if prefill is not None:
            prefill_tokens = min(params.prefill_chunk, prefill.spec.prompt_len - prefill.prefilled)
            bonus = F.prefill_bonus(params, now - prefill.spec.arrival_us)
        table, candidate_columns = self._candidates(
            context, lanes, durations, prefill is not None, prefill_tokens, bonus
        )
        pruned = self._prune(table)
        # winner_key starts with -value: only the candidates at the highest value compete.
        # A pruned candidate's dominator has at least its E and at most its duration, so at
        # least its value: the highest value over all candidates is an unpruned one's.
        values = table.values
        best_value = max(values)
        ties = [i for i, value in enumerate(values) if value == best_value and i not in pruned]
        winner_id = min(ties, key=table.key)
        winner = table.row(winner_id)
        chosen = winner
        source = SOURCE_WINNER
        round_prefill_tokens = prefill_tokens if winner[_PREFILL] else 0

        self.credit = F.accrue_credit(params, self.credit, winner[_E])
        probe_rows: list[list[Any]] = []
        probe_plans: list[tuple[int, int, int]] = []
        probe_index = -1
        chosen_prefixes: list[int] = winner[_PREFIXES]
        chosen_expected, chosen_duration = winner[_E], winner[_DURATION]
        chosen_b_pad, chosen_width = winner[_B_PAD], winner[_WIDTH]
        if winner[_COHORT] > 0:
            probe_rows, probe_plans = self._probes(
                context, lanes, durations, winner, table.budget(winner_id), round_prefill_tokens
            )
            best: tuple[int, float, int] | None = None
            for index, row in enumerate(probe_rows):
                if row[7] <= self.credit:
                    order = (row[3], row[7], row[0])
                    if best is None or order < best:
                        best, probe_index = order, index
            if probe_index >= 0:
                row = probe_rows[probe_index]
                self.credit -= max(row[7], 0.0)
                source = SOURCE_PROBE
                position, removed, chosen_width = probe_plans[probe_index]
                chosen_prefixes = list(winner[_PREFIXES])
                chosen_prefixes[position] += 1
                if removed >= 0:
                    chosen_prefixes[removed] -= 1
                chosen_expected, chosen_duration = row[5], row[6]

        refresh = -1
        if probe_index < 0 and winner[_COHORT] > 0 and self._is_fresh(winner, now):
            stale = [
                row
                for row in map(table.row, table.group_of(winner_id))
                if row[_ID] != winner_id and row[_ID] not in pruned and not self._is_fresh(row, now)
            ]
            if stale:
                candidate = min(stale, key=_key)
                if candidate[_VALUE] >= winner[_VALUE] * (1.0 - params.refresh_tolerance):
                    chosen, source, refresh = candidate, SOURCE_REFRESH, candidate[_ID]
                    chosen_prefixes = candidate[_PREFIXES]
                    chosen_expected, chosen_duration = candidate[_E], candidate[_DURATION]
                    chosen_b_pad, chosen_width = candidate[_B_PAD], candidate[_WIDTH]

        cohort = lanes[: chosen[_COHORT]]
        round_lanes = [
            SubmittedLane(lane.request, lane.slot, p, lane.alloc)
            for lane, p in zip(cohort, chosen_prefixes, strict=True)
        ]
        prefill_request = prefill.spec.id if (chosen[_PREFILL] and prefill) else -1
        progress = now + self.queued_duration() + chosen_duration
        sums = context.sums
        lane_values = []
        for position, lane in enumerate(cohort):
            value = sums[position][chosen_prefixes[position]]
            lane_values.append(
                [lane.request, value, F.service_rate(value, chosen_duration), progress]
            )
        if self.check:
            rows = table.rows()
            budgets = [table.budget(i) for i in range(table.total)]
            self._check_plan(
                context,
                lanes,
                rows,
                budgets,
                pruned,
                winner,
                probe_rows,
                probe_plans,
                (chosen[_KIND], chosen_prefixes, chosen_b_pad, chosen_width),
                lane_values,
            )
            self._check_against_reference(
                lanes,
                prefill,
                now,
                rows,
                pruned,
                winner_id,
                probe_rows,
                lane_values,
                (chosen_prefixes, chosen_duration),
            )
        submitted = SubmittedRound(
            number,
            chosen[_KIND],
            chosen_b_pad,
            chosen_width,
            tuple(round_lanes),
            prefill_request,
            round_prefill_tokens,
            chosen_duration,
        )
        self.commit(submitted)
        round_row = submitted.row(source, chosen_expected)
        ids = sorted(pruned)
        record = plan_record(
            plan=number,
            now=now,
            eligible=eligible,
            prefill=prefill.spec.id if prefill else -1,
            credit_before=credit_before,
            candidates=candidate_columns,
            pruned=[
                pack_values("i", ids),
                pack_values("i", [pruned[cid] for cid in ids]),
            ],
            winner=winner_id,
            probes=probe_columns(probe_rows),
            probe=probe_index,
            refresh=refresh,
            credit_after=self.credit,
            round_=round_row,
            lane_values=lane_value_columns(lane_values),
        )
        if self.check:
            # every table built column by column must be its rows' encoding, byte for byte
            tables: dict[str, list[Any]] = {
                "eligible": eligible_rows,
                "candidates": rows,
                "pruned": [[cid, pruned[cid]] for cid in ids],
                "probes": probe_rows,
                "lane_values": lane_values,
            }
            for name, table_rows in tables.items():
                expected = pack_rows(TABLES[name], table_rows)
                if record[name] != expected:
                    self._fault(f"{name} columns", record[name], expected)
        return record

    # -- the pieces of a plan ------------------------------------------------------------
    def _duration(
        self, durations: dict[tuple[int, int, int], int], kind: int, b_pad: int, width: int
    ) -> int:
        key = (kind, b_pad, width)
        found = durations.get(key)
        if found is None:
            found = durations[key] = self.table_estimate(kind, b_pad, width)
        return found

    def _candidates(
        self,
        context: PlanContext,
        lanes: list[Lane],
        durations: dict[tuple[int, int, int], int],
        prefill_row: bool,
        prefill_tokens: int,
        bonus: float,
    ) -> tuple[CandidateTable, list[Any]]:
        """The candidates in the reference's order, as a :class:`CandidateTable` and as the
        record's typed columns."""
        params = self.params
        extra = F.prefill_cost(params, prefill_tokens) if prefill_tokens else 0
        if not lanes:  # the prefill-only round (a prefill row exists, or plan returned)
            expected = F.expected_tokens([])
            only: Shape = (F.RECT, 0, 0, 0, 0, 0, ([], expected, 0, 0, b""), 0)
            table = CandidateTable(
                [only], 1, 0, [extra], [F.candidate_value(expected, bonus, extra)], []
            )
            return table, pack_rows(CANDIDATES, table.rows())
        # Shapes (kind, cohort, bound, budget, b_pad, width, allocation, table estimate).
        shapes: list[Shape] = []
        groups: list[tuple[int, int]] = []  # (start, end) of each (kind, cohort) group
        verify_budget = params.verify_budget
        table_estimate = self.table_estimate
        for cohort in F.cohort_sizes(params, len(lanes)):
            b_pad = F.bucket(params.batch_buckets, cohort)
            # Bounds from 7 down: an allocation whose widest prefix fits a lower bound W is
            # also the allocation under W (the same forced takes and, its slots all being
            # no deeper than W, the same first slots of the smaller ranking).
            start = len(shapes)
            by_bound: list[Allocation] = []
            above: Allocation | None = None
            for bound in range(MAX_DRAFT, -1, -1):
                if above is None or above[2] > bound:
                    above = context.allocate(lanes, cohort, bound, verify_budget)
                by_bound.append(above)
            for bound in range(MAX_DRAFT + 1):
                allocation = by_bound[MAX_DRAFT - bound]
                width = allocation[2]
                estimate = durations.get((F.RECT, b_pad, width))
                if estimate is None:
                    estimate = durations[(F.RECT, b_pad, width)] = table_estimate(
                        F.RECT, b_pad, width
                    )
                shapes.append(
                    (F.RECT, cohort, bound, verify_budget, b_pad, width, allocation, estimate)
                )
            groups.append((start, len(shapes)))
            start = len(shapes)
            if params.ragged:
                for tokens in params.token_buckets:
                    if tokens >= cohort:
                        budget = min(verify_budget, tokens)
                        allocation = context.allocate(lanes, cohort, MAX_DRAFT, budget)
                        width = F.bucket(params.token_buckets, allocation[3])
                        estimate = durations.get((F.RAGGED, b_pad, width))
                        if estimate is None:
                            estimate = durations[(F.RAGGED, b_pad, width)] = table_estimate(
                                F.RAGGED, b_pad, width
                            )
                        shapes.append(
                            (
                                F.RAGGED,
                                cohort,
                                MAX_DRAFT,
                                budget,
                                b_pad,
                                width,
                                allocation,
                                estimate,
                            )
                        )
            if params.ragged and len(shapes) > start:
                groups.append((start, len(shapes)))
        # The candidates without a prefill row, then (with one) the same shapes with it:
        # every duration raised by the prefill cost, the bonus in the value.
        estimates = [shape[7] for shape in shapes]
        e_of = [shape[6][1] for shape in shapes]
        value = F.candidate_value
        all_durations = list(estimates)
        all_values = [value(e, 0.0, d) for e, d in zip(e_of, estimates, strict=True)]
        halves = 1
        if prefill_row:
            halves = 2
            raised = [estimate + extra for estimate in estimates]
            all_durations += raised
            all_values += [value(e, bonus, d) for e, d in zip(e_of, raised, strict=True)]
        count = len(shapes)
        table = CandidateTable(shapes, count * halves, count, all_durations, all_values, groups)
        return table, candidate_columns(shapes, halves, all_durations, all_values)

    @staticmethod
    def _prune(table: CandidateTable) -> dict[int, int]:
        """Candidate id -> id of the first candidate of its group that dominates it.

        The reference compares all pairs; only candidates of one (kind, cohort, prefill row)
        group can dominate each other, so each group is scanned alone, in candidate order.
        The candidates with a prefill row repeat those without, with the same E and shape
        and every duration raised by the same prefill cost: dominance is unchanged, so their
        pruned entries are the first half's shifted by the half's length.
        """
        pruned: dict[int, int] = {}
        dominates = F.dominates
        shapes, durations = table.shapes, table.durations
        for start, end in table.groups:
            if end - start < 2:
                continue
            members = range(start, end)
            expected = [shapes[i][6][1] for i in members]
            duration = durations[start:end]
            keys = [(shapes[i][4], shapes[i][5], shapes[i][2]) for i in members]
            size = end - start
            for x in range(size):
                x_expected, x_duration = expected[x], duration[x]
                for y in range(size):
                    if (
                        y != x
                        and expected[y] >= x_expected  # necessary for dominance
                        and duration[y] <= x_duration
                        and dominates(
                            expected[y], duration[y], keys[y], x_expected, x_duration, keys[x]
                        )
                    ):
                        pruned[start + x] = start + y
                        break
        if table.total > table.size:
            half = table.size
            pruned.update({x + half: y + half for x, y in list(pruned.items())})
        return pruned

    def _probes(
        self,
        context: PlanContext,
        lanes: list[Lane],
        durations: dict[tuple[int, int, int], int],
        winner: list[Any],
        budget: int,
        prefill_tokens: int,
    ) -> tuple[list[list[Any]], list[tuple[int, int, int]]]:
        """Probe rows, and per row (probed position, position that lost a slot or -1, width)."""
        rows: list[list[Any]] = []
        plans: list[tuple[int, int, int]] = []
        cohort_size, bound, kind = winner[_COHORT], winner[_BOUND], winner[_KIND]
        prefixes: list[int] = winner[_PREFIXES]
        _forced, left = context.forced(cohort_size, bound, budget)
        if left <= 0:
            return rows, plans  # no forced draft fits
        taken = sum(prefixes)
        for position in context.fixed_positions:
            if position >= cohort_size:
                break
            taken -= prefixes[position]
        binds = taken == left
        # The last-ranked slot the winner took, and the last-ranked one of another lane.
        last = (-1, 0)
        other = (-1, 0)
        if binds:
            count = 0
            for position, depth in context.ranked(lanes):
                if position < cohort_size and depth <= bound:
                    if position != last[0]:
                        other = last
                    last = (position, depth)
                    count += 1
                    if count == taken:
                        break
        params = self.params
        min_trials = params.probe_min_trials
        curves = context.curves
        widest = max(prefixes)
        at_widest = prefixes.count(widest)
        tokens = cohort_size + sum(prefixes) + (0 if binds else 1)
        extra = F.prefill_cost(params, prefill_tokens) if prefill_tokens else 0
        b_pad = winner[_B_PAD]
        e_winner, d_winner = winner[_E], winner[_DURATION]
        for position in range(cohort_size):
            lane = lanes[position]
            if lane.fixed_width >= 0:
                continue
            depth = prefixes[position] + 1
            if depth > lane.cap:
                continue
            trials = lane.state.trials[depth - 1]
            if trials >= min_trials or depth > left:
                continue  # depth > left: the forced drafts do not fit in the budget
            removed = -1
            removed_gains: list[float] = []
            removed_depth = 0
            if binds:
                removed, removed_depth = last if last[0] != position else other
                removed_gains.append(curves[removed][removed_depth - 1])
            gain = F.probe_gain([curves[position][depth - 1]], removed_gains)
            expected = e_winner + gain
            if kind == F.RECT:
                if depth > widest:
                    width = depth
                else:
                    still = at_widest + (depth == widest) - (removed_depth == widest)
                    width = widest if still > 0 else widest - 1
            else:
                width = F.bucket(params.token_buckets, tokens)
            duration = self._duration(durations, kind, b_pad, width) + extra
            cost = F.probe_cost(e_winner, d_winner, expected, duration)
            rows.append([position, lane.request, depth, trials, gain, expected, duration, cost])
            plans.append((position, removed, width))
        return rows, plans

    def _is_fresh(self, row: list[Any], now: int) -> bool:
        observed = self.table_observed(row[_KIND], row[_B_PAD], row[_WIDTH])
        return observed >= 0 and now - observed < self.params.refresh_period_us

    # -- check mode ----------------------------------------------------------------------
    def _check_plan(
        self,
        context: PlanContext,
        lanes: list[Lane],
        rows: list[list[Any]],
        budgets: list[int],
        pruned: dict[int, int],
        winner: list[Any],
        probe_rows: list[list[Any]],
        probe_plans: list[tuple[int, int, int]],
        chosen: tuple[int, list[int], int, int],
        lane_values: list[list[Any]],
    ) -> None:
        """Compare every cached or derived value with a reference-style recomputation."""
        spec = self._spec
        assert spec is not None
        curves = context.curves
        if context.ranking is not None:
            ranking = []
            for position, lane in enumerate(lanes):
                if lane.fixed_width < 0:
                    for depth in range(1, lane.cap + 1):
                        rank = F.slot_rank(curves[position][depth - 1], depth, lane.slot)
                        ranking.append((rank, position, depth))
            ranking.sort()
            expected_order = [(position, depth) for _rank, position, depth in ranking]
            if context.ranking != expected_order:
                self._fault("slot ranking", context.ranking, expected_order)
        for (cohort, bound, budget), allocation in context.allocations.items():
            prefixes = spec.allocate(lanes[:cohort], curves[:cohort], bound, budget)
            expected = F.expected_tokens(
                [F.lane_value(curve, p) for curve, p in zip(curves, prefixes, strict=False)]
            )
            mine = (allocation[0], allocation[1], allocation[2], allocation[3])
            theirs = (prefixes, expected, max(prefixes), cohort + sum(prefixes))
            if mine != theirs:
                self._fault(
                    f"allocation (cohort {cohort}, bound {bound}, budget {budget})", mine, theirs
                )
        for row in rows:
            shape = spec.shape_of(row[_KIND], row[_COHORT], row[_PREFIXES])
            if (row[_B_PAD], row[_WIDTH]) != shape:
                self._fault(f"shape of candidate {row[_ID]}", (row[_B_PAD], row[_WIDTH]), shape)
        all_pairs = spec.prune(
            [
                Candidate(
                    row[_ID],
                    row[_KIND],
                    row[_COHORT],
                    row[_PREFILL],
                    row[_BOUND],
                    budget,
                    row[_B_PAD],
                    row[_WIDTH],
                    row[_PREFIXES],
                    row[_E],
                    row[_DURATION],
                    row[_VALUE],
                    [],
                )
                for row, budget in zip(rows, budgets, strict=True)
            ]
        )
        if pruned != all_pairs:
            self._fault("pruned list", sorted(pruned.items()), sorted(all_pairs.items()))
        self._check_probes(context, lanes, winner, probe_rows, probe_plans, budgets[winner[_ID]])
        kind, prefixes, b_pad, width = chosen
        shape = spec.shape_of(kind, len(prefixes), prefixes)
        if (b_pad, width) != shape:
            self._fault("shape of the chosen round", (b_pad, width), shape)
        values = [row[1] for row in lane_values]
        recomputed = [F.lane_value(c, p) for c, p in zip(curves, prefixes, strict=False)]
        if values != recomputed:
            self._fault("lane values", values, recomputed)

    def _check_against_reference(
        self,
        lanes: list[Lane],
        prefill: RequestState | None,
        now: int,
        rows: list[list[Any]],
        pruned: dict[int, int],
        winner_id: int,
        probe_rows: list[list[Any]],
        lane_values: list[list[Any]],
        chosen: tuple[list[int], int],
    ) -> None:
        """Every recorded value against the reference's own pieces, on this state.

        The reference's candidate enumeration, allocation, E, duration and value per row
        (so allocations reused across width bounds are checked too, not only those computed),
        its all-pairs pruning, winner rule, probe rows (gain, E, duration, cost) and lane
        values; the reference reads this scheduler's table, requests and rounds in flight.
        """
        spec = self._spec
        assert spec is not None
        spec.table = self.table
        spec.requests = self.requests
        spec.submitted = self.submitted
        candidates = spec.candidates(lanes, prefill, now)
        theirs = [c.row() for c in candidates]
        if len(theirs) != len(rows):
            self._fault("number of candidates", len(rows), len(theirs))
        for mine, row in zip(rows, theirs, strict=True):
            if mine != row:
                self._fault(f"candidate {row[_ID]}", mine, row)
        all_pairs = spec.prune(candidates)
        if pruned != all_pairs:
            self._fault("pruned list", sorted(pruned.items()), sorted(all_pairs.items()))
        winner = spec.best([c for c in candidates if c.id not in all_pairs])
        if winner.id != winner_id:
            self._fault("winner", winner_id, winner.id)
        if winner.cohort == 0:
            return
        prefill_tokens = spec.prefill_tokens(prefill) if winner.prefill else 0
        probes, _allocations = spec.probes(winner, lanes, prefill_tokens)
        if probes != probe_rows:
            self._fault("acceptance probe rows", probe_rows, probes)
        prefixes, duration = chosen
        recomputed = spec.lane_values(lanes[: len(prefixes)], prefixes, duration, now)
        if lane_values != recomputed:
            self._fault("lane values", lane_values, recomputed)

    def _check_probes(
        self,
        context: PlanContext,
        lanes: list[Lane],
        winner: list[Any],
        probe_rows: list[list[Any]],
        probe_plans: list[tuple[int, int, int]],
        budget: int,
    ) -> None:
        spec = self._spec
        assert spec is not None
        cohort_size = winner[_COHORT]
        if cohort_size == 0:
            return
        cohort = lanes[:cohort_size]
        curves = context.curves[:cohort_size]
        expected_probes: list[tuple[int, list[int]]] = []
        for position, lane in enumerate(cohort):
            depth = winner[_PREFIXES][position] + 1
            if lane.fixed_width >= 0 or depth > lane.cap:
                continue
            if lane.state.trials[depth - 1] >= self.params.probe_min_trials:
                continue
            prefixes = spec.allocate(cohort, curves, winner[_BOUND], budget, position, depth)
            if prefixes[position] != depth or any(
                other.fixed_width >= 0 and prefixes[q] != winner[_PREFIXES][q]
                for q, other in enumerate(cohort)
            ):
                continue
            expected_probes.append((position, prefixes))
        mine: list[tuple[int, list[int]]] = []
        for row, (position, removed, width) in zip(probe_rows, probe_plans, strict=True):
            prefixes = list(winner[_PREFIXES])
            prefixes[position] += 1
            if removed >= 0:
                prefixes[removed] -= 1
            mine.append((position, prefixes))
            shape = spec.shape_of(winner[_KIND], cohort_size, prefixes)
            if (winner[_B_PAD], width) != shape:
                self._fault(
                    f"shape of the probe of position {row[0]}", (winner[_B_PAD], width), shape
                )
        if mine != expected_probes:
            self._fault("acceptance probes (position, prefixes)", mine, expected_probes)


class CheckedOptimizedScheduler(OptimizedScheduler):
    """The optimized scheduler in check mode, loadable as ``module:attr``."""

    name = "optimized-check"

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario, check=True)
