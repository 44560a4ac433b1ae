"""How the scheduler's scenarios are searched: shrink passes, the shrink order, fuzzing.

Design: the search is the core's (:mod:`tracediff.search.shrink` holds the greedy loop, the
evaluation budget, the timeouts, the signatures and the integer helpers; :mod:`tracediff.search.
fuzz` drives Hypothesis), and this module says only what is specific to this model's
scenarios. It reaches the core through :class:`tracediff.model.Shrinking`, the object every
pass is given (the current best, ``consider``, ``holds``, ``delete_runs``, ``minimize``),
and imports nothing of :mod:`tracediff.search`, so that the core depends on the model only
through the seam (:data:`tracediff.models.specdec.model.MODEL`), never the other way round.
A pass may propose anything: the core accepts a candidate only when it is valid, keeps the
signature and is smaller in :func:`size_key`, so the passes below are heuristics that cannot
endanger the search.

The order, :func:`size_key`, guarantees termination: first the number of requests, then the
number of plans (what a reader has to look at), then the number of features switched on,
then plain numbers (``max_new``, prompt lengths, arrival times...), then how many digits the
floats carry, then how far the ids are from 0..n-1 in order.

What makes a good pass here, in the spirit of Hypothesis' essay:

* **Delete first, and delete a lot.** Requests are most of a scenario's size and almost
  all of its cost. The first pass keeps only the earliest arrivals (a divergence cannot
  depend on requests that arrive after it: the simulated engine's randomness is keyed by
  request id, not shared), growing the kept prefix 1, 2, 4... and then bisecting; the
  second is Hypothesis' *adaptive deletion*: try deleting one request and, when that
  works, grow the deleted run exponentially and bisect to the longest run that still works
  (``find_integer``), so n deletable neighbours cost O(log n) runs instead of n.
  Some divergences need *pressure* rather than particular requests (a tie-break that only
  matters when the verification budget binds, i.e. when many lanes compete): keeping k of
  n requests is also tried with the budget scaled by k/n, a compound step that no single
  one-field change can make, since a smaller budget alone is not smaller in the order.
* **Merge, re-time, and look elsewhere.** Merging two neighbours into one request that
  carries both budgets removes a request while keeping the load that deleting either
  loses; moving an arrival onto the one before it makes a burst. While more than four
  requests remain, fresh scenarios of one to four requests drawn by the seeded generator
  with the same scheduler parameters are tried too (a bounded share of the budget): a bug
  that needs a particular small combination is often found faster among small scenarios
  than by deleting from a large one (``fuzz`` finds such repros this way). This is the only
  pass that is not a single step, so the repro is 1-minimal with respect to the others.
* **Keep the shapes while removing lanes.** A request can be in a repro only for the
  padding its lane adds (five lanes run in the 8-lane bucket's shapes, with other
  durations than the 4-lane ones). When the passes stall above four requests, at most four
  of them are tried with the batch buckets below the padded one taken out: the same shapes
  with fewer lanes, a compound step no single deletion or parameter change makes.
* **Keep the lanes, move the parameters.** A request that only prefills (``max_new`` 1)
  is in a repro for the rounds its prefill rows shape; other prefill costs, chunk sizes or
  probe rates shape them as well. The escape also keeps at most four lanes under one to
  four parameters moved (default, half, quarter, double, quadruple), seeded from the best.
* **Put the boundary where a round ends.** A bug at the exact end of a request's budget
  (an advance in flight forgotten) needs that end to fall where a round in flight ends;
  a repro of many requests holds one timeline that does it. The escape also keeps at
  most four lanes in step (arriving together, every draft accepted, all the same whole
  number of full rounds long), so the boundary falls there in every round.
* **Cheap big steps before fine ones.** Switch a feature off for every request at once
  before trying request by request; halve every ``max_new`` together before minimising
  each; set every arrival to 0 at once. When the coarse step works, the fine passes have
  nothing left to do and cost one run each.
* **Minimise numbers by trying the bound first.** ``minimize`` tries the lowest value
  (0 for arrivals, 1 for lengths), then bisects between a failing low and the working
  current value. Interesting values are not monotone in general, so bisection is a
  heuristic; correctness still rests on the order.
* **Canonicalise last.** Renumbering request ids, rounding acceptance parameters and
  resetting scheduler parameters to their defaults change behaviour (ids key the engine's
  draws, floats change every curve), so they are candidates like any other and only make
  the repro easier to read.

Fuzzing draws scenarios from :func:`tracediff.models.specdec.scenario.strategies.scenarios`
and aims at the rules: :func:`fuzz_targets` drives the observed reference
(:class:`tracediff.models.specdec.sched.decided.DecidingReference`) and reports how often
each rule clause decided, which the core turns into Hypothesis ``target()`` scores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tracediff.model import Shrinking, ShrinkPass
from tracediff.models.specdec.scenario.model import (
    MAX_DRAFT,
    EngineTruth,
    RequestSpec,
    Scenario,
    SchedulerParams,
)

ALLOCATION_RANK = {"host": 0, "device": 1, "mixed": 2}
SMALL_REQUESTS = 4  # the repro size aimed for: small generated scenarios have 1..4 requests
SMALL_SEEDS = 64  # small scenarios drawn per pass at most
SMALL_SHARE = 0.25  # of the evaluation budget, at most, per pass of small scenarios


# -- the order ---------------------------------------------------------------------------------
def digits(value: float) -> int:
    """How many decimals a float needs when written shortest: 0.75 -> 2, 1.0 -> 0."""
    text = repr(float(value))
    if "e" in text or "inf" in text or "nan" in text:
        return 17
    fraction = text.partition(".")[2].rstrip("0")
    return len(fraction)


def feature_count(scenario: Scenario) -> int:
    """Features switched on: per request, and scheduler-wide (see ``size_key``)."""
    count = 0
    for r in scenario.requests:
        count += r.grammar + r.host_stop + r.fixed + (r.stop_at >= 0) + (r.proposer == "copy")
    p = scenario.params
    count += p.ragged + ALLOCATION_RANK.get(p.allocation, 3) + p.queue_depth + len(p.eager_shapes)
    defaults = SchedulerParams()
    skip = {"allocation", "ragged", "queue_depth", "eager_shapes"}
    for f in dataclasses.fields(SchedulerParams):
        if f.name not in skip and getattr(p, f.name) != getattr(defaults, f.name):
            count += 1
    truth_defaults = EngineTruth()
    for f in dataclasses.fields(EngineTruth):
        if getattr(scenario.truth, f.name) != getattr(truth_defaults, f.name):
            count += 1
    return count


def size_key(scenario: Scenario, plans: int) -> tuple[int, ...]:
    """The shrink order: a candidate is accepted only if its key is smaller."""
    requests = scenario.requests
    ids = sorted(r.id for r in requests)
    return (
        len(requests),
        plans,
        feature_count(scenario),
        sum(r.max_new for r in requests),
        sum(r.prompt_len for r in requests),
        sum(r.arrival_us for r in requests),
        sum(max(r.stop_at, 0) + max(r.fixed_width, 0) + max(r.grammar_cap, 0) for r in requests),
        sum(digits(r.accept_base) + digits(r.accept_decay) for r in requests),
        sum(abs(i - n) for n, i in enumerate(ids)),
        sum(1 for a, b in zip(requests, requests[1:], strict=False) if a.id > b.id),
    )


# -- helpers of the passes ---------------------------------------------------------------------
def with_requests(shrinking: Shrinking, requests: Iterable[RequestSpec]) -> Scenario:
    """The best scenario with other requests."""
    best: Scenario = dataclasses.replace(shrinking.best, requests=tuple(requests))
    return best


def replace_request(shrinking: Shrinking, index: int, **changes: Any) -> bool:
    requests = list(shrinking.best.requests)
    if index >= len(requests):
        return False
    requests[index] = dataclasses.replace(requests[index], **changes)
    return shrinking.consider(with_requests(shrinking, requests))


def _by_arrival(requests: Iterable[RequestSpec]) -> list[RequestSpec]:
    return sorted(requests, key=lambda r: (r.arrival_us, r.id))


# -- passes ------------------------------------------------------------------------------------
def keep_earliest(s: Shrinking) -> None:
    """Keep the k earliest arrivals, for the smallest k found by growing then bisecting.

    When k requests alone do not fail, k requests with the verification budget scaled
    down in proportion are tried too: a divergence that needs a binding budget (many
    lanes competing for few verified tokens) then survives with few lanes.
    """
    base = s.best
    ordered = _by_arrival(base.requests)
    total = len(ordered)
    budget = base.params.verify_budget

    def works(k: int) -> bool:
        kept = {r.id for r in ordered[:k]}
        fewer = dataclasses.replace(base, requests=tuple(r for r in base.requests if r.id in kept))
        if s.holds(fewer):
            return True
        scaled = max(k, -(-budget * k // total))
        if scaled >= budget:
            return False
        params = dataclasses.replace(base.params, verify_budget=scaled)
        return s.holds(dataclasses.replace(fewer, params=params))

    low, high = 0, 1  # low: known not to work (no request, no divergence)
    while high < total and not works(high):
        low, high = high, min(total, high * 2)
    if high >= total:
        return
    while high - low > 1:
        middle = (low + high) // 2
        if works(middle):
            high = middle
        else:
            low = middle


def _seeded(base: Scenario) -> random.Random:
    """The escapes' draws: a ``random.Random`` seeded with the best's canonical bytes, so
    the same best gives the same tries on any machine."""
    text = json.dumps(base.to_dict(), sort_keys=True).encode()
    return random.Random(int.from_bytes(hashlib.sha256(text).digest()[:8], "big"))


def _limit(s: Shrinking, tries: int, share: float) -> int:
    """The attempt count at which an escape stops: ``share`` of the evaluations left, at
    least one and at most ``tries``."""
    return s.attempts + min(tries, max(1, int((s.budget - s.attempts) * share)))


AROUND_SHARE = 0.2  # of the evaluations left, per escape, for the scenarios around the best
AROUND_TRIES = 300  # ... and at most this many


def around_the_best(s: Shrinking) -> None:
    """Smaller scenarios made from the best's own requests, mutated: 1 to SMALL_REQUESTS of
    them in half the tries, more (but fewer than the best) in the others, each kept or
    changed in the ways a signature most often hangs on (arrival with another kept request
    or at 0, length halved or doubled, prompt 1, its lane's features off), under the best's
    parameters with the verification budget as it is or scaled to the requests kept. A
    fuzz aimed at the signature: every draw comes from a ``random.Random`` seeded with the
    best's bytes, so the same best gives the same tries."""
    base = s.best
    requests = list(base.requests)
    if len(requests) <= SMALL_REQUESTS:
        return
    rng = _seeded(base)
    limit = _limit(s, AROUND_TRIES, AROUND_SHARE)
    budget = base.params.verify_budget
    for _ in range(AROUND_TRIES * 4):
        if s.attempts >= limit or len(s.best.requests) < len(requests):
            return
        # half the tries at most SMALL_REQUESTS, half between that and the best's size
        small = rng.random() < 0.5 or len(requests) - 1 <= SMALL_REQUESTS
        k = (
            rng.randint(1, SMALL_REQUESTS)
            if small
            else rng.randint(SMALL_REQUESTS + 1, len(requests) - 1)
        )
        kept = sorted(rng.sample(range(len(requests)), k))
        chosen = [requests[i] for i in kept]
        arrivals = [r.arrival_us for r in chosen] + [0]
        mutated = []
        for r in chosen:
            changes: dict[str, Any] = {}
            if rng.random() < 0.3:
                changes["arrival_us"] = rng.choice(arrivals)
            if rng.random() < 0.3:
                changes["max_new"] = max(1, rng.choice((r.max_new // 2, r.max_new * 2)))
            if rng.random() < 0.2:
                changes["prompt_len"] = 1
            if rng.random() < 0.2:
                changes.update(rng.choice(list(FEATURES_OFF.values())))
            updated = dataclasses.replace(r, **changes)
            if updated.stop_at > updated.max_new:
                updated = dataclasses.replace(updated, stop_at=updated.max_new)
            mutated.append(updated)
        params = base.params
        if rng.random() < 0.5:
            scaled = max(k, -(-budget * k // len(requests)))
            params = dataclasses.replace(params, verify_budget=min(budget, scaled))
        s.consider(dataclasses.replace(base, params=params, requests=tuple(mutated)))


PADDING_SHARE = 0.2  # of the evaluations left, per escape, for the same padding
PADDING_TRIES = 300  # ... and at most this many


def _padding_variants(base: Scenario) -> list[SchedulerParams]:
    """The best's parameters with the batch buckets below the one its requests pad to taken
    out: first those from SMALL_REQUESTS up, then those from 2 up, then all of them."""
    buckets = base.params.batch_buckets
    padded = next((b for b in buckets if b >= len(base.requests)), buckets[-1])
    variants: list[SchedulerParams] = []
    for low in (SMALL_REQUESTS, 2, 1):
        kept = tuple(b for b in buckets if not low <= b < padded)
        params = dataclasses.replace(base.params, batch_buckets=kept)
        if kept != buckets and params not in variants:
            variants.append(params)
    return variants


def same_padding_fewer_lanes(s: Shrinking) -> None:
    """At most SMALL_REQUESTS of the best's requests, with the batch buckets below the one
    its requests pad to taken out (first those from SMALL_REQUESTS up, then those from 2
    up, then all of them), so that fewer lanes run in the same padded shapes. A repro often
    keeps a request only for the padding its lane adds: five lanes pad to the 8-lane
    bucket, whose durations differ from the 4-lane one's, and a value tie between shapes
    (or a ranking's cut) needs exactly those durations. Deleting the request loses the
    padding and dropping a bucket alone is no smaller, so only the compound step reaches
    it (WidthBeforeDuration from quick:101: 8 requests -> 4). With every lower bucket out,
    one lane pads like two: a round that differs only by one lane more (a request a stale
    budget keeps eligible) then has the same shape on both sides (StaleAdvance from
    quick:101: 6 requests -> 2). Combinations of more requests first, each under every
    bucket set; sampled, seeded from the best, past the share."""
    import itertools
    import math

    base = s.best
    requests = list(base.requests)
    if len(requests) <= SMALL_REQUESTS:
        return
    variants = _padding_variants(base)
    if not variants:
        return
    rng = _seeded(base)
    limit = _limit(s, PADDING_TRIES, PADDING_SHARE)
    for k in range(SMALL_REQUESTS, 0, -1):
        every = math.comb(len(requests), k) * len(variants)
        if every <= limit - s.attempts:
            chosen: Iterable[tuple[int, ...]] = itertools.combinations(range(len(requests)), k)
        else:
            chosen = (
                tuple(sorted(rng.sample(range(len(requests)), k)))
                for _ in range(max(0, limit - s.attempts))
            )
        for kept_ids in chosen:
            for params in variants:
                if s.attempts >= limit or len(s.best.requests) < len(requests):
                    return
                subset = tuple(requests[i] for i in kept_ids)
                s.consider(dataclasses.replace(base, params=params, requests=subset))


ELSEWHERE_SHARE = 0.2  # of the evaluations left, per escape, for the lanes elsewhere
ELSEWHERE_TRIES = 300  # ... and at most this many


def _numeric_params() -> tuple[str, ...]:
    defaults = SchedulerParams()
    return tuple(
        f.name
        for f in dataclasses.fields(SchedulerParams)
        if type(getattr(defaults, f.name)) in (int, float) and f.name != "queue_depth"
    )


def _nearby(name: str, value: float) -> list[float]:
    """Values a parameter is moved to: its default, a half and a quarter, twice and four
    times (a fraction stays at most 1)."""
    default = getattr(SchedulerParams(), name)
    if isinstance(value, int) and not isinstance(value, bool):
        moved: set[float] = {default, value // 2, value // 4, value * 2, value * 4}
    else:
        up = [value * 2, value * 4] if value > 1 else [min(1.0, value * 2)]
        moved = {default, value / 2, value / 4, *up}
    moved.discard(value)
    return sorted(moved)


def lanes_elsewhere(s: Shrinking) -> None:
    """At most SMALL_REQUESTS of the best's requests that run as lanes (``max_new`` above
    1; a request that only prefills shapes the timeline, not a decision), under parameters
    moved from the best's: one to four of its numbers to their default, half, quarter,
    double or quadruple, arrivals sometimes moved too. The requests that only prefill are
    often in a repro for the rounds their prefill rows shape; other prefill costs, chunk
    sizes or probe rates shape them too, with no request for it (the slot tie-break from
    quick:17: 7 requests, three of them prefill only). Deleting them and moving a parameter
    is a compound step no pass makes; every draw comes from a ``random.Random`` seeded
    with the best's bytes."""
    base = s.best
    requests = list(base.requests)
    if len(requests) <= SMALL_REQUESTS:
        return
    lanes = [r for r in requests if r.max_new > 1] or requests
    names = _numeric_params()
    rng = _seeded(base)
    limit = _limit(s, ELSEWHERE_TRIES, ELSEWHERE_SHARE)
    for _ in range(ELSEWHERE_TRIES * 4):
        if s.attempts >= limit or len(s.best.requests) < len(requests):
            return
        most = min(len(lanes), SMALL_REQUESTS)
        k = most if rng.random() < 0.5 else rng.randint(1, most)
        kept = sorted(rng.sample(range(len(lanes)), k))
        chosen = []
        for i in kept:
            r = lanes[i]
            if rng.random() < 0.2:
                arrival = rng.choice((0, r.arrival_us // 2, r.arrival_us * 2))
                r = dataclasses.replace(r, arrival_us=arrival)
            chosen.append(r)
        params = base.params
        for name in rng.sample(names, rng.randint(1, 4)):
            value = rng.choice(_nearby(name, getattr(params, name)))
            params = dataclasses.replace(params, **{name: type(getattr(params, name))(value)})
        s.consider(dataclasses.replace(base, params=params, requests=tuple(chosen)))


IN_STEP_SHARE = 0.25  # of the evaluations left, per escape, for the lanes in step
IN_STEP_TRIES = 400  # ... and at most this many
IN_STEP_ROUNDS = (2, 3, 4)  # lengths of this many full rounds (one round ends in flight)
IN_STEP_LANE_COST = (1, 2, 4)  # the per-lane cost as it is, doubled, quadrupled


def lanes_in_step(s: Shrinking) -> None:
    """Two to SMALL_REQUESTS of the best's lanes made to run in step: all arriving at 0,
    every draft accepted, and one length for all, a whole number of full rounds
    (``MAX_DRAFT + 1`` tokens each), under the best's batch buckets or a same-padding set
    of them, with the per-lane cost as it is, doubled or quadrupled. A bug at an exact
    boundary of a request's budget (a pending advance that forgets a round in flight)
    needs the boundary to fall exactly where a round ends: in the best, a particular
    timeline of many requests puts it there; lanes that advance by whole rounds and end
    together put it there in every round. Deleting the other requests alone loses the
    timeline and changing a length alone is no smaller, so only this compound step
    reaches such repros (StaleAdvance from quick:63: 9 requests -> at most 4). The
    per-lane cost moves because fewer lanes make another cohort the cheapest, and the cut
    between the lanes taken and those left is where a stale request displaces another;
    every draw comes from a ``random.Random`` seeded with the best's bytes."""
    base = s.best
    requests = list(base.requests)
    lanes = [r for r in requests if r.max_new > 1]
    if len(requests) <= SMALL_REQUESTS or len(lanes) < 2:
        return
    variants = [base.params, *_padding_variants(base)]
    rng = _seeded(base)
    limit = _limit(s, IN_STEP_TRIES, IN_STEP_SHARE)
    for _ in range(IN_STEP_TRIES * 4):
        if s.attempts >= limit or len(s.best.requests) < len(requests):
            return
        k = rng.randint(2, min(len(lanes), SMALL_REQUESTS))
        kept = sorted(rng.sample(range(len(lanes)), k))
        length = (MAX_DRAFT + 1) * rng.choice(IN_STEP_ROUNDS)
        chosen = tuple(
            dataclasses.replace(
                lanes[i],
                arrival_us=0,
                max_new=length,
                stop_at=-1,
                accept_base=1.0,
                accept_decay=1.0,
            )
            for i in kept
        )
        params = rng.choice(variants)
        cost = params.lane_us * rng.choice(IN_STEP_LANE_COST)
        params = dataclasses.replace(params, lane_us=cost)
        s.consider(dataclasses.replace(base, params=params, requests=chosen))


def try_small_generated(s: Shrinking) -> None:
    """Fresh small scenarios (1 to SMALL_REQUESTS requests) with the same scheduler
    parameters, drawn by the seeded generator: some bugs need a particular combination
    of requests that no deletion from a large scenario reaches, and a search among
    small ones finds it quickly (as ``fuzz`` does). Bounded by a share of the
    evaluation budget, and skipped once the best has few requests."""
    if len(s.best.requests) <= SMALL_REQUESTS:
        return
    from tracediff.models.specdec.scenario.generator import generate
    from tracediff.models.specdec.scenario.profiles import GRAPHS, Matrix, Profile

    base = s.best
    params = base.params
    matrix = Matrix(
        requests=tuple(range(1, SMALL_REQUESTS + 1)),
        allocation=(params.allocation,),
        graphs=(GRAPHS[1] if params.ragged else GRAPHS[0],),
        queue_depth=(params.queue_depth,),
    )
    profile = Profile(name=base.profile, matrix=matrix)
    share = s.attempts + max(1, int(s.budget * SMALL_SHARE))
    for seed in range(SMALL_SEEDS):
        if s.attempts >= share or len(s.best.requests) <= SMALL_REQUESTS:
            return
        drawn = generate(profile, base.seed * SMALL_SEEDS + seed)
        small = dataclasses.replace(base, requests=drawn.requests)
        if s.consider(small):
            continue
        # as in keep_earliest: the same pressure on fewer lanes, by a scaled budget
        total, kept = len(base.requests), len(drawn.requests)
        scaled = max(kept, -(-params.verify_budget * kept // total))
        if scaled < params.verify_budget:
            budget = dataclasses.replace(params, verify_budget=scaled)
            s.consider(dataclasses.replace(small, params=budget))


def merge_while_many(s: Shrinking) -> None:
    """Merging early, while more than SMALL_REQUESTS remain: the repro size matters
    most; below it, merging waits until the numbers are small and runs are cheap."""
    if len(s.best.requests) > SMALL_REQUESTS:
        merge_requests(s)


def merge_requests(s: Shrinking) -> None:
    """Two neighbours (by arrival) into one: the earlier takes both budgets. One request
    fewer whose load is the same, where deleting either loses the pressure."""
    index = 0
    while index + 1 < len(s.best.requests):
        ordered = _by_arrival(s.best.requests)
        first, second = ordered[index], ordered[index + 1]
        merged = dataclasses.replace(
            first,
            max_new=first.max_new + second.max_new,
            stop_at=-1 if first.stop_at < 0 else first.stop_at,
        )
        requests = [merged if r.id == first.id else r for r in ordered if r.id != second.id]
        if not s.consider(with_requests(s, requests)):
            index += 1


def retime_requests(s: Shrinking) -> None:
    """Arrivals moved together: each request to the arrival of the one before it (a
    burst), which often keeps a divergence while making the timeline short."""
    ordered = _by_arrival(s.best.requests)
    for position in range(1, len(ordered)):
        current = _by_arrival(s.best.requests)
        if position >= len(current):
            return
        earlier, request = current[position - 1], current[position]
        if request.arrival_us == earlier.arrival_us:
            continue
        moved = dataclasses.replace(request, arrival_us=earlier.arrival_us)
        s.consider(with_requests(s, (moved if r.id == request.id else r for r in current)))


def close_gaps(s: Shrinking) -> None:
    """Each gap between consecutive arrivals closed: every later request moves earlier by
    the gap (their order and spacing kept), first all gaps at once, then one at a time
    from the first; a shorter timeline with the same sequence of events."""
    ordered = _by_arrival(s.best.requests)
    if len(ordered) < 2:
        return
    first = ordered[0].arrival_us
    bursts = [dataclasses.replace(r, arrival_us=first) for r in ordered]
    if bursts != ordered:
        s.consider(with_requests(s, bursts))
    position = 1
    while position < len(s.best.requests):
        current = _by_arrival(s.best.requests)
        gap = current[position].arrival_us - current[position - 1].arrival_us
        if gap > 0:
            moved = [
                dataclasses.replace(r, arrival_us=r.arrival_us - gap) if n >= position else r
                for n, r in enumerate(current)
            ]
            s.consider(with_requests(s, moved))
        position += 1


def defaults_at_once(s: Shrinking) -> None:
    """The whole configuration normalised at once: the engine's truth to its defaults, the
    scheduler's parameters to their defaults (keeping, then dropping, the matrix cell:
    allocation, graphs, queue depth), and every request's unneeded fields off. A bug that
    needs none of them loses them all for one run, before the field-by-field passes."""
    base = s.best
    if base.truth != EngineTruth():
        s.consider(dataclasses.replace(base, truth=EngineTruth()))
    p = s.best.params
    cell = {"allocation": p.allocation, "ragged": p.ragged, "queue_depth": p.queue_depth}
    for params in (SchedulerParams(), SchedulerParams(**cell)):
        if params != s.best.params:
            s.consider(dataclasses.replace(s.best, params=params))
    keep_budget = dataclasses.replace(SchedulerParams(**cell), verify_budget=p.verify_budget)
    if keep_budget != s.best.params:
        s.consider(dataclasses.replace(s.best, params=keep_budget))
    plain = RequestSpec(id=0, arrival_us=0, prompt_len=1, max_new=1)
    accept = {"accept_base": plain.accept_base, "accept_decay": plain.accept_decay}
    _change_all(s, accept)


def delete_requests(s: Shrinking) -> None:
    """Adaptive deletion: from the end, delete the longest run ending at each request."""
    s.delete_runs(lambda scenario: scenario.requests, lambda kept: with_requests(s, kept))


FEATURES_OFF: Mapping[str, Mapping[str, Any]] = {
    "grammar": {"grammar_cap": -1},
    "host_stop": {"host_stop": False},
    "fixed": {"fixed_width": -1},
    "stop": {"stop_at": -1},
    "copy": {"proposer": "mtp"},
}


def switch_features_off(s: Shrinking) -> None:
    """Every feature off for all requests at once, then per feature, then per request."""
    everything: dict[str, Any] = {}
    for change in FEATURES_OFF.values():
        everything.update(change)
    _change_all(s, everything)
    for change in FEATURES_OFF.values():
        _change_all(s, change)
    for index in range(len(s.best.requests)):
        for change in FEATURES_OFF.values():
            request = s.best.requests[index] if index < len(s.best.requests) else None
            if request is not None and any(getattr(request, k) != v for k, v in change.items()):
                replace_request(s, index, **change)


def _change_all(s: Shrinking, change: Mapping[str, Any]) -> bool:
    requests = [dataclasses.replace(r, **change) for r in s.best.requests]
    if requests == list(s.best.requests):
        return False
    return s.consider(with_requests(s, requests))


def simplify_params(s: Shrinking) -> None:
    """Rect graphs, host allocation, shallower queues, defaults for everything else."""
    tries: list[dict[str, Any]] = [
        {"ragged": False},
        {"allocation": "host"},
        {"allocation": "device"},
        {"queue_depth": 0},
        {"queue_depth": 1},
        {"eager_shapes": ()},
    ]
    defaults = SchedulerParams()
    for f in dataclasses.fields(SchedulerParams):
        if f.name not in ("allocation", "ragged", "queue_depth", "eager_shapes"):
            tries.append({f.name: getattr(defaults, f.name)})
    for change in tries:
        current = s.best.params
        if all(getattr(current, k) == v for k, v in change.items()):
            continue
        if ALLOCATION_RANK.get(change.get("allocation", ""), -1) > ALLOCATION_RANK.get(
            current.allocation, 3
        ):
            continue
        s.consider(dataclasses.replace(s.best, params=dataclasses.replace(current, **change)))
    if s.best.params.eager_shapes:
        # adaptive deletion over the eager shapes, from the end (as for requests)
        s.delete_runs(
            lambda scenario: scenario.params.eager_shapes,
            lambda shapes: dataclasses.replace(
                s.best, params=dataclasses.replace(s.best.params, eager_shapes=shapes)
            ),
        )
    truth_defaults = EngineTruth()
    for f in dataclasses.fields(EngineTruth):
        value = getattr(truth_defaults, f.name)
        if getattr(s.best.truth, f.name) != value:
            truth = dataclasses.replace(s.best.truth, **{f.name: value})
            s.consider(dataclasses.replace(s.best, truth=truth))


def halve_numbers(s: Shrinking) -> None:
    """Coarse steps over all requests at once: arrivals to 0, lengths halved."""
    _change_each(s, lambda r: {"arrival_us": 0})
    for _ in range(12):
        if not _change_each(s, lambda r: {"max_new": max(1, r.max_new // 2)}):
            break
    for _ in range(12):
        if not _change_each(s, lambda r: {"prompt_len": max(1, r.prompt_len // 2)}):
            break
    _change_each(s, lambda r: {"prompt_len": 1})


def _change_each(s: Shrinking, change: Callable[[RequestSpec], dict[str, Any]]) -> bool:
    requests = []
    for r in s.best.requests:
        updated = dataclasses.replace(r, **change(r))
        if updated.stop_at > updated.max_new:
            updated = dataclasses.replace(updated, stop_at=updated.max_new)
        requests.append(updated)
    if requests == list(s.best.requests):
        return False
    return s.consider(with_requests(s, requests))


NUMBERS = (
    ("max_new", 1),
    ("prompt_len", 1),
    ("arrival_us", 0),
    ("stop_at", 1),
    ("fixed_width", 0),
    ("grammar_cap", 0),
)


def minimize_numbers(s: Shrinking) -> None:
    """Each request's integers, one at a time, towards their lower bounds."""
    for index in range(len(s.best.requests)):
        for name, lower in NUMBERS:
            if index >= len(s.best.requests):
                return
            value = getattr(s.best.requests[index], name)
            if value < lower:
                continue  # -1: the feature is off

            def works(candidate: int, index: int = index, name: str = name) -> bool:
                changes: dict[str, Any] = {name: candidate}
                request = dataclasses.replace(s.best.requests[index], **changes)
                requests = list(s.best.requests)
                requests[index] = request
                return s.holds(with_requests(s, requests))

            s.minimize(value, lower, works)


def round_floats(s: Shrinking) -> None:
    """Acceptance parameters rounded to fewer digits."""
    for index in range(len(s.best.requests)):
        for name in ("accept_base", "accept_decay"):
            if index >= len(s.best.requests):
                return
            value = float(getattr(s.best.requests[index], name))
            for places in range(min(digits(value), 3) - 1, -1, -1):
                rounded = round(value, places)
                if rounded != value and replace_request(s, index, **{name: rounded}):
                    break
                value = float(getattr(s.best.requests[index], name))


def canonical_ids(s: Shrinking) -> None:
    """Requests in id order, then ids 0..n-1 (ids key the engine's draws: a candidate)."""
    ordered = sorted(s.best.requests, key=lambda r: r.id)
    if ordered != list(s.best.requests):
        s.consider(with_requests(s, ordered))
    renumbered = [dataclasses.replace(r, id=n) for n, r in enumerate(s.best.requests)]
    if renumbered != list(s.best.requests):
        s.consider(with_requests(s, renumbered))


PASSES: tuple[ShrinkPass, ...] = (
    ("keep earliest requests", keep_earliest),
    ("delete requests", delete_requests),
    ("merge requests", merge_while_many),
    ("switch features off", switch_features_off),
    ("defaults at once", defaults_at_once),
    ("simplify scheduler", simplify_params),
    ("halve numbers", halve_numbers),
    ("minimise numbers", minimize_numbers),
    # after the numbers: each candidate is then cheap (few plans), and a merge is
    # followed by the whole round of passes again
    ("merge requests", merge_requests),
    ("re-time requests", retime_requests),
    ("close arrival gaps", close_gaps),
    ("round floats", round_floats),
    ("canonical ids", canonical_ids),
    # not in every round: only when a whole round stalls above SMALL_REQUESTS (the core's
    # escape, after its combinations of at most 4 requests)
    ("escape: same padding, fewer lanes", same_padding_fewer_lanes),
    ("escape: lanes elsewhere", lanes_elsewhere),
    ("escape: small generated scenarios", try_small_generated),
    ("escape: around the best", around_the_best),
    # after the fuzzed scenarios: aimed at one kind of bug (exact budget ends), it runs
    # only when every other search found nothing, so it never changes a path they take
    ("last escape: lanes in step", lanes_in_step),
)


# -- fuzzing -----------------------------------------------------------------------------------
def fuzz_strategy(max_size: int) -> Any:
    """Hypothesis' strategy of small valid scenarios, at most ``max_size`` requests."""
    from tracediff.models.specdec.scenario.strategies import scenarios

    return scenarios(max_requests=max_size)


def fuzz_targets(scenario: Scenario) -> dict[str, int]:
    """Per rule clause, the plans (or completions) in which it decided when ``scenario``
    runs through the observed reference; empty when the reference refuses the scenario."""
    from tracediff.errors import TracediffError
    from tracediff.models.specdec.engine.driver import drive
    from tracediff.models.specdec.sched.decided import DecidingReference

    observed = DecidingReference(scenario)
    try:
        for _record in drive(scenario, observed):
            pass
    except TracediffError:
        return {}
    return observed.decided
