"""The seeded scenario generator: (profile, seed) -> Scenario, the same on any machine.

Every draw is a keyed counter-based draw (``rng``), so changing one request's feature
does not reshuffle the others, and adding a field later does not change old scenarios'
existing draws.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tracediff.scenario import rng
from tracediff.scenario.model import (
    MAX_DRAFT,
    EngineTruth,
    RequestSpec,
    Scenario,
    SchedulerParams,
)
from tracediff.scenario.profiles import Profile
from tracediff.sched.formulas import RAGGED, RECT


def _between(seed: int, tag: str, low: float, high: float, *parts: int) -> float:
    return round(low + (high - low) * rng.uniform(seed, tag, *parts), 4)


def generate(profile: Profile, seed: int) -> Scenario:
    requests_n, allocation, graphs, queue_depth = profile.matrix.cell(seed)
    gen = profile.generator
    overrides: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in profile.params.items()
    }
    params = dataclasses.replace(
        SchedulerParams(**overrides),
        allocation=allocation,
        ragged=graphs == "mixed",
        queue_depth=queue_depth,
    )
    if params.ragged:
        eager = []
        for b_pad in params.batch_buckets:
            for width in range(MAX_DRAFT + 1):
                if rng.chance(seed, "eager", gen.p_eager, RECT, b_pad, width):
                    eager.append((RECT, b_pad, width))
            for tokens in params.token_buckets:
                if rng.chance(seed, "eager", gen.p_eager, RAGGED, b_pad, tokens):
                    eager.append((RAGGED, b_pad, tokens))
        params = dataclasses.replace(params, eager_shapes=tuple(eager))
    scale = 1.0 / (1.0 + gen.max_new_decay * math.log2(requests_n))
    low = max(2, int(gen.max_new[0] * scale))
    high = max(low, int(gen.max_new[1] * scale))
    requests = []
    for i in range(requests_n):
        max_new = rng.randint(seed, "max_new", low, high, i)
        arrival = 0 if i == 0 else rng.randint(seed, "arrival", 0, gen.arrival_window_us, i)
        requests.append(
            RequestSpec(
                id=i,
                arrival_us=arrival,
                prompt_len=rng.randint(seed, "prompt", gen.prompt_len[0], gen.prompt_len[1], i),
                max_new=max_new,
                proposer="copy" if rng.chance(seed, "copy", gen.p_copy, i) else "mtp",
                grammar_cap=(
                    rng.randint(seed, "grammar-cap", 0, 3, i)
                    if rng.chance(seed, "grammar", gen.p_grammar, i)
                    else -1
                ),
                host_stop=rng.chance(seed, "host-stop", gen.p_host_stop, i),
                fixed_width=(
                    rng.randint(seed, "fixed-width", 0, MAX_DRAFT, i)
                    if rng.chance(seed, "fixed", gen.p_fixed, i)
                    else -1
                ),
                stop_at=(
                    rng.randint(seed, "stop-at", 1, max_new, i)
                    if rng.chance(seed, "stop", gen.p_stop, i)
                    else -1
                ),
                accept_base=_between(seed, "accept-base", *gen.accept_base, i),
                accept_decay=_between(seed, "accept-decay", *gen.accept_decay, i),
            )
        )
    scenario = Scenario(
        profile=profile.name,
        seed=seed,
        params=params,
        truth=EngineTruth(),
        requests=tuple(requests),
    )
    scenario.validate()
    return scenario
