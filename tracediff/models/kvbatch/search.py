"""kvbatch search: hand-written shrink passes and the shrink order (the draws of its
generator give the rest: tracediff.search.draws)."""

from __future__ import annotations

import dataclasses

from tracediff.model import Shrinking, ShrinkPass
from tracediff.models.kvbatch.scenario import KVScenario, blocks_for
from tracediff.search.passes import delete_items, lower_each, lower_field, replace_item


def size_key(scenario: KVScenario, plans: int) -> tuple[int, ...]:
    reqs = scenario.requests
    return (
        len(reqs),
        plans,
        sum(r.prompt for r in reqs),
        sum(r.output for r in reqs),
        sum(len(r.prefix) for r in reqs),
        sum(r.arrival for r in reqs),
        scenario.num_blocks + scenario.token_budget + scenario.max_running,
        scenario.step_per_token,
        sum(1 for r in reqs if r.priority != 1),
        sum(abs(r.id - n) for n, r in enumerate(reqs)),
    )


def _prompt(s: KVScenario, i: int, v: int) -> KVScenario:
    prefix = s.requests[i].prefix[: v // s.block_size]
    return replace_item(s, i, prompt=v, prefix=prefix)


def _prefix(s: KVScenario, i: int, v: int) -> KVScenario:
    return replace_item(s, i, prefix=s.requests[i].prefix[:v])


def _fewest_blocks(s: KVScenario) -> int:
    return max((blocks_for(r.prompt + r.output, s.block_size) for r in s.requests), default=1)


def _close_gaps(shrink: Shrinking) -> None:
    """Each gap between consecutive arrivals closed: the later requests move earlier by it
    (order and spacing kept), every gap at once first, then one at a time."""
    order = sorted(range(len(shrink.best.requests)), key=lambda i: shrink.best.requests[i].arrival)
    if len(order) < 2:
        return
    reqs = shrink.best.requests
    first = reqs[order[0]].arrival
    shrink.consider(
        dataclasses.replace(
            shrink.best, requests=tuple(dataclasses.replace(r, arrival=first) for r in reqs)
        )
    )
    for position in range(1, len(order)):
        reqs = shrink.best.requests
        ranked = sorted(reqs, key=lambda r: r.arrival)
        if position >= len(ranked):
            return
        gap = ranked[position].arrival - ranked[position - 1].arrival
        if gap <= 0:
            continue
        later = {r.id for r in ranked[position:]}
        moved = tuple(
            dataclasses.replace(r, arrival=r.arrival - gap) if r.id in later else r for r in reqs
        )
        shrink.consider(dataclasses.replace(shrink.best, requests=moved))


def _plain_requests(shrink: Shrinking) -> None:
    """Fields a request no longer needs dropped (priority back to 1, all at once), then ids
    renumbered 0..n-1 in their order."""
    reqs = shrink.best.requests
    plain = tuple(dataclasses.replace(r, priority=1) for r in reqs)
    if plain != reqs:
        shrink.consider(dataclasses.replace(shrink.best, requests=plain))
    renumbered = tuple(dataclasses.replace(r, id=n) for n, r in enumerate(shrink.best.requests))
    if renumbered != shrink.best.requests:
        shrink.consider(dataclasses.replace(shrink.best, requests=renumbered))


def _simplest_config(shrink: Shrinking) -> None:
    """The planner's configuration normalised at once: the fewest blocks every request
    fits in, a budget and a running limit of 1, a fixed step time."""
    best = shrink.best
    shrink.consider(
        dataclasses.replace(
            best, num_blocks=_fewest_blocks(best), token_budget=1, max_running=1, step_per_token=0
        )
    )


PASSES: tuple[ShrinkPass, ...] = (
    ("delete requests", delete_items()),
    ("shorten outputs", lower_each("output", 1)),
    ("shorten prompts", lower_each("prompt", 1, _prompt)),
    ("drop prefix hashes", lower_each(lambda r: len(r.prefix), 0, _prefix)),
    ("earlier arrivals", lower_each("arrival", 0)),
    ("fewer blocks", lower_field("num_blocks", _fewest_blocks)),
    ("smaller token budget", lower_field("token_budget", lambda s: 1)),
    ("fewer running", lower_field("max_running", lambda s: 1)),
    ("fixed step time", lower_field("step_per_token", lambda s: 0)),
    ("simplest configuration", _simplest_config),
    ("close arrival gaps", _close_gaps),
    ("plain requests", _plain_requests),
)
