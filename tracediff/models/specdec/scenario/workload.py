"""A workload window as a specdec scenario (docs/workloads.md, "specdec").

The trace gives what it knows of each request; the seed gives the rest, with the
generator's own keyed draws (so a workload scenario has every regime and feature a
generated one of its seed has):

* arrival: the gap since the window's first request, times ``time_scale``, whole µs;
* prompt_len and max_new: the trace's input and output tokens times ``input_scale`` and
  ``output_scale`` (rounded up), clipped to the profile's ``prompt_len`` and ``max_new``
  ranges (the scales, the ranges and the counts clipped are recorded);
* proposer: ``copy`` when at least half of the request's ``hash_ids`` were seen in an
  earlier request of the window (repeated content, which a copy proposer drafts from: a
  conversation's next turn, a shared system prompt), else ``mtp``; a format without
  hash_ids (Azure, BurstGPT) draws it from the seed as the generator does;
* parameters, engine truth, grammar, host stops, fixed widths, stop strings and acceptance:
  the seed's, from the profile's matrix cell and generator.
"""

from __future__ import annotations

import math

from tracediff.models.specdec.scenario import rng
from tracediff.models.specdec.scenario.generator import (
    draw_request,
    perfect_request,
    scenario_params,
)
from tracediff.models.specdec.scenario.model import RequestSpec, Scenario
from tracediff.models.specdec.scenario.profiles import Profile
from tracediff.workload import Window


def _clip(value: int, low: int, high: int) -> tuple[int, bool]:
    clipped = min(max(value, low), high)
    return clipped, clipped != value


def from_window(profile: Profile, seed: int, window: Window) -> Scenario:
    assert profile.workload is not None
    gen = profile.generator
    spec = profile.workload.spec
    params, truth, perfect, exact = scenario_params(profile, seed)
    first = window.requests[0].arrival_us
    seen: set[int] = set()
    prompts_clipped = outputs_clipped = copies = 0
    requests: list[RequestSpec] = []
    for i, r in enumerate(window.requests):
        prompt, cut_prompt = _clip(math.ceil(r.input_tokens * spec.input_scale), *gen.prompt_len)
        max_new, cut_output = _clip(math.ceil(r.output_tokens * spec.output_scale), *gen.max_new)
        prompts_clipped += cut_prompt
        outputs_clipped += cut_output
        if r.hash_ids:
            repeated = sum(1 for h in r.hash_ids if h in seen)
            proposer = "copy" if 2 * repeated >= len(r.hash_ids) else "mtp"
            seen.update(r.hash_ids)
        else:
            proposer = "copy" if rng.chance(seed, "copy", gen.p_copy, i) else "mtp"
        copies += proposer == "copy"
        requests.append(
            draw_request(
                seed,
                gen,
                i,
                arrival=int((r.arrival_us - first) * spec.time_scale),
                prompt_len=prompt,
                max_new=max_new,
                proposer=proposer,
                perfect=perfect_request(seed, gen, i, perfect, exact),
            )
        )
    scales: tuple[tuple[str, float], ...] = (
        ("time_scale", spec.time_scale),
        ("input_scale", spec.input_scale),
        ("output_scale", spec.output_scale),
        ("prompt_low", gen.prompt_len[0]),
        ("prompt_high", gen.prompt_len[1]),
        ("prompts_clipped", prompts_clipped),
        ("max_new_low", gen.max_new[0]),
        ("max_new_high", gen.max_new[1]),
        ("outputs_clipped", outputs_clipped),
        ("copy_requests", copies),
    )
    scenario = Scenario(
        profile=profile.name,
        seed=seed,
        params=params,
        truth=truth,
        requests=tuple(requests),
        workload=window.origin(scales),
    )
    scenario.validate()
    return scenario
