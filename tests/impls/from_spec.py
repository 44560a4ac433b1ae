"""A scheduler written from docs/scheduler.md alone, to show the page is the whole spec.

It imports nothing from ``tracediff.models.specdec.sched`` (no formulas, no core, no record
builder): every
rule, operation order and record type below follows the page's words, step by step. Its
traces must be byte-identical to the reference's; a test checks that on quick scenarios, so
a rule that changes in the code without the page (or the page without the code) fails.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WAITING, PREFILLING, DECODING, DRAINING, RETIRED = range(5)
RECT, RAGGED = 0, 1
MAX_DRAFT = 7


def bucket(buckets: Any, size: int) -> int:
    """The smallest bucket >= size."""
    return next(b for b in buckets if b >= size)


def ceil_to(value: int, quantum: int) -> int:
    return -((-value) // quantum) * quantum


@dataclass
class Request:
    spec: Any
    phase: int = WAITING
    slot: int = -1
    prefilled: int = 0
    prefill_in_flight: bool = False
    generated: int = 0
    pending_count: int = 0
    pending_advance: int = 0
    last_served: int = -1
    offer: int = MAX_DRAFT
    trials: list[int] = field(default_factory=lambda: [0] * (MAX_DRAFT + 1))  # by depth 1..7
    accepts: list[int] = field(default_factory=lambda: [0] * (MAX_DRAFT + 1))


@dataclass
class Lane:
    request: Request
    cap: int
    alloc: int
    curve: list[float]

    @property
    def fixed(self) -> int:
        return int(self.request.spec.fixed_width)


@dataclass
class Cand:
    id: int
    kind: int
    cohort: int
    prefill: bool
    bound: int
    budget: int
    prefixes: list[int]
    b_pad: int
    width: int
    expected: float
    duration: int
    value: float

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

    def key(self) -> tuple[Any, ...]:
        return (
            -self.value,
            self.duration,
            -self.cohort,
            self.b_pad,
            self.width,
            self.kind,
            self.prefill,
            self.id,
        )

    def group(self) -> tuple[int, int, bool]:
        return (self.kind, self.cohort, self.prefill)

    def dominates(self, x: Cand) -> bool:
        if self.expected < x.expected or self.duration > x.duration:
            return False
        return (
            self.expected > x.expected
            or self.duration < x.duration
            or (self.b_pad, self.width, self.bound) < (x.b_pad, x.width, x.bound)
        )


@dataclass
class InFlight:
    lanes: list[list[int]]  # [request, slot, prefix, alloc]
    kind: int
    b_pad: int
    width: int
    prefill_request: int
    chunk: int
    duration: int


class FromSpecScheduler:
    name = "from-spec"

    def __init__(self, scenario: Any) -> None:
        self.p = scenario.params
        self.requests: dict[int, Request] = {}
        self.in_flight: dict[int, InFlight] = {}
        self.table: dict[tuple[int, int, int], list[int]] = {}
        self.credit = 0.0
        self.counter = 0
        self.free = list(range(self.p.max_lanes))

    def arrive(self, spec: Any, now: int) -> None:
        self.requests[spec.id] = Request(spec)

    # -- formulas ------------------------------------------------------------------------
    def curve(self, r: Request) -> list[float]:
        power, previous, out = 1.0, 1.0, []
        m = self.p.prior_weight
        for k in range(1, MAX_DRAFT + 1):
            power = power * self.p.alpha
            est = (r.accepts[k] + m * power) / (r.trials[k] + m)
            previous = est if est < previous else previous
            out.append(previous)
        return out

    @staticmethod
    def lane_value(curve: list[float], prefix: int) -> float:
        value = 1.0
        for k in range(prefix):
            value = value + curve[k]
        return value

    def estimate(self, kind: int, b_pad: int, width: int) -> int:
        entry = self.table.get((kind, b_pad, width))
        if entry is not None:
            return entry[0]
        p = self.p
        tokens = b_pad * (width + 1) if kind == RECT else width
        est = p.base_us + p.lane_us * b_pad + p.token_us * tokens
        if (kind, b_pad, width) in p.eager_shapes:
            est = est + p.eager_penalty_us
        return ceil_to(est, p.duration_quantum_us)

    def fresh(self, c: Cand, now: int) -> bool:
        entry = self.table.get((c.kind, c.b_pad, c.width))
        return entry is not None and now - entry[1] < self.p.refresh_period_us

    def prefill_cost(self, chunk: int) -> int:
        return self.p.prefill_base_us + self.p.prefill_token_us * chunk

    # -- a plan call ---------------------------------------------------------------------
    def eligible(self) -> list[Lane]:
        p = self.p
        lanes = []
        for r in self.requests.values():
            spec = r.spec
            if r.phase != DECODING or (spec.host_stop and r.pending_count > 0):
                continue
            remaining = spec.max_new - r.generated - r.pending_advance
            if remaining < 1:
                continue
            grammar = spec.grammar_cap >= 0
            if p.allocation == "host" or grammar:
                alloc = 0
            elif p.allocation == "device":
                alloc = 1
            else:
                alloc = 0 if spec.host_stop else 1
            cap = min(MAX_DRAFT, remaining - 1, r.offer)
            if grammar:
                cap = min(cap, spec.grammar_cap)
            lanes.append(Lane(r, cap, alloc, self.curve(r)))
        lanes.sort(key=lambda lane: (lane.request.last_served, lane.request.slot))
        return lanes

    def offered_prefill(self) -> Request | None:
        best = None
        for r in self.requests.values():
            if r.prefill_in_flight:
                continue
            if r.phase == PREFILLING or (r.phase == WAITING and self.free):
                if best is None or (r.spec.arrival_us, r.spec.id) < (
                    best.spec.arrival_us,
                    best.spec.id,
                ):
                    best = r
        return best

    @staticmethod
    def allocate(
        cohort: list[Lane], bound: int, budget: int, forced: int = -1, depth: int = 0
    ) -> list[int]:
        left = budget - len(cohort)
        prefixes = [0] * len(cohort)
        for q, lane in enumerate(cohort):
            if lane.fixed >= 0:
                take = min(lane.fixed, lane.cap, bound)
            elif q == forced:
                take = depth
            else:
                continue
            take = min(take, left)
            prefixes[q] = take
            left = left - take
        ranking = [
            (-lane.curve[k - 1], k, lane.request.slot, q)
            for q, lane in enumerate(cohort)
            if lane.fixed < 0 and q != forced
            for k in range(1, min(bound, lane.cap) + 1)
        ]
        ranking.sort()
        for slot in ranking[: max(left, 0)]:
            prefixes[slot[3]] += 1
        return prefixes

    def shape(self, kind: int, n: int, prefixes: list[int]) -> tuple[int, int]:
        if n == 0:
            return 0, 0
        b_pad = bucket(self.p.batch_buckets, n)
        if kind == RECT:
            return b_pad, max(prefixes)
        tokens = 0
        for prefix in prefixes:
            tokens += 1 + prefix
        return b_pad, bucket(self.p.token_buckets, tokens)

    def plan(self, now: int) -> dict[str, Any]:
        p = self.p
        self.counter += 1
        number = self.counter
        lanes = self.eligible()
        eligible = [
            [
                lane.request.spec.id,
                lane.request.slot,
                lane.cap,
                lane.fixed,
                lane.alloc,
                lane.request.last_served,
                lane.curve,
            ]
            for lane in lanes
        ]
        offered = self.offered_prefill()
        chunk, bonus = 0, 0.0
        if offered is not None:
            chunk = min(p.prefill_chunk, offered.spec.prompt_len - offered.prefilled)
            waited = (now - offered.spec.arrival_us) / p.prefill_bonus_period_us
            bonus = waited if waited < p.prefill_bonus_cap else p.prefill_bonus_cap

        def duration(kind: int, b_pad: int, width: int, row: bool) -> int:
            d = self.estimate(kind, b_pad, width) if b_pad > 0 else 0
            return d + self.prefill_cost(chunk) if row else d

        cands: list[Cand] = []

        def add(kind: int, n: int, row: bool, bound: int, budget: int) -> None:
            prefixes = self.allocate(lanes[:n], bound, budget)
            expected = 0.0
            for lane, prefix in zip(lanes[:n], prefixes, strict=True):
                expected = expected + self.lane_value(lane.curve, prefix)
            b_pad, width = self.shape(kind, n, prefixes)
            d = duration(kind, b_pad, width, row)
            value = (expected + (bonus if row else 0.0)) / d
            cands.append(
                Cand(
                    len(cands),
                    kind,
                    n,
                    row,
                    bound,
                    budget,
                    prefixes,
                    b_pad,
                    width,
                    expected,
                    d,
                    value,
                )
            )

        limit = min(len(lanes), p.verify_budget, p.batch_buckets[-1])
        sizes = [b for b in p.batch_buckets if b < limit] + ([limit] if limit > 0 else [])
        for row in (False, True) if offered is not None else (False,):
            if not lanes:
                if row:
                    add(RECT, 0, True, 0, 0)
                continue
            for n in sizes:
                for bound in range(MAX_DRAFT + 1):
                    add(RECT, n, row, bound, p.verify_budget)
                if p.ragged:
                    for tokens in p.token_buckets:
                        if tokens >= n:
                            add(RAGGED, n, row, MAX_DRAFT, min(p.verify_budget, tokens))
        if not cands:
            return self.record(
                number, now, eligible, -1, self.credit, [], {}, -1, [], -1, -1, None, []
            )

        pruned: dict[int, int] = {}
        for x in cands:
            for y in cands:
                if y is not x and y.group() == x.group() and y.dominates(x):
                    pruned[x.id] = y.id
                    break
        alive = [c for c in cands if c.id not in pruned]
        winner = min(alive, key=Cand.key)

        credit_before = self.credit
        accrued = self.credit + p.probe_rate * winner.expected
        self.credit = accrued if accrued < p.credit_cap else p.credit_cap

        probes: list[list[Any]] = []
        probe_prefixes: list[list[int]] = []
        cohort = lanes[: winner.cohort]
        for q, lane in enumerate(cohort if winner.cohort > 0 else []):
            depth = winner.prefixes[q] + 1
            if lane.fixed >= 0 or depth > lane.cap:
                continue
            trials = lane.request.trials[depth]
            if trials >= p.probe_min_trials:
                continue
            prefixes = self.allocate(cohort, winner.bound, winner.budget, q, depth)
            if prefixes[q] != depth or any(
                other.fixed >= 0 and prefixes[j] != winner.prefixes[j]
                for j, other in enumerate(cohort)
            ):
                continue
            added, removed = [], []
            for j, other in enumerate(cohort):
                slot = other.request.slot
                for k in range(winner.prefixes[j] + 1, prefixes[j] + 1):
                    added.append((-other.curve[k - 1], k, slot))
                for k in range(prefixes[j] + 1, winner.prefixes[j] + 1):
                    removed.append((-other.curve[k - 1], k, slot))
            gained, lost = 0.0, 0.0
            for key in sorted(added):
                gained = gained + -key[0]
            for key in sorted(removed):
                lost = lost + -key[0]
            gain = gained - lost
            expected = winner.expected + gain
            b_pad, width = self.shape(winner.kind, winner.cohort, prefixes)
            d = duration(winner.kind, b_pad, width, winner.prefill)
            cost = (winner.expected * d) / winner.duration - expected
            probes.append([q, lane.request.spec.id, depth, trials, gain, expected, d, cost])
            probe_prefixes.append(prefixes)

        source, probe, refresh = "winner", -1, -1
        chosen = winner
        kind, prefixes = winner.kind, winner.prefixes
        b_pad, width, expected, d = winner.b_pad, winner.width, winner.expected, winner.duration
        funded = [i for i, row in enumerate(probes) if row[7] <= self.credit]
        if funded:
            probe = min(funded, key=lambda i: (probes[i][3], probes[i][7], probes[i][0]))
            self.credit = self.credit - max(probes[probe][7], 0.0)
            source, prefixes = "probe", probe_prefixes[probe]
            b_pad, width = self.shape(kind, winner.cohort, prefixes)
            expected, d = probes[probe][5], probes[probe][6]
        elif winner.cohort > 0 and self.fresh(winner, now):
            stale = [
                c
                for c in alive
                if c is not winner and c.group() == winner.group() and not self.fresh(c, now)
            ]
            if stale:
                best = min(stale, key=Cand.key)
                if best.value >= winner.value * (1.0 - p.refresh_tolerance):
                    chosen, source, refresh = best, "refresh", best.id
                    kind, prefixes = best.kind, best.prefixes
                    b_pad, width, expected, d = best.b_pad, best.width, best.expected, best.duration

        in_flight = 0
        for round_ in self.in_flight.values():
            in_flight += round_.duration
        progress = now + in_flight + d
        round_lanes, lane_values = [], []
        for lane, prefix in zip(lanes[: chosen.cohort], prefixes, strict=True):
            value = self.lane_value(lane.curve, prefix)
            lane_values.append([lane.request.spec.id, value, value / d * 1e6, progress])
            round_lanes.append([lane.request.spec.id, lane.request.slot, prefix, lane.alloc])
        row = chosen.prefill and offered is not None
        prefill_request = offered.spec.id if row and offered is not None else -1
        prefill_tokens = chunk if row else 0
        round_row = [
            source,
            kind,
            b_pad,
            width,
            prefill_request,
            prefill_tokens,
            round_lanes,
            expected,
            d,
        ]
        # commit
        self.in_flight[number] = InFlight(
            round_lanes, kind, b_pad, width, prefill_request, prefill_tokens, d
        )
        for request_id, _slot, prefix, _alloc in round_lanes:
            r = self.requests[request_id]
            r.pending_count += 1
            r.pending_advance += 1 + prefix
            r.last_served = number
        if row and offered is not None:
            offered.prefill_in_flight = True
            if offered.phase == WAITING:
                offered.phase = PREFILLING
                offered.slot = self.free.pop(0)
        return self.record(
            number,
            now,
            eligible,
            offered.spec.id if offered is not None else -1,
            credit_before,
            [c.row() for c in cands],
            pruned,
            winner.id,
            probes,
            probe,
            refresh,
            round_row,
            lane_values,
        )

    def record(
        self,
        plan: int,
        now: int,
        eligible: list[Any],
        prefill: int,
        credit_before: float,
        candidates: list[Any],
        pruned: dict[int, int],
        winner: int,
        probes: list[Any],
        probe: int,
        refresh: int,
        round_: list[Any] | None,
        lane_values: list[Any],
    ) -> dict[str, Any]:
        return {
            "t": "plan",
            "plan": plan,
            "now": now,
            "eligible": eligible,
            "prefill": prefill,
            "credit_before": credit_before,
            "candidates": candidates,
            "pruned": [[x, by] for x, by in sorted(pruned.items())],
            "winner": winner,
            "probes": probes,
            "probe": probe,
            "refresh": refresh,
            "credit_after": self.credit,
            "round": round_,
            "lane_values": lane_values,
        }

    # -- completion ----------------------------------------------------------------------
    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        done = self.in_flight.pop(event["round"])
        for lane, result in zip(done.lanes, event["lanes"], strict=True):
            _request, verified, accepted, tokens, finished, offer = result
            r = self.requests[lane[0]]
            r.generated += tokens
            for k in range(1, verified + 1):
                r.trials[k] += 1
            for k in range(1, accepted + 1):
                r.accepts[k] += 1
            r.pending_count -= 1
            r.pending_advance -= 1 + lane[2]
            r.offer = offer
            if r.phase == DECODING and (finished or r.generated >= r.spec.max_new):
                r.phase = DRAINING
        if done.prefill_request >= 0:
            r = self.requests[done.prefill_request]
            r.prefill_in_flight = False
            r.prefilled += done.chunk
            if r.prefilled >= r.spec.prompt_len:
                r.phase = DECODING
        if done.lanes:
            observed = event["observed_us"]
            if done.prefill_request >= 0:
                observed -= self.prefill_cost(done.chunk)
            observed = max(observed, 1)
            shape = (done.kind, done.b_pad, done.width)
            estimate = self.estimate(*shape)
            self.table[shape] = [estimate + (observed - estimate) // 4, now]
        retired = []
        for request_id, r in self.requests.items():
            if r.phase == DRAINING and r.pending_count == 0:
                r.phase = RETIRED
                self.free.append(r.slot)
                self.free.sort()
                retired.append(request_id)
        return sorted(retired)
