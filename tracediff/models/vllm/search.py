"""vllm search: shrink passes, the shrink order and the fuzz strategy."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tracediff.model import Shrinking, ShrinkPass
from tracediff.models.vllm.scenario import Request, VllmScenario, blocks_for
from tracediff.search.passes import delete_items, lower_each, lower_field, replace_item


def size_key(scenario: VllmScenario, plans: int) -> tuple[int, ...]:
    s, reqs = scenario, scenario.requests
    return (
        len(reqs),
        plans,
        sum(r.prompt for r in reqs),
        sum(r.output for r in reqs),
        sum(r.abort >= 0 for r in reqs),
        sum(r.stop >= 0 for r in reqs),
        s.spec_k,
        int(s.long_prefill > 0),
        int(s.policy == "priority") + int(s.prefix_caching) + int(not s.chunked_prefill),
        sum(r.shared for r in reqs),
        sum(r.arrival for r in reqs),
        sum(r.priority for r in reqs),
        s.num_blocks + s.max_num_seqs + s.max_num_batched_tokens,
    )


def _prompt(s: VllmScenario, i: int, v: int) -> VllmScenario:
    return replace_item(s, i, prompt=v, shared=min(v, s.requests[i].shared))


def _output(s: VllmScenario, i: int, v: int) -> VllmScenario:
    r = s.requests[i]
    return replace_item(s, i, output=v, stop=r.stop if r.stop < v else -1)


def _drop(field: str, value: int) -> Callable[[Shrinking], None]:
    """Set a request field to its simplest value (no abort, no stop token, no family)."""

    def run(shrink: Shrinking) -> None:
        for index in range(len(shrink.best.requests)):
            if index >= len(shrink.best.requests):
                return
            r = shrink.best.requests[index]
            if getattr(r, field) != value:
                changes: dict[str, Any] = {field: value}
                if field == "family":
                    changes["shared"] = 0
                shrink.consider(replace_item(shrink.best, index, **changes))

    return run


def _config(**simpler: Any) -> Callable[[Shrinking], None]:
    def run(shrink: Shrinking) -> None:
        if any(getattr(shrink.best, k) != v for k, v in simpler.items()):
            shrink.consider(dataclasses.replace(shrink.best, **simpler))

    return run


def _fewest_blocks(s: VllmScenario) -> int:
    need = [blocks_for(r.prompt + r.output + s.spec_k, s.block_size) for r in s.requests]
    return max(need, default=1) + 1


PASSES: tuple[ShrinkPass, ...] = (
    ("delete requests", delete_items()),
    ("drop aborts", _drop("abort", -1)),
    ("drop stop tokens", _drop("stop", -1)),
    ("shorten outputs", lower_each("output", 1, _output)),
    ("shorten prompts", lower_each("prompt", 1, _prompt)),
    ("no speculative decoding", _config(spec_k=0)),
    ("no long-prefill threshold", _config(long_prefill=0)),
    ("fcfs policy", _config(policy="fcfs")),
    ("drop prefix families", _drop("family", -1)),
    ("shorter shared prefixes", lower_each("shared", 0)),
    ("earlier arrivals", lower_each("arrival", 0)),
    ("equal priorities", lower_each("priority", 0)),
    ("fewer blocks", lower_field("num_blocks", _fewest_blocks)),
    ("fewer seqs", lower_field("max_num_seqs", lambda s: 1)),
)


def fuzz_strategy(max_size: int) -> Any:
    config = st.tuples(
        st.sampled_from((4, 8, 16)),  # block size
        st.sampled_from((2, 4, 8)),  # max_num_seqs
        st.sampled_from((16, 32, 64)),  # token budget
        st.sampled_from((0, 0, 2)),  # spec_k
        st.sampled_from(("fcfs", "priority")),
        st.booleans(),  # prefix caching
        st.sampled_from((0, 0, 8, 16)),  # long prefill
        st.integers(0, 6),  # spare blocks
    )
    item = st.tuples(
        st.sampled_from((0, 0, 1, 3)),  # arrival gap (steps)
        st.integers(4, 64),  # prompt
        st.integers(1, 10),  # output
        st.integers(-1, 1),  # family
        st.integers(0, 2),  # priority
        st.integers(-1, 9),  # stop index
        st.integers(-1, 8),  # abort after arrival
    )
    items = st.lists(item, min_size=1, max_size=max(1, max_size))

    def build(drawn: tuple[tuple[Any, ...], list[tuple[int, ...]]]) -> VllmScenario:
        (bs, seqs, budget, k, policy, caching, long_prefill, spare), rows = drawn
        reqs, at = [], 0
        for rid, (gap, prompt, output, family, priority, stop, abort) in enumerate(rows):
            at += gap
            shared = min(prompt, 32) if family >= 0 else 0
            reqs.append(Request(rid, at, prompt, output, family, shared, priority,
                                stop if stop < output else -1,
                                at + abort if abort >= 0 else -1))  # fmt: skip
        biggest = max(blocks_for(r.prompt + r.output + k, bs) for r in reqs)
        return VllmScenario("fuzz", 0, block_size=bs, num_blocks=biggest + 1 + spare,
                            max_num_seqs=seqs, max_num_batched_tokens=max(budget, seqs),
                            max_model_len=96, long_prefill=long_prefill, spec_k=k,
                            policy=policy, prefix_caching=caching,
                            requests=tuple(reqs))  # fmt: skip

    return st.tuples(config, items).map(build)
