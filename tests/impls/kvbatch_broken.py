"""Broken kvbatch planners: the classic optimisation bugs of a paged-KV batch scheduler,
each one small change to tracediff.models.kvbatch.optimized.Optimized (tests/test_kvbatch.py
requires every one to be caught on quick, as a divergence)."""

from __future__ import annotations

import heapq
from typing import Any

from tracediff.models.kvbatch.optimized import Optimized
from tracediff.models.kvbatch.reference import Req


class EvictedStillFree(Optimized):
    """An eviction takes a cached block but the free counter is not decremented for it."""

    def allocate(self, evict: list[list[int]]) -> int:
        before = len(evict)
        block = super().allocate(evict)
        if len(evict) > before:
            self.free += 1
        return block


class HitIgnoresRefcount(Optimized):
    """A prefix hit sets the block's reference count to 1 instead of adding one: a block
    shared by two requests is freed when the first lets it go."""

    def take(self, hits: list[int]) -> None:
        for b in hits:
            if self.ref[b] == 0:
                self.free -= 1
            self.ref[b] = 1


class PreemptOldestFirst(Optimized):
    """Preemption order reversed: the oldest request behind the current one goes first."""

    def victim(self, running: list[Req], current: int) -> Req:
        if len(running) > current + 1:
            return running.pop(current + 1)
        return running.pop()


class ChunkOffByOne(Optimized):
    """A chunk cut at the budget is one token short (``budget - 1``)."""

    def chunk(self, remaining: int, budget: int) -> int:
        if remaining > budget > 1:
            return budget - 1
        return min(remaining, budget)


class HitRepeatLeavesFreeTwice(Optimized):
    """A prefix hit takes each hit block out of the free count, a block hit twice (a prompt
    that repeats a hash, ``[1, 2, 1]``) twice: the shipped optimized planner's bug until
    round 4 of the reliability issue."""

    def take(self, hits: list[int]) -> None:
        for b in hits:
            if self.ref[b] == 0:
                self.free -= hits.count(b)
            self.ref[b] += 1


class OrdersById(Optimized):
    """The waiting queue ordered by (priority, id): right whenever ids follow arrival order,
    wrong as soon as a later arrival has a lower id (a fuzz strategy that numbers requests
    in arrival order can never show it)."""

    def arrive(
        self, rid: int, arrival: int, prompt: int, output: int, priority: int, prefix: Any,
        now: int,
    ) -> None:  # fmt: skip
        super().arrive(rid, arrival, prompt, output, priority, prefix, now)
        self.waiting.remove(self.reqs[rid].key)
        heapq.heapify(self.waiting)
        heapq.heappush(self.waiting, (priority, rid, rid))
