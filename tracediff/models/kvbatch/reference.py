"""The kvbatch reference planner: docs/kvbatch.md, written to be read.

It recomputes everything it needs from scratch every time: the free count by counting the
free blocks, the waiting head by sorting, a prefix hit by scanning the blocks for the hash,
the eviction victim by scanning the cached blocks. :meth:`note` is called where a rule clause
decides (the observed twin in coverage.py counts them; here it does nothing).
"""

from __future__ import annotations

from typing import Any

from tracediff.models.kvbatch.scenario import KVScenario, blocks_for, plan_record


class Req:
    """One request's state: docs/kvbatch.md, "State"."""

    __slots__ = ("id", "arrival", "prompt", "output", "priority", "prefix", "seq", "done",
                 "out", "blocks", "reg")  # fmt: skip

    def __init__(
        self, rid: int, arrival: int, prompt: int, output: int, priority: int, prefix: Any
    ) -> None:
        self.id = rid
        self.arrival = arrival
        self.prompt = prompt
        self.output = output
        self.priority = priority
        self.prefix: tuple[int, ...] = tuple(prefix)
        self.seq = prompt
        self.done = 0
        self.out = 0
        self.blocks: list[int] = []
        self.reg = 0  # (optimized) prefix blocks examined for registration

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.priority, self.arrival, self.id)


