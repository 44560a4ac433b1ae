"""The scheduler spec, read again from its words, to check traces against.

An independent second implementation of the [fixed] rules (docs/scheduler.md): it follows a
trace's records (arrivals, completions, retirements, plans) with state of its own, derives
every plan record from that state and the rules, and compares what it derives with what was
recorded, byte for byte. It imports nothing from ``tracediff.models.specdec.sched``: the formulas
module,
the reference, the optimized scheduler and the shared core are what it checks, so leaning on
any of them would make a shared mistake invisible. Only the scenario data type and the
trace encoder (the contract's byte form) come from the project; the typed columns of the
wide tables it packs and unpacks itself, from the documented format (``pack``, ``unpack``).

A mismatch raises ``AssertionError`` naming the rule that derived the differing field, the
plan, and the first differing value. ``OracleStats`` counts what the rules decided along the
way (which winner-key component broke a tie, which dominance condition pruned, ...), so a
test can show that the scenarios it drove made each rule matter.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tracediff.models.specdec.scenario.model import RequestSpec, Scenario
from tracediff.trace import encode

MAX_DRAFT = 7  # "seven drafts"
RECT, RAGGED = 0, 1  # the trace's kind column
HOST, DEVICE = 0, 1  # the trace's alloc column

# Record layout, as docs/trace-format.md states it.
PLAN_KEYS = (
    "t",
    "plan",
    "now",
    "eligible",
    "prefill",
    "credit_before",
    "candidates",
    "pruned",
    "winner",
    "probes",
    "probe",
    "refresh",
    "credit_after",
    "round",
    "lane_values",
)
COLUMNS = {
    "eligible": ["request", "slot", "cap", "fixed_width", "alloc", "last_served", "curve"],
    "candidates": [
        "id",
        "kind",
        "cohort",
        "prefill",
        "bound",
        "b_pad",
        "width",
        "prefixes",
        "expected",
        "duration",
        "value",
        "budget",
    ],
    "pruned": ["id", "by"],
    "probes": ["position", "request", "depth", "trials", "gain", "expected", "duration", "cost"],
    "round": [
        "source",
        "kind",
        "b_pad",
        "width",
        "prefill_request",
        "prefill_tokens",
        "lanes",
        "expected",
        "duration",
    ],
    "lanes": ["request", "slot", "prefix", "alloc"],
    "lane_values": ["request", "expected", "rate", "next_progress"],
}
# The wide tables are typed columns (record schema 2): each column a bin of little-endian
# fixed-width values of its type, a ragged column a [u16 lengths, values] pair of bins.
TYPES = {
    "eligible": ["i32", "i16", "u8", "i8", "u8", "i32", "f64[7]"],
    "candidates": [
        "i32",
        "u8",
        "i16",
        "bool",
        "u8",
        "i16",
        "i16",
        "u8[]",
        "f64",
        "i64",
        "f64",
        "i16",
    ],
    "pruned": ["i32", "i32"],
    "probes": ["i16", "i32", "u8", "i32", "f64", "f64", "i64", "f64"],
    "lane_values": ["i32", "f64", "f64", "i64"],
}
# one value of each type, as a struct format (bool is one byte, 0 or 1)
STRUCT = {"bool": "B", "u8": "B", "i8": "b", "i16": "h", "i32": "i", "i64": "q", "f64": "d"}
STRUCT["f64[7]"] = "7d"
STRUCT["u8[]"] = "B"

# Which rule derives each field (for the failure message).
RULES = {
    "plan": "plan numbers (from 1, one per plan call)",
    "now": "the clock",
    "eligible.request": "eligibility and priority order",
    "eligible.slot": "eligibility and priority order (slots: lowest free on admission)",
    "eligible.last_served": "eligibility and priority order",
    "eligible.cap": "the cap min(7, remaining - 1, offer, grammar cap)",
    "eligible.fixed_width": "eligibility",
    "eligible.alloc": "allocation side (grammar lanes host, mixed: host-stop host)",
    "eligible.curve": "survival curve (pow_k, est_k, monotone min)",
    "prefill": "the prefill row (oldest waiting or prefilling request)",
    "credit_before": "credit carried from the previous plan",
    "candidates.id": "candidate set and order",
    "candidates.kind": "candidate set and order",
    "candidates.cohort": "candidate set and order (cohort sizes)",
    "candidates.prefill": "candidate set and order",
    "candidates.bound": "candidate set and order (width bounds)",
    "candidates.budget": "candidate budgets (ragged: min(verify_budget, T))",
    "candidates.prefixes": "prefix allocation (fixed lanes, slot ranking, the cut)",
    "candidates.b_pad": "shape: B_pad is the smallest batch bucket >= n",
    "candidates.width": "shape: rect max p, ragged Q_pad",
    "candidates.expected": "E: lane values left to right, summed in priority order",
    "candidates.duration": "duration: table (prior until observed, then updated) + prefill",
    "candidates.value": "value (E + prefill bonus) / duration",
    "pruned": "padding pruning (dominance, first dominator)",
    "winner": "the winner rule (value, then the tie-breaks)",
    "probes": "acceptance probes",
    "probe": "acceptance probe choice (funding; trials, cost, position)",
    "refresh": "timing probe (refresh preconditions and choice)",
    "credit_after": "credit accrual and payment",
    "round": "the chosen round",
    "lane_values": "lane values (E_i, rate, next-progress)",
    "retire": "retirement (draining, nothing in flight)",
}


# -- the formulas, restated ----------------------------------------------------------------------
def survival(req: Req, alpha: float, m: float) -> list[float]:
    """s_1..s_7: pow by repeated multiplication, est_k, the monotone minimum."""
    curve = []
    power = 1.0
    previous = 1.0
    for k in range(MAX_DRAFT):
        power = power * alpha
        est = (req.accepts[k] + m * power) / (req.trials[k] + m)
        previous = min(est, previous)
        curve.append(previous)
    return curve


def lane_value(curve: list[float], prefix: int) -> float:
    """1 + s_1 + ... + s_p, left to right."""
    value = 1.0
    for k in range(prefix):
        value = value + curve[k]
    return value


def smallest_at_least(buckets: tuple[int, ...], size: int) -> int:
    return min(b for b in buckets if b >= size)


def dominates(y: Cand, x: Cand) -> bool:
    """Y dominates X: no worse in both, strictly better in one, or equal with a smaller shape."""
    if not (y.expected >= x.expected and y.duration <= x.duration):
        return False
    if y.expected > x.expected or y.duration < x.duration:
        return True
    return (y.b_pad, y.width, y.bound) < (x.b_pad, x.width, x.bound)


def winner_key(c: Cand) -> tuple[Any, ...]:
    """Highest value; smaller duration, larger cohort, smaller B_pad, smaller W or Q_pad,
    rect before ragged, no prefill row first; candidate order last."""
    return (-c.value, c.duration, -c.cohort, c.b_pad, c.width, c.kind, c.prefill, c.id)


WINNER_COMPONENTS = ("value", "duration", "cohort", "b_pad", "width", "kind", "prefill", "order")


def first_difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> int:
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x != y:
            return i
    return len(a)


# -- state ---------------------------------------------------------------------------------------
@dataclass
class Req:
    spec: RequestSpec
    phase: str = "waiting"  # waiting, prefilling, decoding, draining, retired
    slot: int = -1
    prefilled: int = 0
    row_in_flight: bool = False
    generated: int = 0
    last_served: int = -1
    offer: int = MAX_DRAFT
    trials: list[int] = field(default_factory=lambda: [0] * MAX_DRAFT)
    accepts: list[int] = field(default_factory=lambda: [0] * MAX_DRAFT)


@dataclass(frozen=True)
class Flight:
    """A submitted round, as the oracle planned it."""

    kind: int
    b_pad: int
    width: int
    lanes: tuple[tuple[int, int, int, int], ...]  # request, slot, prefix or ceiling, alloc
    prefill_request: int
    prefill_tokens: int
    duration: int


@dataclass(frozen=True)
class LaneView:
    request: int
    slot: int
    cap: int
    fixed: int
    alloc: int
    curve: list[float]
    req: Req


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

    @property
    def group(self) -> tuple[int, int, bool]:
        return (self.kind, self.cohort, self.prefill)

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


@dataclass
class OracleStats:
    """What the rules decided in the plans checked (counts of plans, or of events)."""

    counts: Counter[str] = field(default_factory=Counter)
    max_b_pad: int = 0
    plans: int = 0

    def add(self, what: str) -> None:
        self.counts[what] += 1


class SpecOracle:
    """Follows one trace and checks each record against the rules (``check``)."""

    def __init__(self, scenario: Scenario, stats: OracleStats | None = None) -> None:
        self.scenario = scenario
        self.p = scenario.params
        self.stats = stats if stats is not None else OracleStats()
        self.specs = {r.id: r for r in scenario.requests}
        self.requests: dict[int, Req] = {}
        self.flights: dict[int, Flight] = {}  # plan number -> round in flight
        self.table: dict[tuple[int, int, int], tuple[int, int]] = {}  # estimate, observed at
        self.credit = 0.0
        self.plans = 0
        self.free_slots = list(range(self.p.max_lanes))
        self.expect_retire: list[int] = []

    # -- driving ---------------------------------------------------------------------------
    def check(self, records: Iterable[dict[str, Any]]) -> None:
        """Check a trace's records (header first), stopping at the first that breaks a rule."""
        stream = iter(records)
        header = next(stream)
        assert header["columns"] == COLUMNS, "the header's columns are the documented ones"
        assert header["types"] == TYPES, "the header's column types are the documented ones"
        assert Scenario.from_dict(header["scenario"]) == self.scenario
        for record in stream:
            kind = record["t"]
            if self.expect_retire:
                assert kind == "retire", f"{RULES['retire']}: expected {self.expect_retire}"
            if kind == "arrival":
                self.arrive(record)
            elif kind == "completion":
                self.complete(record)
            elif kind == "retire":
                assert record["requests"] == self.expect_retire, (
                    f"{RULES['retire']}: derived {self.expect_retire}, recorded "
                    f"{record['requests']}"
                )
                self.expect_retire = []
            elif kind == "plan":
                self.plan(record)
            else:
                raise AssertionError(f"unknown record type {kind!r}")
        assert not self.flights and not self.expect_retire
        assert all(req.phase == "retired" for req in self.requests.values())
        assert sorted(self.requests) == sorted(self.specs)

    def arrive(self, record: dict[str, Any]) -> None:
        spec = self.specs[record["request"]]
        assert record["now"] == spec.arrival_us
        self.requests[spec.id] = Req(spec)

    # -- commit and completion ---------------------------------------------------------------
    def pending(self, rid: int) -> tuple[int, int]:
        """Pending count and pending advance: rounds in flight holding a lane of ``rid``,
        and Σ(1 + prefix or ceiling) over those lanes."""
        count = advance = 0
        for flight in self.flights.values():
            for request, _slot, prefix, _alloc in flight.lanes:
                if request == rid:
                    count += 1
                    advance += 1 + prefix
        return count, advance

    def complete(self, record: dict[str, Any]) -> None:
        p = self.p
        now = record["now"]
        flight = self.flights.pop(record["round"])
        results = record["lanes"]
        assert [r[0] for r in results] == [lane[0] for lane in flight.lanes]
        for (rid, verified, accepted, tokens, finished, offer), lane in zip(
            results, flight.lanes, strict=True
        ):
            req = self.requests[rid]
            assert 0 <= accepted <= verified <= lane[2], "the engine verifies within the round"
            req.generated += tokens
            assert req.generated <= req.spec.max_new, "never past max_new"
            for k in range(verified):
                req.trials[k] += 1
            for k in range(accepted):
                req.accepts[k] += 1
            req.offer = offer
            if req.phase == "decoding" and (finished or req.generated >= req.spec.max_new):
                req.phase = "draining"
                self.stats.add("drain")
        if flight.prefill_request >= 0:
            req = self.requests[flight.prefill_request]
            req.row_in_flight = False
            req.prefilled += flight.prefill_tokens
            if req.prefilled >= req.spec.prompt_len:
                req.phase = "decoding"
        if flight.lanes:
            observed = record["observed_us"]
            if flight.prefill_request >= 0:
                observed -= p.prefill_base_us + p.prefill_token_us * flight.prefill_tokens
                self.stats.add("table: prefill cost taken off")
            observed = max(observed, 1)
            shape = (flight.kind, flight.b_pad, flight.width)
            estimate = self.estimate(shape)
            # est + (observed - est) // 4: floor division, so a fall rounds down.
            updated = estimate + (observed - estimate) // 4
            if shape in self.table:
                self.stats.add("table: updated" if updated != estimate else "table: unchanged")
            else:
                self.stats.add("table: first observation")
            self.table[shape] = (updated, now)
        retired = []
        for rid, req in self.requests.items():
            if req.phase == "draining" and self.pending(rid)[0] == 0:
                req.phase = "retired"
                self.free_slots.append(req.slot)
                self.free_slots.sort()
                retired.append(rid)
        self.expect_retire = sorted(retired)

    def commit(self, number: int, flight: Flight) -> None:
        self.flights[number] = flight
        for request, _slot, _prefix, _alloc in flight.lanes:
            self.requests[request].last_served = number
        if flight.prefill_request >= 0:
            req = self.requests[flight.prefill_request]
            req.row_in_flight = True
            if req.phase == "waiting":
                req.phase = "prefilling"
                req.slot = self.free_slots.pop(0)  # the lowest free slot

    # -- the pieces of a plan -----------------------------------------------------------------
    def estimate(self, shape: tuple[int, int, int]) -> int:
        """The table's estimate: the prior until the shape is observed."""
        entry = self.table.get(shape)
        if entry is not None:
            return entry[0]
        p = self.p
        kind, b_pad, width = shape
        tokens = b_pad * (width + 1) if kind == RECT else width
        prior = p.base_us + p.lane_us * b_pad + p.token_us * tokens
        if shape in p.eager_shapes:
            prior += p.eager_penalty_us
        quantum = p.duration_quantum_us
        return (prior + quantum - 1) // quantum * quantum  # rounded up to the quantum

    def fresh(self, c: Cand, now: int) -> bool:
        entry = self.table.get((c.kind, c.b_pad, c.width))
        return entry is not None and now - entry[1] < self.p.refresh_period_us

    def lanes(self) -> list[LaneView]:
        p = self.p
        out = []
        for rid, req in self.requests.items():
            if req.phase != "decoding":
                continue
            spec = req.spec
            count, advance = self.pending(rid)
            remaining = spec.max_new - req.generated - advance
            if spec.host_stop and count > 0:
                if remaining >= 1:
                    self.stats.add("a host-stop lane held back")
                continue
            if remaining < 1:
                self.stats.add("no token left: not a lane")
                continue
            terms = {"7": MAX_DRAFT, "remaining - 1": remaining - 1, "offer": req.offer}
            if spec.grammar_cap >= 0:
                terms["grammar cap"] = spec.grammar_cap
            cap = min(terms.values())
            if p.allocation == "host" or spec.grammar_cap >= 0:
                alloc = HOST
            elif p.allocation == "device":
                alloc = DEVICE
            else:
                alloc = HOST if spec.host_stop else DEVICE
            lowest = [name for name, term in terms.items() if term == cap]
            if len(lowest) == 1:
                device = " (device lane)" if alloc == DEVICE else ""
                self.stats.add(f"cap by {lowest[0]}{device}")
            curve = survival(req, p.alpha, p.prior_weight)
            out.append(LaneView(rid, req.slot, cap, spec.fixed_width, alloc, curve, req))
        out.sort(key=lambda lane: (lane.req.last_served, lane.slot))
        return out

    def prefill_row(self) -> Req | None:
        ready = [
            req
            for req in self.requests.values()
            if not req.row_in_flight
            and (req.phase == "prefilling" or (req.phase == "waiting" and self.free_slots))
        ]
        return min(ready, key=lambda r: (r.spec.arrival_us, r.spec.id), default=None)

    def allocate(
        self, cohort: list[LaneView], bound: int, budget: int, forced: int = -1, depth: int = 0
    ) -> list[int]:
        """Fixed lanes (and a probe's forced lane) first, in priority order, each within what
        is left of budget - n; then the best free slots by (-s, depth, slot)."""
        left = budget - len(cohort)
        prefixes = [0] * len(cohort)
        for q, lane in enumerate(cohort):
            if lane.fixed >= 0:
                take = min(lane.fixed, lane.cap, bound, left)
            elif q == forced:
                take = min(depth, left)
            else:
                continue
            prefixes[q] = take
            left -= take
        slots = sorted(
            (-lane.curve[k - 1], k, lane.slot, q)
            for q, lane in enumerate(cohort)
            if lane.fixed < 0 and q != forced
            for k in range(1, min(bound, lane.cap) + 1)
        )
        for _s, _k, _slot, q in slots[: max(left, 0)]:
            prefixes[q] += 1
        if forced < 0 and len(slots) > max(left, 0) > 0:
            cut = first_difference(slots[left - 1][:3], slots[left][:3])
            self.stats.add(f"rank cut by {('survival', 'depth', 'slot')[min(cut, 2)]}")
        return prefixes

    def shape(self, kind: int, cohort: int, prefixes: list[int]) -> tuple[int, int]:
        if cohort == 0:
            return 0, 0
        b_pad = smallest_at_least(self.p.batch_buckets, cohort)
        if kind == RECT:
            return b_pad, max(prefixes)
        tokens = 0
        for prefix in prefixes:
            tokens += 1 + prefix
        return b_pad, smallest_at_least(self.p.token_buckets, tokens)

    def duration(self, kind: int, b_pad: int, width: int, prefill_tokens: int) -> int:
        d = self.estimate((kind, b_pad, width)) if b_pad else 0
        if prefill_tokens:
            d += self.p.prefill_base_us + self.p.prefill_token_us * prefill_tokens
        return d

    def candidate(
        self,
        cid: int,
        kind: int,
        cohort: list[LaneView],
        bound: int,
        budget: int,
        row: Req | None,
        now: int,
    ) -> Cand:
        p = self.p
        prefixes = self.allocate(cohort, bound, budget)
        expected = 0.0
        for lane, prefix in zip(cohort, prefixes, strict=True):
            expected = expected + lane_value(lane.curve, prefix)
        b_pad, width = self.shape(kind, len(cohort), prefixes)
        chunk = min(p.prefill_chunk, row.spec.prompt_len - row.prefilled) if row else 0
        d = self.duration(kind, b_pad, width, chunk)
        bonus = 0.0
        if row is not None:
            waited = now - row.spec.arrival_us
            bonus = min(p.prefill_bonus_cap, waited / p.prefill_bonus_period_us)
        value = (expected + bonus) / d
        return Cand(
            cid,
            kind,
            len(cohort),
            row is not None,
            bound,
            budget,
            prefixes,
            b_pad,
            width,
            expected,
            d,
            value,
        )

    def cohort_sizes(self, eligible: int) -> list[int]:
        p = self.p
        limit = min(eligible, p.verify_budget, p.batch_buckets[-1])
        sizes = [b for b in p.batch_buckets if b < limit]
        if limit > 0:
            sizes.append(limit)
        return sizes

    def candidates(self, lanes: list[LaneView], row: Req | None, now: int) -> list[Cand]:
        p = self.p
        out: list[Cand] = []
        for with_row in (None, row) if row is not None else (None,):
            if not lanes:
                if with_row is not None:  # the prefill-only round
                    out.append(self.candidate(len(out), RECT, [], 0, 0, with_row, now))
                continue
            for n in self.cohort_sizes(len(lanes)):
                cohort = lanes[:n]
                for bound in range(MAX_DRAFT + 1):
                    budget = p.verify_budget
                    out.append(self.candidate(len(out), RECT, cohort, bound, budget, with_row, now))
                if p.ragged:
                    for tokens in p.token_buckets:
                        if tokens >= n:
                            budget = min(p.verify_budget, tokens)
                            out.append(
                                self.candidate(
                                    len(out), RAGGED, cohort, MAX_DRAFT, budget, with_row, now
                                )
                            )
        return out

    def prune(self, cands: list[Cand]) -> dict[int, int]:
        pruned: dict[int, int] = {}
        for x in cands:
            dominators = [y for y in cands if y is not x and y.group == x.group and dominates(y, x)]
            if not dominators:
                continue
            y = dominators[0]
            pruned[x.id] = y.id
            if y.expected > x.expected and y.duration < x.duration:
                self.stats.add("pruned by both")
            elif y.expected > x.expected:
                self.stats.add("pruned by E")
            elif y.duration < x.duration:
                self.stats.add("pruned by duration")
            else:
                cut = first_difference((y.b_pad, y.width, y.bound), (x.b_pad, x.width, x.bound))
                self.stats.add(f"pruned by tie on {('b_pad', 'width', 'bound')[cut]}")
            if len(dominators) >= 2:
                self.stats.add("pruned: first of several dominators")
        return pruned

    def probes(
        self, winner: Cand, lanes: list[LaneView], chunk: int
    ) -> tuple[list[list[Any]], list[list[int]]]:
        p = self.p
        cohort = lanes[: winner.cohort]
        rows: list[list[Any]] = []
        allocations: list[list[int]] = []
        for q, lane in enumerate(cohort):
            if lane.fixed >= 0:
                continue
            depth = winner.prefixes[q] + 1
            if depth > lane.cap:
                continue
            trials = lane.req.trials[depth - 1]
            if trials >= p.probe_min_trials:
                if trials == p.probe_min_trials:
                    self.stats.add("trials exactly probe_min_trials: no probe")
                continue
            prefixes = self.allocate(cohort, winner.bound, winner.budget, q, depth)
            if prefixes[q] != depth or any(
                other.fixed >= 0 and prefixes[i] != winner.prefixes[i]
                for i, other in enumerate(cohort)
            ):
                self.stats.add("probe not offered: does not fit")
                continue
            added, removed = [], []
            for i, (before, after) in enumerate(zip(winner.prefixes, prefixes, strict=True)):
                curve, slot = cohort[i].curve, cohort[i].slot
                for k in range(before + 1, after + 1):
                    added.append((-curve[k - 1], k, slot))
                for k in range(after + 1, before + 1):
                    removed.append((-curve[k - 1], k, slot))
            gained = 0.0
            for s, _k, _slot in sorted(added):
                gained = gained + -s
            lost = 0.0
            for s, _k, _slot in sorted(removed):
                lost = lost + -s
            gain = gained - lost
            self.stats.add("probe removes a slot" if removed else "probe removes nothing")
            if depth > winner.bound:
                self.stats.add("probe past the bound")
            expected = winner.expected + gain
            b_pad, width = self.shape(winner.kind, winner.cohort, prefixes)
            d = self.duration(winner.kind, b_pad, width, chunk)
            cost = (winner.expected * d) / winner.duration - expected
            rows.append([q, lane.request, depth, trials, gain, expected, d, cost])
            allocations.append(prefixes)
        return rows, allocations

    # -- a plan ----------------------------------------------------------------------------------
    def plan(self, record: dict[str, Any]) -> None:
        p = self.p
        assert len(self.flights) < 1 + p.queue_depth, "plans only while the queue has room"
        self.plans += 1
        number = self.plans
        now = record["now"]
        lanes = self.lanes()
        row = self.prefill_row()
        eligible = [
            [
                lane.request,
                lane.slot,
                lane.cap,
                lane.fixed,
                lane.alloc,
                lane.req.last_served,
                lane.curve,
            ]
            for lane in lanes
        ]
        credit_before = self.credit
        cands = self.candidates(lanes, row, now)
        if not cands:
            derived = self.record(number, now, eligible, -1, credit_before, [], {}, -1)
            self.compare(derived, record)
            return
        self.stats.plans += 1
        self.stats.max_b_pad = max(self.stats.max_b_pad, *(c.b_pad for c in cands))
        pruned = self.prune(cands)
        alive = [c for c in cands if c.id not in pruned]
        if any(
            now - self.table[(c.kind, c.b_pad, c.width)][1] == p.refresh_period_us
            for c in alive
            if (c.kind, c.b_pad, c.width) in self.table
        ):
            self.stats.add("a shape observed exactly refresh_period ago")
        winner = min(alive, key=winner_key)
        for other in alive:
            if other is not winner:
                cut = first_difference(winner_key(winner), winner_key(other))
                self.stats.add(f"winner over another by {WINNER_COMPONENTS[cut]}")
        chunk = min(p.prefill_chunk, row.spec.prompt_len - row.prefilled) if row else 0
        chunk = chunk if winner.prefill else 0

        # Credit accrues every plan with candidates; a probe is paid from it.
        accrued = self.credit + p.probe_rate * winner.expected
        self.credit = min(p.credit_cap, accrued)
        if accrued >= p.credit_cap:
            self.stats.add("credit at its cap")
        probe_rows: list[list[Any]] = []
        chosen_probe = -1
        source, chosen = "winner", winner
        kind, cohort_n = winner.kind, winner.cohort
        prefixes, expected, d = winner.prefixes, winner.expected, winner.duration
        if winner.cohort > 0:
            probe_rows, allocations = self.probes(winner, lanes, chunk)
            funded = [i for i, r in enumerate(probe_rows) if r[7] <= self.credit]
            if len(funded) < len(probe_rows):
                self.stats.add("probe unfunded")
            if funded:
                # fewest trials at the probed depth, then the lowest cost, then position
                chosen_probe = min(
                    funded, key=lambda i: (probe_rows[i][3], probe_rows[i][7], probe_rows[i][0])
                )
                for other in funded:
                    if other != chosen_probe:
                        a, b = probe_rows[chosen_probe], probe_rows[other]
                        cut = first_difference((a[3], a[7], a[0]), (b[3], b[7], b[0]))
                        self.stats.add(f"probe chosen by {('trials', 'cost', 'position')[cut]}")
                cost = probe_rows[chosen_probe][7]
                self.credit = self.credit - max(cost, 0.0)
                source = "probe"
                prefixes = allocations[chosen_probe]
                expected, d = probe_rows[chosen_probe][5], probe_rows[chosen_probe][6]
        refresh = -1
        if chosen_probe < 0 and winner.cohort > 0 and self.fresh(winner, now):
            stale = [
                c
                for c in alive
                if c is not winner and c.group == winner.group and not self.fresh(c, now)
            ]
            if stale:
                best = min(stale, key=winner_key)
                if best.value >= winner.value * (1.0 - p.refresh_tolerance):
                    self.stats.add("refresh accepted")
                    refresh, source, chosen = best.id, "refresh", best
                    prefixes, expected, d = best.prefixes, best.expected, best.duration
                else:
                    self.stats.add("refresh rejected")
        b_pad, width = self.shape(kind, cohort_n, prefixes)
        cohort = lanes[:cohort_n]
        round_lanes = tuple(
            (lane.request, lane.slot, prefix, lane.alloc)
            for lane, prefix in zip(cohort, prefixes, strict=True)
        )
        prefill_request = row.spec.id if (row is not None and chosen.prefill) else -1
        in_flight = 0
        for flight in self.flights.values():
            in_flight += flight.duration
        progress = now + in_flight + d
        lane_values = []
        for lane, prefix in zip(cohort, prefixes, strict=True):
            value = lane_value(lane.curve, prefix)
            lane_values.append([lane.request, value, value / d * 1e6, progress])
        round_row = [
            source,
            kind,
            b_pad,
            width,
            prefill_request,
            chunk,
            [list(lane) for lane in round_lanes],
            expected,
            d,
        ]
        derived = self.record(
            number,
            now,
            eligible,
            row.spec.id if row is not None else -1,
            credit_before,
            cands,
            pruned,
            winner.id,
            probe_rows,
            chosen_probe,
            refresh,
            round_row,
            lane_values,
        )
        self.compare(derived, record)
        self.commit(number, Flight(kind, b_pad, width, round_lanes, prefill_request, chunk, d))

    def record(
        self,
        number: int,
        now: int,
        eligible: list[list[Any]],
        prefill: int,
        credit_before: float,
        cands: list[Cand],
        pruned: dict[int, int],
        winner: int,
        probes: list[list[Any]] | None = None,
        probe: int = -1,
        refresh: int = -1,
        round_row: list[Any] | None = None,
        lane_values: list[list[Any]] | None = None,
    ) -> dict[str, Any]:
        values = [
            "plan",
            number,
            now,
            eligible,
            prefill,
            credit_before,
            [c.row() for c in cands],
            [[x, y] for x, y in sorted(pruned.items())],
            winner,
            probes or [],
            probe,
            refresh,
            self.credit,
            round_row,
            lane_values or [],
        ]
        return dict(zip(PLAN_KEYS, values, strict=True))

    def compare(self, derived: dict[str, Any], recorded: dict[str, Any]) -> None:
        packed = {
            key: pack(key, value) if key in TYPES else value for key, value in derived.items()
        }
        if encode(packed) == encode(recorded):
            return
        assert tuple(recorded) == PLAN_KEYS, f"plan record keys {list(recorded)}"
        # name the first differing value in rows, the form the rules speak of
        rows = {
            key: unpack(key, value) if key in TYPES else value for key, value in recorded.items()
        }
        for key in PLAN_KEYS:
            where = _difference(derived[key], rows[key], (key,))
            if where is None:
                continue
            path, mine, theirs = where
            rule = RULES.get(key, key)
            if key in ("eligible", "candidates") and len(path) >= 3 and isinstance(path[2], int):
                rule = RULES.get(f"{key}.{COLUMNS[key][path[2]]}", rule)
            raise AssertionError(
                f"plan {derived['plan']} (now {derived['now']}): {rule}: at "
                f"{'/'.join(str(x) for x in path)} the spec gives {mine!r}, "
                f"the trace has {theirs!r}"
            )
        raise AssertionError(f"plan {derived['plan']}: same values, different bytes")


