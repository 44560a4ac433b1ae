"""The kvbatch optimized planner: the reference's decisions, computed incrementally.

* the free count is a counter, changed where a block's ``ref`` crosses 0 and where an
  allocation takes a block, never recounted;
* the cache map is a dict from prefix hash to block (no scan of the blocks);
* the waiting queue is a heap keyed by (priority, arrival, id); the empty blocks a heap of
  ids; the evictable cached blocks a heap of (stamp, block) with lazy deletion (an entry is
  live while its block is free, hashed and of that stamp);
* registration walks only the prefix blocks a step filled, from a per-request cursor.

Byte-identical to :class:`~tracediff.models.kvbatch.reference.Reference` (tests/test_kvbatch.py).
"""

from __future__ import annotations

import heapq
from typing import Any

from tracediff.models.kvbatch.reference import Req
from tracediff.models.kvbatch.scenario import KVScenario, plan_record


class Optimized:
    def __init__(self, scenario: KVScenario) -> None:
        self.bs = scenario.block_size
        self.num_blocks = scenario.num_blocks
        self.token_budget = scenario.token_budget
        self.max_running = scenario.max_running
        self.ref = [0] * self.num_blocks
        self.hash: list[int | None] = [None] * self.num_blocks
        self.stamp = [0] * self.num_blocks
        self.cache: dict[int, int] = {}
        self.empty = list(range(self.num_blocks))  # already a heap
        self.lru: list[tuple[int, int]] = []
        self.free = self.num_blocks
        self.reqs: dict[int, Req] = {}
        self.waiting: list[tuple[int, int, int]] = []
        self.running: list[Req] = []
        self.plans = 0

    def arrive(
        self, rid: int, arrival: int, prompt: int, output: int, priority: int, prefix: Any,
        now: int,
    ) -> None:  # fmt: skip
        r = Req(rid, arrival, prompt, output, priority, prefix)
        self.reqs[rid] = r
        heapq.heappush(self.waiting, r.key)

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        bs = self.bs
        budget = self.token_budget
        run: list[list[int]] = []
        admit: list[list[int]] = []
        preempt: list[int] = []
        alloc: list[list[Any]] = []
        evict: list[list[int]] = []
        scheduled: list[tuple[Req, int]] = []
        hits_total = 0
        running = self.running
        i = 0
        while i < len(running) and budget > 0:
            r = running[i]
            n = self.chunk(r.seq - r.done, budget)
            need = -(-(r.done + n) // bs) - len(r.blocks)
            gone = False
            while self.free < need:
                victim = self.victim(running, i)
                self.preempt(victim)
                preempt.append(victim.id)
                if victim is r:
                    gone = True
                    break
            if gone:
                break
            if need > 0:
                new = [self.allocate(evict) for _ in range(need)]
                r.blocks.extend(new)
                alloc.append([r.id, new])
            run.append([r.id, n])
            scheduled.append((r, n))
            budget -= n
            i += 1
        if not preempt:
            waiting = self.waiting
            while waiting and budget > 0 and len(running) < self.max_running:
                w = self.reqs[waiting[0][2]]
                cap = min(len(w.prefix), (w.seq - 1) // bs)
                hits: list[int] = []
                cache = self.cache
                for h in w.prefix[:cap]:
                    b = cache.get(h)
                    if b is None:
                        break
                    hits.append(b)
                k = len(hits)
                n = self.chunk(w.seq - k * bs, budget)
                new_count = -(-(k * bs + n) // bs) - k
                # the spec counts each hit, a block hit twice (a repeated hash) twice
                if self.free - sum(1 for b in hits if self.ref[b] == 0) < new_count:
                    break
                self.take(hits)
                heapq.heappop(waiting)
                w.blocks = hits
                w.done = k * bs
                w.reg = k
                if new_count > 0:
                    new = [self.allocate(evict) for _ in range(new_count)]
                    w.blocks.extend(new)
                    alloc.append([w.id, new])
                running.append(w)
                admit.append([w.id, k, n])
                scheduled.append((w, n))
                hits_total += k
                budget -= n
        finished: list[int] = []
        tokens = 0
        for r, n in scheduled:
            tokens += n
            r.done += n
            self.register(r)
            if r.done == r.seq:
                r.out += 1
                r.seq += 1
                if r.out == r.output:
                    finished.append(r.id)
                    self.release(r)
        if finished:
            self.running = [r for r in running if r.out < r.output]
        return plan_record(self.plans, now, run, admit, preempt, alloc, evict, hits_total,
                           finished, tokens, self.free)  # fmt: skip

    def chunk(self, remaining: int, budget: int) -> int:
        """The tokens a request computes this step."""
        return min(remaining, budget)

    def victim(self, running: list[Req], current: int) -> Req:
        """The request preempted for ``running[current]``: the newest."""
        return running.pop()

    def take(self, hits: list[int]) -> None:
        """An admitted request takes its prefix-hit blocks. A block leaves the free count
        once, when its ``ref`` leaves 0, though a prompt that repeats a hash hits it twice."""
        ref = self.ref
        for b in hits:
            if ref[b] == 0:
                self.free -= 1  # and its LRU entry goes stale
            ref[b] += 1

    def allocate(self, evict: list[list[int]]) -> int:
        if self.empty:
            b = heapq.heappop(self.empty)
        else:
            lru, ref, hashes, stamp = self.lru, self.ref, self.hash, self.stamp
            while True:
                at, b = heapq.heappop(lru)
                if ref[b] == 0 and hashes[b] is not None and stamp[b] == at:
                    break
            h = hashes[b]
            assert h is not None
            evict.append([b, h])
            del self.cache[h]
            hashes[b] = None
        self.ref[b] = 1
        self.free -= 1
        return b

    def release(self, r: Req) -> None:
        ref, hashes = self.ref, self.hash
        for b in r.blocks:
            ref[b] -= 1
            if ref[b] == 0:
                self.free += 1
                self.stamp[b] = self.plans
                if hashes[b] is None:
                    heapq.heappush(self.empty, b)
                else:
                    heapq.heappush(self.lru, (self.plans, b))
        r.blocks = []

    def preempt(self, r: Req) -> None:
        self.release(r)
        r.done = 0
        r.reg = 0
        r.seq = r.prompt + r.out
        heapq.heappush(self.waiting, r.key)

    def register(self, r: Req) -> None:
        last = min(len(r.prefix), r.done // self.bs)
        cache = self.cache
        for i in range(r.reg, last):
            h = r.prefix[i]
            if h not in cache:
                cache[h] = r.blocks[i]
                self.hash[r.blocks[i]] = h
        if last > r.reg:
            r.reg = last

    def state(self) -> dict[str, Any]:
        return {
            "waiting": sorted(key[2] for key in self.waiting),
            "running": [r.id for r in self.running],
            "ref": list(self.ref),
            "hash": [-1 if h is None else h for h in self.hash],
        }


class CheckedOptimized(Optimized):
    """``--check``: the optimized planner, checking after every plan that its incremental
    state agrees with a recount (the free count, the cache map, the heaps' live entries).
    A disagreement is an AssertionError naming what drifted (slower; for debugging)."""

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        free = [b for b in range(self.num_blocks) if self.ref[b] == 0]
        assert self.free == len(free), f"plan {self.plans}: free {self.free} != {len(free)}"
        assert all(r >= 0 for r in self.ref), f"plan {self.plans}: a negative reference count"
        mapped = {h: b for b, h in enumerate(self.hash) if h is not None}
        assert mapped == self.cache, f"plan {self.plans}: the cache map drifted"
        empty = {b for b in free if self.hash[b] is None}
        assert empty == set(self.empty), f"plan {self.plans}: the empty heap drifted"
        live = {b for at, b in self.lru if self.ref[b] == 0 and self.stamp[b] == at}
        cached = {b for b in free if self.hash[b] is not None}
        assert live == cached, f"plan {self.plans}: the LRU heap drifted"
        held = sum(len(r.blocks) for r in self.running)
        assert held >= self.num_blocks - len(free), f"plan {self.plans}: blocks held unowned"
        return record
