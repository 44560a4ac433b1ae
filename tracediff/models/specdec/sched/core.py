"""State and events shared by every built-in scheduler: what a plan() call decides *on*.

Admission, commit and completion follow the [fixed] rules of docs/scheduler.md and are written once,
here. Implementations subclass :class:`SchedulerCore` and supply ``plan``; the only
stateful difference allowed between them is how ``pending_advance`` is obtained (the
reference scans the submitted rounds; the optimized keeps it on the request).

Plan records are plain dicts built by :func:`plan_record` in the trace schema's key order,
so the scheduler knows nothing of traces: the driver only encodes what it is handed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tracediff.models.specdec.scenario.model import (
    MAX_DRAFT,
    RequestSpec,
    Scenario,
    SchedulerParams,
)
from tracediff.models.specdec.sched import formulas as F

WAITING, PREFILLING, DECODING, DRAINING, RETIRED = range(5)
PHASE_NAMES = ("waiting", "prefilling", "decoding", "draining", "retired")
HOST, DEVICE = 0, 1


@dataclass
class RequestState:
    spec: RequestSpec
    phase: int = WAITING
    slot: int = -1
    prefilled: int = 0
    prefill_in_flight: bool = False
    generated: int = 0
    pending_count: int = 0
    tracked_advance: int = 0  # maintained at commit/completion; only optimized reads it
    last_served: int = -1
    offer: int = MAX_DRAFT
    trials: list[int] = field(default_factory=lambda: [0] * MAX_DRAFT)
    accepts: list[int] = field(default_factory=lambda: [0] * MAX_DRAFT)


class SubmittedLane(NamedTuple):
    """One lane of a submitted round. A named tuple, not a frozen dataclass: every plan
    builds one per lane, and a tuple is built in C instead of a field-by-field
    ``object.__setattr__``."""

    request: int
    slot: int
    prefix: int  # exact prefix (host) or ceiling (device)
    alloc: int  # HOST or DEVICE


@dataclass(frozen=True)
class SubmittedRound:
    plan: int
    kind: int
    b_pad: int
    width: int  # W for rect, Q_pad for ragged; 0 for a prefill-only round
    lanes: tuple[SubmittedLane, ...]
    prefill_request: int  # -1 when the round has no prefill row
    prefill_tokens: int
    duration: int  # the estimate the plan used (µs)

    def row(self, source: str, expected: float) -> list[Any]:
        """The plan record's ``round`` row (``record.ROUND_COLUMNS``) for this round."""
        return [
            source,
            self.kind,
            self.b_pad,
            self.width,
            self.prefill_request,
            self.prefill_tokens,
            [[lane.request, lane.slot, lane.prefix, lane.alloc] for lane in self.lanes],
            expected,
            self.duration,
        ]


class Lane(NamedTuple):
    """An eligible lane as a plan() call sees it (a named tuple: one per lane per plan)."""

    request: int
    slot: int
    cap: int
    fixed_width: int
    alloc: int
    state: RequestState


