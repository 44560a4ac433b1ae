"""The reference scheduler: the executable specification, written to be read.

Every ``plan()`` call recomputes what it needs from scratch, the way the engine's main
branch did before the optimisation docs/optimized.md describes: each candidate evaluates
its cohort's survival curves and
sorts its own ranking of free slots; padding pruning compares all pairs of candidates;
each acceptance-probe candidate re-runs the whole allocation; lane values are evaluated
for every candidate; pending advance is found by scanning the submitted rounds.

It is never slowed down on purpose: it is simply direct. The optimized scheduler must
produce the same bytes with less work (see ``optimized.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tracediff.models.specdec.scenario.model import MAX_DRAFT
from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.core import (
    Lane,
    RequestState,
    SchedulerCore,
    SubmittedLane,
    SubmittedRound,
)
from tracediff.models.specdec.sched.record import (
    CANDIDATES,
    ELIGIBLE,
    LANE_VALUES,
    PROBES,
    PRUNED,
    SOURCE_PROBE,
    SOURCE_REFRESH,
    SOURCE_WINNER,
    empty_plan_record,
    plan_record,
)
from tracediff.trace.columns import pack_rows


@dataclass
class Candidate:
    id: int
    kind: int
    cohort: int
    prefill: bool
    bound: int
    budget: int
    b_pad: int
    width: int
    prefixes: list[int]
    expected: float
    duration: int
    value: float
    lane_values: list[list[Any]]

    def row(self) -> list[Any]:
        return [
            self.id,
            self.kind,
            self.cohort,
            self.prefill,
            self.bound,
            self.b_pad,
            self.width,
            self.prefixes,
            self.expected,
            self.duration,
            self.value,
            self.budget,
        ]

    def key(self) -> tuple[float, int, int, int, int, int, bool, int]:
        return F.winner_key(
            self.value,
            self.duration,
            self.cohort,
            self.b_pad,
            self.width,
            self.kind,
            self.prefill,
            self.id,
        )

    def shape(self) -> tuple[int, int, int]:
        return (self.b_pad, self.width, self.bound)


class ReferenceScheduler(SchedulerCore):
    name = "reference"

    # -- the pieces of a plan ------------------------------------------------------------
    def curve(self, state: RequestState) -> list[float]:
        return F.survival_curve(
            state.trials, state.accepts, self.params.alpha, self.params.prior_weight
        )

    def allocate(
        self,
        cohort: list[Lane],
        curves: list[list[float]],
        bound: int,
        budget: int,
        forced: int = -1,
        forced_depth: int = 0,
    ) -> list[int]:
        """Prefixes of a cohort under a width bound and a verification budget.

        Fixed-width lanes (and the probed lane ``forced``, if any) take their drafts first
        in priority order; the free slots of the other lanes are ranked and the best taken.
        """
        left = budget - len(cohort)
        prefixes = [0] * len(cohort)
        for position, lane in enumerate(cohort):
            if lane.fixed_width >= 0:
                take = min(lane.fixed_width, lane.cap, bound)
            elif position == forced:
                take = forced_depth
            else:
                continue
            take = min(take, left)
            prefixes[position] = take
            left -= take
        ranking = []
        for position, lane in enumerate(cohort):
            if lane.fixed_width >= 0 or position == forced:
                continue
            for depth in range(1, min(bound, lane.cap) + 1):
                rank = F.slot_rank(curves[position][depth - 1], depth, lane.slot)
                ranking.append((rank, position))
        ranking.sort()
        for _rank, position in ranking[: max(left, 0)]:
            prefixes[position] += 1
        return prefixes

    def shape_of(self, kind: int, cohort: int, prefixes: list[int]) -> tuple[int, int]:
        if cohort == 0:
            return 0, 0
        b_pad = F.bucket(self.params.batch_buckets, cohort)
        if kind == F.RECT:
            return b_pad, max(prefixes)
        tokens = 0
        for prefix in prefixes:
            tokens += 1 + prefix
        return b_pad, F.bucket(self.params.token_buckets, tokens)

    def duration_of(self, kind: int, b_pad: int, width: int, prefill_tokens: int) -> int:
        duration = self.table_estimate(kind, b_pad, width) if b_pad else 0
        if prefill_tokens:
            duration += F.prefill_cost(self.params, prefill_tokens)
        return duration

    def evaluate(
        self,
        candidate_id: int,
        kind: int,
        cohort: list[Lane],
        bound: int,
        budget: int,
        prefill: RequestState | None,
        now: int,
    ) -> Candidate:
        curves = [self.curve(lane.state) for lane in cohort]
        prefixes = self.allocate(cohort, curves, bound, budget)
        values = [F.lane_value(curve, p) for curve, p in zip(curves, prefixes, strict=True)]
        expected = F.expected_tokens(values)
        b_pad, width = self.shape_of(kind, len(cohort), prefixes)
        duration = self.duration_of(kind, b_pad, width, self.prefill_tokens(prefill))
        bonus = F.prefill_bonus(self.params, now - prefill.spec.arrival_us) if prefill else 0.0
        progress = now + self.queued_duration() + duration
        lane_values = [
            [lane.request, value, F.service_rate(value, duration), progress]
            for lane, value in zip(cohort, values, strict=True)
        ]
        return Candidate(
            candidate_id,
            kind,
            len(cohort),
            prefill is not None,
            bound,
            budget,
            b_pad,
            width,
            prefixes,
            expected,
            duration,
            F.candidate_value(expected, bonus, duration),
            lane_values,
        )

    def prefill_tokens(self, prefill: RequestState | None) -> int:
        if prefill is None:
            return 0
        return min(self.params.prefill_chunk, prefill.spec.prompt_len - prefill.prefilled)

    def candidates(
        self, lanes: list[Lane], prefill: RequestState | None, now: int
    ) -> list[Candidate]:
        params = self.params
        out: list[Candidate] = []
        for row in (None, prefill) if prefill is not None else (None,):
            if not lanes:
                if row is not None:
                    out.append(self.evaluate(len(out), F.RECT, [], 0, 0, row, now))
                continue
            for cohort_size in F.cohort_sizes(params, len(lanes)):
                cohort = lanes[:cohort_size]
                for bound in range(MAX_DRAFT + 1):
                    out.append(
                        self.evaluate(
                            len(out), F.RECT, cohort, bound, params.verify_budget, row, now
                        )
                    )
                if params.ragged:
                    for tokens in params.token_buckets:
                        if tokens >= cohort_size:
                            budget = min(params.verify_budget, tokens)
                            out.append(
                                self.evaluate(
                                    len(out), F.RAGGED, cohort, MAX_DRAFT, budget, row, now
                                )
                            )
        return out

    def prune(self, candidates: list[Candidate]) -> dict[int, int]:
        """All pairs: candidate id -> id of the first candidate that dominates it."""
        pruned: dict[int, int] = {}
        for x in candidates:
            for y in candidates:
                if y is x or (y.kind, y.cohort, y.prefill) != (x.kind, x.cohort, x.prefill):
                    continue
                if F.dominates(
                    y.expected, y.duration, y.shape(), x.expected, x.duration, x.shape()
                ):
                    pruned[x.id] = y.id
                    break
        return pruned

    def probes(
        self, winner: Candidate, lanes: list[Lane], prefill_tokens: int
    ) -> tuple[list[list[Any]], list[list[int]]]:
        """Acceptance-probe candidates: rows for the trace and each probe's prefixes."""
        rows: list[list[Any]] = []
        allocations: list[list[int]] = []
        cohort = lanes[: winner.cohort]
        for position, lane in enumerate(cohort):
            depth = winner.prefixes[position] + 1
            if lane.fixed_width >= 0 or depth > lane.cap:
                continue
            trials = lane.state.trials[depth - 1]
            if trials >= self.params.probe_min_trials:
                continue
            curves = [self.curve(other.state) for other in cohort]
            prefixes = self.allocate(cohort, curves, winner.bound, winner.budget, position, depth)
            if prefixes[position] != depth or any(
                other.fixed_width >= 0 and prefixes[q] != winner.prefixes[q]
                for q, other in enumerate(cohort)
            ):
                continue  # the forced drafts do not fit in the budget
            added, removed = [], []
            for q, (before, after) in enumerate(zip(winner.prefixes, prefixes, strict=True)):
                for k in range(before + 1, after + 1):
                    added.append(F.slot_rank(curves[q][k - 1], k, cohort[q].slot))
                for k in range(after + 1, before + 1):
                    removed.append(F.slot_rank(curves[q][k - 1], k, cohort[q].slot))
            added.sort()
            removed.sort()
            gain = F.probe_gain([-r[0] for r in added], [-r[0] for r in removed])
            expected = winner.expected + gain
            b_pad, width = self.shape_of(winner.kind, winner.cohort, prefixes)
            duration = self.duration_of(winner.kind, b_pad, width, prefill_tokens)
            cost = F.probe_cost(winner.expected, winner.duration, expected, duration)
            rows.append([position, lane.request, depth, trials, gain, expected, duration, cost])
            allocations.append(prefixes)
        return rows, allocations

    # -- plan ----------------------------------------------------------------------------
    def plan(self, now: int) -> dict[str, Any]:
        self.plan_number += 1
        number = self.plan_number
        params = self.params
        lanes = self.eligible_lanes()
        prefill = self.prefill_candidate()
        eligible = [
            [
                lane.request,
                lane.slot,
                lane.cap,
                lane.fixed_width,
                lane.alloc,
                lane.state.last_served,
                self.curve(lane.state),
            ]
            for lane in lanes
        ]
        credit_before = self.credit
        candidates = self.candidates(lanes, prefill, now)
        if not candidates:
            return empty_plan_record(
                plan=number, now=now, eligible=pack_rows(ELIGIBLE, eligible), credit=self.credit
            )
        pruned = self.prune(candidates)
        alive = [c for c in candidates if c.id not in pruned]
        winner = self.best(alive)
        chosen = winner
        source = SOURCE_WINNER
        prefill_tokens = self.prefill_tokens(prefill) if winner.prefill else 0

        self.credit = F.accrue_credit(params, self.credit, winner.expected)
        probe_rows: list[list[Any]] = []
        probe_index = -1
        chosen_prefixes = winner.prefixes
        chosen_expected, chosen_duration = winner.expected, winner.duration
        chosen_b_pad, chosen_width = winner.b_pad, winner.width
        if winner.cohort > 0:
            probe_rows, allocations = self.probes(winner, lanes, prefill_tokens)
            affordable = [i for i, row in enumerate(probe_rows) if self.funded(row[7])]
            if affordable:
                probe_index = min(
                    affordable, key=lambda i: (probe_rows[i][3], probe_rows[i][7], probe_rows[i][0])
                )
                row = probe_rows[probe_index]
                self.credit -= max(row[7], 0.0)
                source = SOURCE_PROBE
                chosen_prefixes = allocations[probe_index]
                chosen_expected, chosen_duration = row[5], row[6]
                chosen_b_pad, chosen_width = self.shape_of(
                    winner.kind, winner.cohort, chosen_prefixes
                )

        refresh = -1
        if probe_index < 0 and winner.cohort > 0 and self.is_fresh(winner, now):
            stale = [
                c
                for c in alive
                if c.id != winner.id
                and (c.kind, c.cohort, c.prefill) == (winner.kind, winner.cohort, winner.prefill)
                and not self.is_fresh(c, now)
            ]
            if stale:
                best = self.best(stale)
                if self.within_tolerance(best.value, winner.value):
                    chosen, source, refresh = best, SOURCE_REFRESH, best.id
                    chosen_prefixes = best.prefixes
                    chosen_expected, chosen_duration = best.expected, best.duration
                    chosen_b_pad, chosen_width = best.b_pad, best.width

        cohort = lanes[: chosen.cohort]
        round_lanes = [
            SubmittedLane(lane.request, lane.slot, p, lane.alloc)
            for lane, p in zip(cohort, chosen_prefixes, strict=True)
        ]
        prefill_request = prefill.spec.id if (chosen.prefill and prefill) else -1
        lane_values = self.lane_values(cohort, chosen_prefixes, chosen_duration, now)
        submitted = SubmittedRound(
            number,
            chosen.kind,
            chosen_b_pad,
            chosen_width,
            tuple(round_lanes),
            prefill_request,
            prefill_tokens,
            chosen_duration,
        )
        self.commit(submitted)
        round_row = submitted.row(source, chosen_expected)
        return plan_record(
            plan=number,
            now=now,
            eligible=pack_rows(ELIGIBLE, eligible),
            prefill=prefill.spec.id if prefill else -1,
            credit_before=credit_before,
            candidates=pack_rows(CANDIDATES, [c.row() for c in candidates]),
            pruned=pack_rows(PRUNED, [[cid, by] for cid, by in sorted(pruned.items())]),
            winner=winner.id,
            probes=pack_rows(PROBES, probe_rows),
            probe=probe_index,
            refresh=refresh,
            credit_after=self.credit,
            round_=round_row,
            lane_values=pack_rows(LANE_VALUES, lane_values),
        )

    def lane_values(
        self, cohort: list[Lane], prefixes: list[int], duration: int, now: int
    ) -> list[list[Any]]:
        progress = now + self.queued_duration() + duration
        rows = []
        for lane, prefix in zip(cohort, prefixes, strict=True):
            value = F.lane_value(self.curve(lane.state), prefix)
            rows.append([lane.request, value, F.service_rate(value, duration), progress])
        return rows

    def best(self, candidates: list[Candidate]) -> Candidate:
        """The winner rule: the candidate with the smallest ``formulas.winner_key``."""
        return min(candidates, key=Candidate.key)

    def funded(self, cost: float) -> bool:
        """Step 11: a probe is funded when it costs at most the accrued credit (``<=``)."""
        return cost <= self.credit

    def within_tolerance(self, value: float, winner_value: float) -> bool:
        """Step 12: a stale candidate runs when its value is at least the winner's less the
        tolerance (``>=``; the product computed as written)."""
        return value >= winner_value * (1.0 - self.params.refresh_tolerance)

    def is_fresh(self, candidate: Candidate, now: int) -> bool:
        observed = self.table_observed(candidate.kind, candidate.b_pad, candidate.width)
        return observed >= 0 and now - observed < self.params.refresh_period_us
