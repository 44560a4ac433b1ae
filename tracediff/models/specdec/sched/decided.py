"""Rule coverage: which clause of the [fixed] rules decided something, plan by plan.

:class:`DecidingReference` is the reference scheduler with an observer beside it: it makes
exactly the reference's decisions (it calls the reference for every one of them and returns
its records unchanged) and, around each call, works out which clauses of
:mod:`tracediff.models.specdec.sched.clauses` decided. Nothing it learns enters a record, so a
trace of it
is byte for byte the reference's trace.

The analysis re-derives each rule from the state the reference decided on, in the words of
docs/scheduler.md (a cap's terms, the ranking's cut, the first differing component of two
winner keys, ...); where it recomputes a value the reference also computed (an allocation,
the pruned list), it checks that both agree, so the observer is also a second reading of
the spec.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tracediff.errors import SchedulerFault
from tracediff.models.specdec.scenario.model import MAX_DRAFT, Scenario
from tracediff.models.specdec.sched import formulas as F
from tracediff.models.specdec.sched.clauses import NAMES
from tracediff.models.specdec.sched.core import (
    DECODING,
    DEVICE,
    DRAINING,
    PREFILLING,
    WAITING,
    Lane,
    RequestState,
    SubmittedRound,
)
from tracediff.models.specdec.sched.record import COLUMNS, rows_view
from tracediff.models.specdec.sched.reference import Candidate, ReferenceScheduler

_WINNER_COMPONENTS = (
    "winner.value",
    "winner.duration",
    "winner.cohort",
    "winner.b_pad",
    "winner.width",
    "winner.kind",
    "winner.prefill",
    "winner.order",
)
_PRUNE_TIES = ("prune.tie_b_pad", "prune.tie_width", "prune.tie_bound")
_RANK_COMPONENTS = ("rank.survival", "rank.depth", "rank.slot")
_PROBE_CHOICE = ("probe.choice_trials", "probe.choice_cost", "probe.choice_position")
_PROBE = {name: i for i, name in enumerate(COLUMNS["probes"])}


def first_difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
    """Index of the first component where two keys differ (len when equal)."""
    for index, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y:
            return index
    return len(a)


class DecidingReference(ReferenceScheduler):
    """The reference, observed: ``decided[clause]`` counts the plans (or completions) in
    which each clause decided something."""

    name = "reference"

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.decided: dict[str, int] = dict.fromkeys(NAMES, 0)
        self._hits: set[str] = set()
        self._candidates: list[Candidate] = []
        self._pruned: dict[int, int] = {}
        self._slots_assigned = 0  # slots handed out so far: a lower one was freed and reused
        self._raw_params = dataclasses.replace(self.params, duration_quantum_us=1)

    def hit(self, clause: str) -> None:
        self._hits.add(clause)

    def _flush(self) -> None:
        for clause in self._hits:
            self.decided[clause] += 1
        self._hits = set()

    # -- plan --------------------------------------------------------------------------------
    def plan(self, now: int) -> dict[str, Any]:
        self._hits = set()
        self._candidates = []
        self._pruned = {}
        in_flight = len(self.submitted)
        self._eligibility()
        lanes = self.eligible_lanes()
        self._curves(lanes)
        self._priority(lanes)
        self._prefill(now)
        record = super().plan(now)
        if record["round"] is not None:
            self._plan_decisions(rows_view(record), lanes, now, in_flight)
        self._flush()
        return record

    def _eligibility(self) -> None:
        mode = self.params.allocation
        for state in self.requests.values():
            if state.phase not in (DECODING, DRAINING):
                continue
            spec = state.spec
            remaining = spec.max_new - state.generated - self.pending_advance(state)
            held = spec.host_stop and state.pending_count > 0
            if state.phase == DRAINING:
                if remaining >= 1 and not held:
                    self.hit("eligible.draining")
                continue
            if held:
                if remaining >= 1:
                    self.hit("eligible.host_stop")
                continue
            if remaining < 1:
                self.hit("eligible.remaining")
                if remaining == 0:
                    self.hit("boundary.remaining_zero")
                continue
            if remaining == 1:
                self.hit("boundary.remaining_one")
            alloc = self.lane_alloc(spec)
            if spec.grammar and mode == "device":
                self.hit("alloc.grammar_host")
            elif mode == "mixed":
                self.hit("alloc.mixed_host" if spec.host_stop else "alloc.mixed_device")
            terms = {"cap.max_draft": MAX_DRAFT, "cap.remaining": remaining - 1}
            terms["cap.offer"] = state.offer
            if spec.grammar:
                terms["cap.grammar"] = spec.grammar_cap
            low = min(terms.values())
            deciding = [name for name, value in terms.items() if value == low]
            if len(deciding) == 1:
                self.hit(deciding[0])
                if deciding[0] == "cap.offer" and alloc == DEVICE:
                    self.hit("cap.offer_device")

    def _curves(self, lanes: list[Lane]) -> None:
        """The survival curve's clamp, ``est if est < previous else previous``, per depth of
        each lane's curve (the arithmetic of formulas.survival_curve)."""
        alpha, weight = self.params.alpha, self.params.prior_weight
        for lane in lanes:
            trials, accepts = lane.state.trials, lane.state.accepts
            power = 1.0
            previous = 1.0
            for k in range(MAX_DRAFT):
                power = power * alpha
                estimate = (accepts[k] + weight * power) / (trials[k] + weight)
                if estimate > previous:
                    self.hit("survival.clamp")
                elif estimate == previous:
                    self.hit("boundary.survival_clamp")
                previous = estimate if estimate < previous else previous

    def _priority(self, lanes: list[Lane]) -> None:
        for before, after in zip(lanes, lanes[1:], strict=False):
            if before.state.last_served == after.state.last_served:
                self.hit("priority.slot")
            elif before.slot > after.slot:
                self.hit("priority.last_served")

    def _prefill(self, now: int) -> None:
        ready: list[RequestState] = []
        for state in self.requests.values():
            if state.prefill_in_flight:
                continue
            if state.phase == PREFILLING or (state.phase == WAITING and self.free_slots):
                ready.append(state)
            elif state.phase == WAITING:
                self.hit("prefill.no_slot")
        if not ready:
            return
        ready.sort(key=lambda s: (s.spec.arrival_us, s.spec.id))
        if len(ready) >= 2:
            self.hit("prefill.oldest")
            if ready[0].spec.arrival_us == ready[1].spec.arrival_us:
                self.hit("prefill.id")
        chosen = ready[0]
        if chosen.spec.prompt_len - chosen.prefilled < self.params.prefill_chunk:
            self.hit("prefill.chunk_tail")
        waited = now - chosen.spec.arrival_us
        if waited / self.params.prefill_bonus_period_us >= self.params.prefill_bonus_cap:
            self.hit("prefill.bonus_cap")

    # -- pieces the reference calls ----------------------------------------------------------
    def allocate(
        self,
        cohort: list[Lane],
        curves: list[list[float]],
        bound: int,
        budget: int,
        forced: int = -1,
        forced_depth: int = 0,
    ) -> list[int]:
        prefixes = super().allocate(cohort, curves, bound, budget, forced, forced_depth)
        if forced < 0:
            self._allocation(cohort, curves, bound, budget, prefixes)
        return prefixes

    def _allocation(
        self,
        cohort: list[Lane],
        curves: list[list[float]],
        bound: int,
        budget: int,
        prefixes: list[int],
    ) -> None:
        left = budget - len(cohort)
        derived = [0] * len(cohort)
        for position, lane in enumerate(cohort):
            if lane.fixed_width < 0:
                continue
            terms = {
                "fixed.width": lane.fixed_width,
                "fixed.cap": lane.cap,
                "fixed.bound": bound,
                "fixed.budget": left,
            }
            take = min(terms.values())
            deciding = [name for name, value in terms.items() if value == take]
            if len(deciding) == 1:
                self.hit(deciding[0])
            derived[position] = take
            left -= take
        ranking: list[tuple[tuple[float, int, int], int]] = []
        for position, lane in enumerate(cohort):
            if lane.fixed_width >= 0:
                continue
            for depth in range(1, min(bound, lane.cap) + 1):
                ranking.append(((-curves[position][depth - 1], depth, lane.slot), position))
        ranking.sort()
        take = max(left, 0)
        if len(ranking) > take:
            self.hit("budget.binds")
            if take > 0:
                index = first_difference(ranking[take - 1][0], ranking[take][0])
                self.hit(_RANK_COMPONENTS[min(index, 2)])
        elif len(ranking) == take and take > 0:
            self.hit("boundary.budget_exact")
        for _key, position in ranking[:take]:
            derived[position] += 1
        if derived != prefixes:
            raise SchedulerFault(
                f"plan {self.plan_number}: rule coverage re-derived prefixes {derived} "
                f"where the reference allocated {prefixes} (bound {bound}, budget {budget})"
            )
        for position, lane in enumerate(cohort):
            if lane.fixed_width >= 0:
                continue
            limit = min(bound, lane.cap)
            if prefixes[position] == limit:
                if bound < lane.cap:
                    self.hit("slots.bound")
                elif lane.cap < bound:
                    self.hit("slots.cap")

    def prune(self, candidates: list[Candidate]) -> dict[int, int]:
        pruned = super().prune(candidates)
        self._candidates = candidates
        self._pruned = pruned
        # Dominance needs a strict improvement somewhere: two candidates of a group equal in
        # E, duration and (B_pad, width used, bound) both survive (ragged buckets that
        # allocate identically). Found by hashing, not by another all-pairs pass.
        seen: set[tuple[Any, ...]] = set()
        for c in candidates:
            same = (c.kind, c.cohort, c.prefill, c.expected, c.duration, c.shape())
            if same in seen:
                self.hit("boundary.prune_equal")
                break
            seen.add(same)
        for x_id, y_id in pruned.items():
            x, y = candidates[x_id], candidates[y_id]
            if y.expected > x.expected and y.duration < x.duration:
                self.hit("prune.both")
            elif y.expected > x.expected:
                self.hit("prune.expected")
            elif y.duration < x.duration:
                self.hit("prune.duration")
            else:
                index = first_difference(y.shape(), x.shape())
                self.hit(_PRUNE_TIES[min(index, 2)])
            group = (x.kind, x.cohort, x.prefill)
            dominators = 0
            for other in candidates:
                if other is x or (other.kind, other.cohort, other.prefill) != group:
                    continue
                if F.dominates(
                    other.expected,
                    other.duration,
                    other.shape(),
                    x.expected,
                    x.duration,
                    x.shape(),
                ):
                    dominators += 1
                    if dominators == 2:
                        self.hit("prune.first")
                        break
        return pruned

    def probes(
        self, winner: Candidate, lanes: list[Lane], prefill_tokens: int
    ) -> tuple[list[list[Any]], list[list[int]]]:
        rows, allocations = super().probes(winner, lanes, prefill_tokens)
        probed = {
            row[_PROBE["position"]]: prefixes
            for row, prefixes in zip(rows, allocations, strict=True)
        }
        for position, lane in enumerate(lanes[: winner.cohort]):
            depth = winner.prefixes[position] + 1
            if lane.fixed_width >= 0:
                self.hit("probe.skip_fixed")
                continue
            if depth > lane.cap:
                self.hit("probe.skip_cap")
                continue
            at_cap = depth == lane.cap
            trials = lane.state.trials[depth - 1]
            minimum = self.params.probe_min_trials
            if trials >= minimum:
                self.hit("probe.skip_trials")
                if trials == minimum:
                    self.hit("boundary.probe_trials")
                continue
            prefixes = probed.get(position)
            if prefixes is None:
                self.hit("probe.skip_fit")
                continue
            if trials == minimum - 1:
                self.hit("boundary.probe_trials_below")
            if at_cap:
                self.hit("boundary.probe_cap")
            if depth > winner.bound:
                self.hit("probe.past_bound")
            removed = any(
                after < before for before, after in zip(winner.prefixes, prefixes, strict=True)
            )
            self.hit("probe.removes" if removed else "probe.keeps")
        return rows, allocations

    # -- what the record shows ---------------------------------------------------------------
    def _plan_decisions(
        self, record: dict[str, Any], lanes: list[Lane], now: int, in_flight: int
    ) -> None:
        params = self.params
        candidates = self._candidates
        if not lanes:
            self.hit("prefill.only")
        if (
            lanes
            and len(lanes) > params.verify_budget
            and (params.verify_budget < params.batch_buckets[-1])
        ):
            self.hit("cohort.budget")
        if lanes:
            limit = min(len(lanes), params.verify_budget, params.batch_buckets[-1])
            if limit in params.batch_buckets:
                self.hit("boundary.cohort_bucket")
        if lanes and params.ragged:
            for cohort in F.cohort_sizes(params, len(lanes)):
                for tokens in params.token_buckets:
                    if tokens < cohort:
                        self.hit("ragged.bucket_below_cohort")
                        continue
                    if tokens == cohort:
                        self.hit("boundary.ragged_bucket_cohort")
                    if tokens < params.verify_budget:
                        self.hit("ragged.budget_bucket")
                    elif params.verify_budget < tokens:
                        self.hit("ragged.budget_verify")
        self._durations(candidates)
        alive = [c for c in candidates if c.id not in self._pruned]
        winner = candidates[record["winner"]]
        winner_key = winner.key()
        for other in alive:
            if other is not winner:
                index = first_difference(winner_key, other.key())
                self.hit(_WINNER_COMPONENTS[min(index, 7)])
        if winner.cohort == 0:
            return
        if in_flight:
            self.hit("progress.running")
        self._credit_and_probes(record, winner)
        self._refresh(record, winner, alive, now)

    def _durations(self, candidates: list[Candidate]) -> None:
        params = self.params
        for c in candidates:
            if c.cohort == 0:
                continue
            if c.kind == F.RECT:
                if c.width < c.bound:
                    self.hit("duration.width_used")
            else:
                tokens = 0
                for prefix in c.prefixes:
                    tokens += 1 + prefix
                if c.width > tokens:
                    self.hit("duration.q_pad")
            shape = (c.kind, c.b_pad, c.width)
            if shape in self.table:
                self.hit("duration.observed")
                continue
            if shape in params.eager_shapes:
                self.hit("duration.eager")
            if params.duration_quantum_us > 1:
                unrounded = F.prior_duration(self._raw_params, c.kind, c.b_pad, c.width)
                if unrounded % params.duration_quantum_us:
                    self.hit("duration.quantum")

    def _credit_and_probes(self, record: dict[str, Any], winner: Candidate) -> None:
        params = self.params
        before = record["credit_before"]
        accrued = before + params.probe_rate * winner.expected
        if accrued > params.credit_cap:
            self.hit("credit.cap")
        if before == params.credit_cap:
            self.hit("boundary.credit_cap")
        if accrued == params.credit_cap:
            self.hit("boundary.credit_accrued")
        credit = F.accrue_credit(params, before, winner.expected)
        rows = record["probes"]
        cost_at = _PROBE["cost"]
        funded = [i for i, row in enumerate(rows) if row[cost_at] <= credit]
        if len(funded) < len(rows):
            self.hit("probe.unfunded")
        if any(row[cost_at] == credit for row in rows):
            self.hit("boundary.probe_funded")
        chosen = record["probe"]
        if chosen < 0:
            return
        if rows[chosen][cost_at] <= 0.0:
            self.hit("probe.free")

        def key(i: int) -> tuple[Any, ...]:
            row = rows[i]
            return (row[_PROBE["trials"]], row[cost_at], row[_PROBE["position"]])

        for other in funded:
            if other != chosen:
                index = first_difference(key(chosen), key(other))
                self.hit(_PROBE_CHOICE[min(index, 2)])

    def _stale(self, c: Candidate, now: int) -> bool:
        return not self.is_fresh(c, now)

    def _refresh(
        self, record: dict[str, Any], winner: Candidate, alive: list[Candidate], now: int
    ) -> None:
        period = self.params.refresh_period_us
        group = (winner.kind, winner.cohort, winner.prefill)
        threshold = winner.value * (1.0 - self.params.refresh_tolerance)
        stale_in_group: list[Candidate] = []
        for c in alive:
            observed = self.table_observed(c.kind, c.b_pad, c.width)
            if observed >= 0 and now - observed == period:
                self.hit("boundary.refresh_period")
            if c is winner or not self._stale(c, now):
                continue
            if (c.kind, c.cohort, c.prefill) != group:
                if c.value >= threshold:
                    self.hit("refresh.other_group")
                continue
            stale_in_group.append(c)
            self.hit("refresh.never" if observed < 0 else "refresh.age")
        runnable = any(c.value >= threshold for c in stale_in_group)
        if record["probe"] >= 0:
            if runnable:
                self.hit("refresh.after_probe")
            return
        if self._stale(winner, now):
            if runnable:
                self.hit("refresh.winner_stale")
            return
        if not stale_in_group:
            return
        best = min(stale_in_group, key=Candidate.key)
        if sum(1 for c in stale_in_group if c.value == best.value) >= 2:
            self.hit("refresh.tie")
        if best.value == threshold:
            self.hit("boundary.refresh_tolerance")
        self.hit("refresh.accept" if record["refresh"] >= 0 else "refresh.reject")

    # -- commit and completion ---------------------------------------------------------------
    def commit(self, round_: SubmittedRound) -> None:
        if round_.prefill_request >= 0:
            state = self.requests[round_.prefill_request]
            if state.phase == WAITING:
                if self.free_slots[0] < self._slots_assigned and len(self.free_slots) >= 2:
                    self.hit("retire.slot")
                self._slots_assigned = max(self._slots_assigned, self.free_slots[0] + 1)
        super().commit(round_)

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        self._hits = set()
        submitted = self.submitted[event["round"]]
        if len(self.submitted) >= 1 + self.params.queue_depth:
            self.hit("queue.full")
        if submitted.lanes:
            observed = event["observed_us"]
            if submitted.prefill_request >= 0:
                self.hit("table.prefill")
                observed -= F.prefill_cost(self.params, submitted.prefill_tokens)
            entry = self.table.get((submitted.kind, submitted.b_pad, submitted.width))
            if entry is None:
                self.hit("table.first")
            else:
                difference = max(observed, 1) - entry[0]
                if difference > 0:
                    self.hit("table.up" if difference // 4 else "table.stuck")
                elif difference < 0 and difference % 4:
                    self.hit("table.down_floor")
        for lane, result in zip(submitted.lanes, event["lanes"], strict=True):
            state = self.requests[lane.request]
            tokens, finished = result[3], result[4]
            if state.phase != DECODING:
                continue
            total = state.generated + tokens
            if total == state.spec.max_new:
                self.hit("boundary.max_new")
            if finished or total >= state.spec.max_new:
                if total < state.spec.max_new:
                    self.hit("drain.stop")
                if state.pending_count > 1:
                    self.hit("drain.waits")
        retired = super().complete(event, now)
        self._flush()
        return retired
