"""kvbatch search: hand-written shrink passes and the shrink order (the draws of its
generator give the rest: tracediff.search.draws)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tracediff.model import Shrinking, ShrinkPass
from tracediff.models.kvbatch.scenario import KVScenario, blocks_for


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


def _with(scenario: KVScenario, index: int, **changes: Any) -> KVScenario:
    reqs = list(scenario.requests)
    reqs[index] = dataclasses.replace(reqs[index], **changes)
    return dataclasses.replace(scenario, requests=tuple(reqs))


def _delete_requests(shrink: Shrinking) -> None:
    shrink.delete_runs(
        lambda s: s.requests, lambda reqs: dataclasses.replace(shrink.best, requests=reqs)
    )


def _holds(
    shrink: Shrinking, index: int, build: Callable[[KVScenario, int, int], KVScenario]
) -> Callable[[int], bool]:
    def works(value: int) -> bool:
        return shrink.holds(build(shrink.best, index, value))

    return works


def _per_request(
    field: str, lower: int, build: Callable[[KVScenario, int, int], KVScenario]
) -> Callable[[Shrinking], None]:
    def run(shrink: Shrinking) -> None:
        for index in range(len(shrink.best.requests)):
            if index >= len(shrink.best.requests):
                return
            value = getattr(shrink.best.requests[index], field)
            if value > lower:
                shrink.minimize(value, lower, _holds(shrink, index, build))

    return run


def _prompt(s: KVScenario, i: int, v: int) -> KVScenario:
    prefix = s.requests[i].prefix[: v // s.block_size]
    return _with(s, i, prompt=v, prefix=prefix)


def _output(s: KVScenario, i: int, v: int) -> KVScenario:
    return _with(s, i, output=v)


def _prefix(s: KVScenario, i: int, v: int) -> KVScenario:
    return _with(s, i, prefix=s.requests[i].prefix[:v])


def _arrival(s: KVScenario, i: int, v: int) -> KVScenario:
    return _with(s, i, arrival=v)


def _drop_prefix_hashes(shrink: Shrinking) -> None:
    for index in range(len(shrink.best.requests)):
        if index >= len(shrink.best.requests):
            return
        length = len(shrink.best.requests[index].prefix)
        if length:
            shrink.minimize(length, 0, _holds(shrink, index, _prefix))


def _param(field: str, lower: Callable[[KVScenario], int]) -> Callable[[Shrinking], None]:
    """Shrink a planner parameter towards ``lower(scenario)``."""

    def run(shrink: Shrinking) -> None:
        value = getattr(shrink.best, field)
        least = lower(shrink.best)
        if value > least:

            def works(v: int) -> bool:
                return shrink.holds(dataclasses.replace(shrink.best, **{field: v}))

            shrink.minimize(value, least, works)

    return run


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
    ("delete requests", _delete_requests),
    ("shorten outputs", _per_request("output", 1, _output)),
    ("shorten prompts", _per_request("prompt", 1, _prompt)),
    ("drop prefix hashes", _drop_prefix_hashes),
    ("earlier arrivals", _per_request("arrival", 0, _arrival)),
    ("fewer blocks", _param("num_blocks", _fewest_blocks)),
    ("smaller token budget", _param("token_budget", lambda s: 1)),
    ("fewer running", _param("max_running", lambda s: 1)),
    ("fixed step time", _param("step_per_token", lambda s: 0)),
    ("simplest configuration", _simplest_config),
    ("close arrival gaps", _close_gaps),
    ("plain requests", _plain_requests),
)