class SchedulerCore:
    """Admission, commit, completion and retirement; subclasses implement ``plan``."""

    name = "core"

    def __init__(self, scenario: Scenario) -> None:
        self.params: SchedulerParams = scenario.params
        self.requests: dict[int, RequestState] = {}
        self.submitted: dict[int, SubmittedRound] = {}
        # Packed round table, observed shapes only: shape -> [estimate µs, last observed µs].
        self.table: dict[tuple[int, int, int], list[int]] = {}
        self.credit = 0.0
        self.plan_number = 0
        self.free_slots = list(range(self.params.max_lanes))

    # -- events ------------------------------------------------------------------------
    def arrive(self, spec: RequestSpec, now: int) -> None:
        self.requests[spec.id] = RequestState(spec=spec)

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        """Apply a completion; return the ids of requests that retired, ascending."""
        submitted = self.submitted.pop(event["round"])
        params = self.params
        requests = self.requests
        for lane, result in zip(submitted.lanes, event["lanes"], strict=True):
            _request_id, verified, accepted, tokens, finished, offer = result
            state = requests[lane.request]
            state.generated += tokens
            trials, accepts = state.trials, state.accepts
            for k in range(verified):
                trials[k] += 1
            for k in range(accepted):
                accepts[k] += 1
            state.pending_count -= 1
            self._release_advance(state, 1 + lane.prefix)
            state.offer = offer
            if state.phase == DECODING and (finished or state.generated >= state.spec.max_new):
                state.phase = DRAINING
        if submitted.prefill_request >= 0:
            state = self.requests[submitted.prefill_request]
            state.prefill_in_flight = False
            state.prefilled += submitted.prefill_tokens
            if state.prefilled >= state.spec.prompt_len:
                state.phase = DECODING
        if submitted.lanes:
            observed = event["observed_us"]
            if submitted.prefill_request >= 0:
                observed -= F.prefill_cost(params, submitted.prefill_tokens)
            key = (submitted.kind, submitted.b_pad, submitted.width)
            estimate = self.table_estimate(*key)
            self.table[key] = [F.updated_estimate(estimate, max(observed, 1)), now]
        return self.retire_drained(submitted)

    def retire_drained(self, completed: SubmittedRound) -> list[int]:
        """Retire the drained requests with no lane in flight after ``completed`` (their
        slots freed); their ids, ascending."""
        retired = []
        for state in self.retire_candidates(completed):
            if state.phase == DRAINING and state.pending_count == 0:
                state.phase = RETIRED
                self.free_slots.append(state.slot)
                self.free_slots.sort()
                retired.append(state.spec.id)
        return sorted(retired)

    def retire_candidates(self, completed: SubmittedRound) -> Iterable[RequestState]:
        """The requests that may retire after ``completed``: every request, here."""
        return self.requests.values()

    def commit(self, round_: SubmittedRound) -> None:
        """Submit a round: pending counts and advances go up, lanes are marked served."""
        self.submitted[round_.plan] = round_
        for lane in round_.lanes:
            state = self.requests[lane.request]
            state.pending_count += 1
            self._hold_advance(state, 1 + lane.prefix)
            state.last_served = round_.plan
        if round_.prefill_request >= 0:
            state = self.requests[round_.prefill_request]
            state.prefill_in_flight = True
            if state.phase == WAITING:
                state.phase = PREFILLING
                state.slot = self.free_slots.pop(0)

    # -- pending advance: the one place implementations differ in state keeping ---------
    def pending_advance(self, state: RequestState) -> int:
        """Σ(1 + prefix) over this request's lanes in submitted rounds, by scanning them."""
        total = 0
        for round_ in self.submitted.values():
            for lane in round_.lanes:
                if lane.request == state.spec.id:
                    total += 1 + lane.prefix
        return total

    def _hold_advance(self, state: RequestState, amount: int) -> None:
        state.tracked_advance += amount

    def _release_advance(self, state: RequestState, amount: int) -> None:
        state.tracked_advance -= amount

    # -- shared queries ----------------------------------------------------------------
    def table_estimate(self, kind: int, b_pad: int, width: int) -> int:
        """The packed round table's estimate (µs): observed, else the prior."""
        entry = self.table.get((kind, b_pad, width))
        if entry is None:
            return F.prior_duration(self.params, kind, b_pad, width)
        return entry[0]

    def table_observed(self, kind: int, b_pad: int, width: int) -> int:
        """When the shape was last observed (µs), or -1 if never."""
        entry = self.table.get((kind, b_pad, width))
        return -1 if entry is None else entry[1]

    def lane_alloc(self, spec: RequestSpec) -> int:
        """Who fixes the lane's prefix. A grammar lane is host-allocated under every mode:
        its drafts must pass a mask computed on the host, so the host must know them."""
        allocation = self.params.allocation
        if allocation == "host" or spec.grammar:
            return HOST
        if allocation == "device":
            return DEVICE
        return HOST if spec.host_stop else DEVICE

    def eligible_lanes(self) -> list[Lane]:
        """Eligible decoding lanes with their caps, in priority order (docs/scheduler.md)."""
        lanes = []
        for state in self.requests.values():
            if state.phase != DECODING:
                continue
            spec = state.spec
            if spec.host_stop and state.pending_count > 0:
                continue
            remaining = spec.max_new - state.generated - self.pending_advance(state)
            if remaining < 1:
                continue
            alloc = self.lane_alloc(spec)
            cap = min(MAX_DRAFT, remaining - 1)
            if state.offer < cap:
                cap = state.offer  # drafts that were not proposed cannot be verified
            if spec.grammar and spec.grammar_cap < cap:
                cap = spec.grammar_cap
            lanes.append(Lane(spec.id, state.slot, cap, spec.fixed_width, alloc, state))
        lanes.sort(key=lambda lane: (lane.state.last_served, lane.slot))
        return lanes

    def prefill_candidate(self) -> RequestState | None:
        """The oldest request that can take a prefill row now, if any."""
        best: RequestState | None = None
        for state in self.requests.values():
            if state.prefill_in_flight:
                continue
            if state.phase == PREFILLING or (state.phase == WAITING and self.free_slots):
                key = (state.spec.arrival_us, state.spec.id)
                if best is None or key < (best.spec.arrival_us, best.spec.id):
                    best = state
        return best

    def queued_duration(self) -> int:
        """Σ estimated durations of the rounds still in flight (running and queued)."""
        total = 0
        for round_ in self.submitted.values():
            total += round_.duration
        return total

    def state(self) -> dict[str, Any]:
        """A JSON-friendly view of the scheduler's state (for replay --state)."""
        return {
            "plan": self.plan_number,
            "credit": self.credit,
            "requests": [
                {
                    "id": s.spec.id,
                    "phase": PHASE_NAMES[s.phase],
                    "slot": s.slot,
                    "generated": s.generated,
                    "prefilled": s.prefilled,
                    "pending_count": s.pending_count,
                    "pending_advance": self.pending_advance(s),
                    "last_served": s.last_served,
                    "offer": s.offer,
                    "trials": list(s.trials),
                    "accepts": list(s.accepts),
                    "curve": F.survival_curve(
                        s.trials, s.accepts, self.params.alpha, self.params.prior_weight
                    ),
                }
                for s in self.requests.values()
            ],
            "submitted": [
                {
                    "plan": r.plan,
                    "kind": F.KIND_NAMES[r.kind],
                    "b_pad": r.b_pad,
                    "width": r.width,
                    "lanes": [[ln.request, ln.prefix] for ln in r.lanes],
                    "duration": r.duration,
                }
                for r in self.submitted.values()
            ],
            "table": [
                [F.KIND_NAMES[k[0]], k[1], k[2], v[0], v[1]] for k, v in sorted(self.table.items())
            ],
        }
