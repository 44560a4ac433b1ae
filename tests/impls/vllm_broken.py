"""Broken vLLM schedulers: plausible optimisation bugs, each one small change to vLLM's own
``vllm.v1.core.sched.scheduler.Scheduler`` made through a method or attribute a patch could
touch (tests/test_vllm.py requires every one to be caught on quick as a divergence,
explained at its cause and shrunk to a few requests).

Each is a ``Scheduler`` subclass, named on the command line as a contributor names theirs:
``tracediff --model vllm run --impl vllm --impl tests.impls.vllm_broken:PreemptOldest``.
Importing this module imports vLLM.
"""

from __future__ import annotations

from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler


class _FrontPop(list):  # type: ignore[type-arg]
    """A running list whose ``pop()`` takes the front: the oldest request."""

    def pop(self, index: Any = None) -> Any:
        return super().pop(0 if index is None else index)


class PreemptOldest(Scheduler):
    """Wrong preemption victim: the running queue was made a "cheaper" container whose
    ``pop()`` without an index takes the oldest request, so FCFS preemption frees the
    request that has waited longest instead of the newest."""

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        self.running = _FrontPop(self.running)
        return super().schedule(*args, **kwargs)


class BudgetOffByOne(Scheduler):
    """Token budget off by one: one token of ``max_num_batched_tokens`` is "reserved for the
    sampled token", so a full step schedules one token fewer than it may."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_num_scheduled_tokens -= 1


class HitCapWholeBlocks(Scheduler):
    """Prefix hit rounded wrongly: the cap that keeps the last prompt token to compute is
    taken as "all whole blocks but one" (``(num_tokens // block_size - 1) * block_size``)
    instead of ``num_tokens - 1`` rounded down to a block, so a fully cached prompt that is
    not block-aligned recomputes one block it had."""

    def _get_local_prefix_cache_hit(self, request: Any) -> Any:
        blocks, hit, boundary, diverged = super()._get_local_prefix_cache_hit(request)
        cap = max(0, (request.num_tokens // self.block_size - 1) * self.block_size)
        if hit > cap:
            blocks = self.kv_cache_manager.truncate_computed_blocks(blocks, cap)
            hit = cap
        return blocks, hit, boundary, diverged


class ChunkBlockAligned(Scheduler):
    """Chunked-prefill boundary: a prefill chunk cut by the budget (or the long-prefill
    threshold) is rounded down to end on a block boundary "so that every chunk fills whole
    blocks", which makes chunks smaller than the budget allows."""

    def _reserve_prefill_lookahead(
        self, request: Any, num_computed_tokens: int, num_new_tokens: int
    ) -> int:
        n = super()._reserve_prefill_lookahead(request, num_computed_tokens, num_new_tokens)
        end = num_computed_tokens + n
        if end < request.num_tokens and end % self.block_size:
            aligned = end - end % self.block_size - num_computed_tokens
            if aligned > 0:
                return aligned
        return n


class StaleHitMemo(Scheduler):
    """A value cached across steps: the prefix-cache lookup of a waiting request is
    memoised (it is looked up again every step it stays waiting), so blocks that other
    requests cached since then are not hit."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.memo: dict[str, Any] = {}

    def _get_local_prefix_cache_hit(self, request: Any) -> Any:
        key = request.request_id
        if key in self.memo:
            blocks, hit, boundary, diverged = self.memo[key]
            fresh = super()._get_local_prefix_cache_hit(request)
            if fresh[1] >= hit:  # only a smaller hit is kept: the memo must stay valid
                kept = self.kv_cache_manager.truncate_computed_blocks(fresh[0], hit)
                return kept, hit, boundary, diverged
            return fresh
        found = super()._get_local_prefix_cache_hit(request)
        self.memo[key] = found
        return found