class Reference:
    """The spec, as written."""

    def __init__(self, scenario: KVScenario) -> None:
        self.bs = scenario.block_size
        self.num_blocks = scenario.num_blocks
        self.token_budget = scenario.token_budget
        self.max_running = scenario.max_running
        self.ref = [0] * self.num_blocks
        self.hash: list[int | None] = [None] * self.num_blocks
        self.stamp = [0] * self.num_blocks
        self.reqs: dict[int, Req] = {}
        self.waiting: list[int] = []
        self.running: list[int] = []
        self.plans = 0

    def note(self, clause: str) -> None:
        """A rule clause decided (counted by the observed twin)."""

    # -- the driver interface
    def arrive(
        self, rid: int, arrival: int, prompt: int, output: int, priority: int, prefix: Any,
        now: int,
    ) -> None:  # fmt: skip
        self.reqs[rid] = Req(rid, arrival, prompt, output, priority, prefix)
        self.waiting.append(rid)

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        budget = self.token_budget
        run: list[list[int]] = []
        admit: list[list[int]] = []
        preempt: list[int] = []
        alloc: list[list[Any]] = []
        evict: list[list[int]] = []
        scheduled: list[tuple[Req, int]] = []
        hits_total = 0
        # 1. running requests, oldest admitted first
        i = 0
        while i < len(self.running) and budget > 0:
            r = self.reqs[self.running[i]]
            n = min(r.seq - r.done, budget)
            self.note("decode" if r.seq - r.done == 1 else "prefill")
            if n < r.seq - r.done:
                self.note("chunk-budget")
            need = blocks_for(r.done + n, self.bs) - len(r.blocks)
            gone = False
            while self.free_count() < need:
                victim = self.reqs[self.running.pop()]
                self.preempt(victim)
                preempt.append(victim.id)
                self.note("preempt-self" if victim is r else "preempt-other")
                if victim is r:
                    gone = True
                    break
            if gone:
                break
            new = [self.allocate(evict) for _ in range(need)]
            r.blocks.extend(new)
            if new:
                alloc.append([r.id, new])
            run.append([r.id, n])
            scheduled.append((r, n))
            budget -= n
            i += 1
        # 2. admission, only when nobody was preempted
        while not preempt and self.waiting and budget > 0:
            if len(self.running) >= self.max_running:
                self.note("max-running")
                break
            order = sorted(self.waiting, key=lambda j: self.reqs[j].key)
            w = self.reqs[order[0]]
            self.note_head(w, [self.reqs[j] for j in order[1:]])
            cap = min(len(w.prefix), (w.seq - 1) // self.bs)
            hits: list[int] = []
            for h in w.prefix[:cap]:
                b = self.cached_block(h)
                if b is None:
                    break
                hits.append(b)
            if len(hits) == cap < len(w.prefix) and self.cached_block(w.prefix[cap]) is not None:
                self.note("hit-cap")
            k = len(hits)
            n = min(w.seq - k * self.bs, budget)
            new_count = blocks_for(k * self.bs + n, self.bs) - k
            if self.free_count() - sum(1 for b in hits if self.ref[b] == 0) < new_count:
                self.note("head-blocks")
                break
            for b in hits:
                self.note("hit-shared" if self.ref[b] > 0 else "hit-revive")
                self.ref[b] += 1
            if k:
                self.note("hit")
            if w.out > 0:
                self.note("recompute")
            w.blocks = list(hits)
            w.done = k * self.bs
            new = [self.allocate(evict) for _ in range(new_count)]
            w.blocks.extend(new)
            if new:
                alloc.append([w.id, new])
            self.waiting.remove(w.id)
            self.running.append(w.id)
            admit.append([w.id, k, n])
            scheduled.append((w, n))
            hits_total += k
            budget -= n
        # 5. the step's effect
        finished: list[int] = []
        for r, n in scheduled:
            before = r.done
            r.done += n
            self.register(r, before)
            if r.done == r.seq:
                r.out += 1
                r.seq += 1
                if r.out == r.output:
                    finished.append(r.id)
                    self.running.remove(r.id)
                    self.release(r)
        tokens = sum(n for _r, n in scheduled)
        return plan_record(self.plans, now, run, admit, preempt, alloc, evict, hits_total,
                           finished, tokens, self.free_count())  # fmt: skip

    def note_head(self, head: Req, behind: list[Req]) -> None:
        if any(r.priority > head.priority and r.arrival < head.arrival for r in behind):
            self.note("priority")
        elif any(r.priority == head.priority for r in behind):
            self.note("fcfs")

    # -- blocks, recomputed from scratch
    def free_count(self) -> int:
        return sum(1 for b in range(self.num_blocks) if self.ref[b] == 0)

    def cached_block(self, h: int) -> int | None:
        for b in range(self.num_blocks):
            if self.hash[b] == h:
                return b
        return None

    def allocate(self, evict: list[list[int]]) -> int:
        empty = [b for b in range(self.num_blocks) if self.ref[b] == 0 and self.hash[b] is None]
        if empty:
            b = min(empty)
        else:
            cached = [b for b in range(self.num_blocks) if self.ref[b] == 0]
            b = min(cached, key=lambda c: (self.stamp[c], c))
            oldest = [c for c in cached if self.stamp[c] == self.stamp[b]]
            if len(oldest) > 1:
                self.note("evict-tie")
            elif len(cached) > 1:
                self.note("evict-lru")
            evicted = self.hash[b]
            assert evicted is not None
            evict.append([b, evicted])
            self.hash[b] = None
        self.ref[b] = 1
        return b

    def release(self, r: Req) -> None:
        for b in r.blocks:
            self.ref[b] -= 1
            if self.ref[b] == 0:
                self.stamp[b] = self.plans
        r.blocks = []

    def preempt(self, r: Req) -> None:
        self.release(r)
        r.done = 0
        r.seq = r.prompt + r.out
        self.waiting.append(r.id)

    def register(self, r: Req, before: int) -> None:
        for i, h in enumerate(r.prefix):
            if before < (i + 1) * self.bs <= r.done:
                if self.cached_block(h) is None:
                    self.hash[r.blocks[i]] = h
                else:
                    self.note("register-dup")

    def state(self) -> dict[str, Any]:
        return {
            "waiting": sorted(self.waiting),
            "running": list(self.running),
            "ref": list(self.ref),
            "hash": [-1 if h is None else h for h in self.hash],
        }
