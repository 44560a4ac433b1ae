"""The simulated engine: deterministic, event driven, integer microseconds.

It owns the truth the scheduler must learn: each lane's true conditional acceptance
(``mtp`` decays with depth; ``copy`` works in runs: high and flat while a span matches,
then possibly a run of rounds offering nothing), true shape durations (a cost model of the
engine's own, unlike the scheduler's prior, with a per-shape drift, per-round noise and an
optional coarse clock), where the device truncates device-allocated lanes, and where stops
land. Every draw is keyed by what it is about (scenario seed, request, round,
depth), so one early difference between two schedulers never reshuffles later draws.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from tracediff.errors import SchedulerFault
from tracediff.models.specdec.scenario import rng
from tracediff.models.specdec.scenario.model import MAX_DRAFT, RequestSpec, Scenario
from tracediff.models.specdec.sched import formulas as F

DEVICE = 1


class SimulatedEngine:
    """Runs submitted rounds back to back on one simulated GPU."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.seed = scenario.seed
        self.params = scenario.params
        self.truth = scenario.truth
        self.specs: dict[int, RequestSpec] = {r.id: r for r in scenario.requests}
        self.generated = {r.id: 0 for r in scenario.requests}
        self.finished = {r.id: False for r in scenario.requests}
        # the generated count at which a request finishes: max_new, or its stop if earlier
        self.limits = {
            r.id: r.max_new if r.stop_at < 0 else min(r.max_new, r.stop_at)
            for r in scenario.requests
        }
        self.copy_span: dict[int, int] = {}  # copy lanes: tokens left in the matched span
        self.copy_misses: dict[int, int] = {}  # copy lanes: rounds left with nothing to offer
        self.offers = {r.id: self._next_offer(r, 0) for r in scenario.requests}
        self.gpu_free_at = 0
        # shape -> true cost × (1 + drift × duration_drift): what a round of it costs before noise
        self.drifted: dict[tuple[int, int, int], float] = {}
        # request -> its true acceptance at depths 1..7 (a pure function of its spec)
        self.acceptance: dict[int, list[float]] = {}
        # (end time µs, true duration µs, plan number, round row) in submission order:
        # the GPU is serial, so rounds finish in the order they were submitted.
        self.in_flight: deque[tuple[int, int, int, list[Any]]] = deque()

    @property
    def busy(self) -> int:
        return len(self.in_flight)

    def unfinished(self) -> list[int]:
        return [rid for rid, done in self.finished.items() if not done]

    def submit(self, plan: int, round_row: list[Any], now: int) -> None:
        """Queue a round (a plan record's ``round``); checks what the engine relies on."""
        self._check(plan, round_row)
        _source, kind, b_pad, width, _prefill_request, prefill_tokens, lanes = round_row[:7]
        start = max(now, self.gpu_free_at)
        duration = self.true_duration(plan, kind, b_pad, width, prefill_tokens, len(lanes))
        self.gpu_free_at = start + duration
        self.in_flight.append((start + duration, duration, plan, round_row))

    def next_completion(self) -> int | None:
        return self.in_flight[0][0] if self.in_flight else None

    def complete_next(self) -> dict[str, Any]:
        """Finish the oldest round: the completion event, in trace-record form.

        Each lane's result, in round order: the verified count (the prefix, at most what
        the proposer offered; a device lane may be truncated below its ceiling), the
        accepted run (depth by depth while the draw falls below the true acceptance), the
        tokens it generated (1 + accepted, up to its limit), whether it finished, and the
        proposer's next offer. The per-round state is read once (several lanes a round)."""
        end, duration, plan, round_row = self.in_flight.popleft()
        seed, truth = self.seed, self.truth
        specs, offers, finished_of = self.specs, self.offers, self.finished
        generated_of, limits, acceptance_of = self.generated, self.limits, self.acceptance
        lanes_out = []
        for request, _slot, prefix, alloc in round_row[6]:
            spec = specs[request]
            offer = offers[request]
            verified = prefix if prefix < offer else offer
            if (
                alloc == DEVICE
                and verified > 0
                and rng.chance(seed, "truncate", truth.device_truncation, request, plan)
            ):
                verified = rng.randint(seed, "truncate-to", 0, verified - 1, request, plan)
            accepted = 0
            if verified:
                acceptance = acceptance_of.get(request)
                if acceptance is None:
                    acceptance = acceptance_of[request] = [
                        self._acceptance(spec, depth) for depth in range(1, MAX_DRAFT + 1)
                    ]
                accepted = rng.leading_below(seed, "accept", request, plan, acceptance, verified)
            tokens = 0
            finished = finished_of[request]
            if not finished:
                tokens = 1 + accepted
                limit = limits[request]
                generated = generated_of[request]
                if generated + tokens >= limit:
                    tokens = limit - generated
                    finished = finished_of[request] = True
                generated_of[request] = generated + tokens
            if spec.proposer == "copy":
                offer = offers[request] = self._copy_after(spec, plan, verified, accepted)
            else:
                offer = MAX_DRAFT  # an mtp lane always offers every depth (its entry stays so)
            lanes_out.append([request, verified, accepted, tokens, finished, offer])
        return {
            "t": "completion",
            "now": end,
            "round": plan,
            "observed_us": duration,
            "lanes": lanes_out,
        }

    # -- truth -----------------------------------------------------------------------------
    def true_cost(self, kind: int, b_pad: int, width: int) -> int:
        """The shape's true cost (µs) before drift and noise: the engine's own cost model.

        It differs from the scheduler's prior on purpose (other coefficients, a knee past
        which tokens cost more, another eager penalty), so the table has something to learn.
        """
        truth = self.truth
        tokens = b_pad * (width + 1) if kind == F.RECT else width
        over = tokens - truth.knee_tokens if tokens > truth.knee_tokens else 0
        cost = (
            truth.true_base_us
            + truth.true_lane_us * b_pad
            + truth.true_token_us * (tokens - over)
            + int(truth.true_token_us * truth.knee_factor * over)
        )
        if (kind, b_pad, width) in self.params.eager_shapes:
            cost += truth.true_eager_penalty_us
        return cost

    def true_duration(
        self, plan: int, kind: int, b_pad: int, width: int, prefill_tokens: int, lanes: int
    ) -> int:
        duration = 0
        if lanes:
            key = (kind, b_pad, width)
            drifted = self.drifted.get(key)
            if drifted is None:
                # a shape's cost and drift are fixed for the scenario: their product (the
                # left factor of the duration, computed as below) is kept per shape
                drift = 2.0 * rng.uniform(self.seed, "drift", kind, b_pad, width) - 1.0
                drifted = self.drifted[key] = self.true_cost(kind, b_pad, width) * (
                    1.0 + drift * self.truth.duration_drift
                )
            noise = 2.0 * rng.uniform(self.seed, "noise", plan) - 1.0
            duration = int(drifted * (1.0 + noise * self.truth.duration_noise))
        if prefill_tokens:
            duration += F.prefill_cost(self.params, prefill_tokens)
        return F.quantised(max(duration, 1), self.truth.duration_quantum_us)

    def _acceptance(self, spec: RequestSpec, depth: int) -> float:
        if spec.proposer == "copy":
            return self.truth.copy_match
        return float(spec.accept_base * spec.accept_decay ** (depth - 1))

    # Copy proposers work in runs. While a lane's context matches an earlier span, the
    # proposer offers the span's next tokens (at most ``copy_max_offer``) and they are
    # accepted with a high flat probability; a rejection or the span's end breaks the match,
    # and a run of rounds with nothing to offer may follow before the next match.
    def _start_copy(self, spec: RequestSpec, plan: int) -> int:
        truth = self.truth
        span = rng.randint(
            self.seed, "copy-span", truth.copy_span_min, truth.copy_span_max, spec.id, plan
        )
        self.copy_span[spec.id] = span
        return min(span, truth.copy_max_offer)

    def _next_offer(self, spec: RequestSpec, plan: int) -> int:
        if spec.proposer != "copy":
            return MAX_DRAFT
        return self._start_copy(spec, plan)

    def _copy_after(self, spec: RequestSpec, plan: int, verified: int, accepted: int) -> int:
        """The copy lane's next offer after a round that verified and accepted these."""
        truth = self.truth
        request = spec.id
        misses = self.copy_misses.get(request, 0)
        if misses > 0:
            self.copy_misses[request] = misses - 1
            return 0 if misses > 1 else self._start_copy(spec, plan)
        span = self.copy_span.get(request, 0) - (1 + accepted)
        if accepted == verified and span > 0:
            self.copy_span[request] = span
            return min(span, truth.copy_max_offer)
        if rng.chance(self.seed, "copy-miss", truth.copy_zero_run, request, plan):
            self.copy_misses[request] = rng.randint(
                self.seed, "copy-miss-len", 1, truth.copy_miss_max, request, plan
            )
            return 0
        return self._start_copy(spec, plan)

    def _check(self, plan: int, round_row: Any) -> None:
        """Refuse a malformed round: a broken scheduler is a finding, not a crash."""
        try:
            lanes = round_row[6]
            tokens = 0
            for request, _slot, prefix, _alloc in lanes:
                if request not in self.specs or not 0 <= prefix <= MAX_DRAFT:
                    raise ValueError(f"lane {request} with prefix {prefix}")
                tokens += 1 + prefix
            if tokens > self.params.verify_budget:
                raise ValueError(f"{tokens} verified tokens exceed the budget")
        except (TypeError, ValueError, IndexError) as exc:
            raise SchedulerFault(f"plan {plan}: malformed round: {exc}") from None