def pack(table: str, rows: list[list[Any]]) -> list[Any]:
    """A table's rows as its typed columns, encoded here from the documented format."""
    columns: list[Any] = []
    for position, kind in enumerate(TYPES[table]):
        values = [row[position] for row in rows]
        if kind == "u8[]":
            lengths = b"".join(struct.pack("<H", len(v)) for v in values)
            columns.append([lengths, b"".join(struct.pack(f"<{len(v)}B", *v) for v in values)])
        elif kind == "f64[7]":
            columns.append(b"".join(struct.pack("<7d", *v) for v in values))
        else:
            columns.append(b"".join(struct.pack("<" + STRUCT[kind], v) for v in values))
    return columns


def unpack(table: str, columns: Any) -> Any:
    """A recorded table's rows, decoded here from the documented format (a bool byte other
    than 0 or 1 stays an int, so that it shows as a difference)."""
    kinds = TYPES[table]
    assert isinstance(columns, list) and len(columns) == len(kinds), (
        f"{table}: {len(kinds)} columns expected, the trace has {columns!r:.60}"
    )
    decoded: list[list[Any]] = []
    for (name, kind), column in zip(zip(COLUMNS[table], kinds, strict=True), columns, strict=True):
        where = f"{table}.{name} ({kind})"
        if kind == "u8[]":
            assert isinstance(column, list) and len(column) == 2, f"{where}: not [lengths, values]"
            lengths = [n for (n,) in struct.iter_unpack("<H", column[0])]
            values = list(column[1])
            assert sum(lengths) == len(values), f"{where}: lengths do not add up to its values"
            rows, at = [], 0
            for n in lengths:
                rows.append(values[at : at + n])
                at += n
            decoded.append(rows)
            continue
        assert isinstance(column, bytes), f"{where}: not a bin"
        size = struct.calcsize("<" + STRUCT[kind])
        assert len(column) % size == 0, f"{where}: {len(column)} bytes, not whole values"
        values = list(struct.iter_unpack("<" + STRUCT[kind], column))
        if kind == "f64[7]":
            decoded.append([list(v) for v in values])
        elif kind == "bool":
            decoded.append([{0: False, 1: True}.get(v, v) for (v,) in values])
        else:
            decoded.append([v for (v,) in values])
    assert len({len(c) for c in decoded}) == 1, f"{table}: columns of different lengths"
    return [list(row) for row in zip(*decoded, strict=True)]


def _difference(a: Any, b: Any, path: tuple[Any, ...]) -> tuple[tuple[Any, ...], Any, Any] | None:
    """The first place two record values differ, bit for bit (type included)."""
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _difference(x, y, (*path, i))
            if found is not None:
                return found
        if len(a) != len(b):
            return (*path, "length"), len(a), len(b)
        return None
    if type(a) is not type(b):
        return path, a, b
    if isinstance(a, float):
        return None if struct.pack("<d", a) == struct.pack("<d", b) else (path, a, b)
    return None if a == b else (path, a, b)


def check_trace(
    scenario: Scenario, records: Iterable[dict[str, Any]], stats: OracleStats | None = None
) -> OracleStats:
    """Check every record of ``records`` (a trace of ``scenario``, header first); a lazy
    iterator stops being drawn at the first record that breaks a rule."""
    oracle = SpecOracle(scenario, stats)
    oracle.check(records)
    return oracle.stats
