"""kvbatch scenarios, profiles and the generator (docs/kvbatch.md, "The scenario").

A scenario is a pure value: the planner's budgets, the engine's step time and the requests.
A seed's scenario is a pure function of (profile, seed).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracediff.errors import ScenarioError, UsageError
from tracediff.model import Draws
from tracediff.workload import Window, WorkloadOrigin, WorkloadSet

FORMAT = "kvbatch-trace"
RECORD_KEYS = (
    "t", "plan", "now", "run", "admit", "preempt", "alloc", "evict", "hits", "finished",
    "tokens", "free",
)  # fmt: skip


@dataclass(frozen=True)
class Request:
    id: int
    arrival: int
    prompt: int
    output: int
    priority: int = 1
    prefix: tuple[int, ...] = ()

    def to_list(self) -> list[Any]:
        return [self.id, self.arrival, self.prompt, self.output, self.priority, list(self.prefix)]


@dataclass(frozen=True)
class KVScenario:
    profile: str
    seed: int
    block_size: int = 4
    num_blocks: int = 8
    token_budget: int = 8
    max_running: int = 4
    step_base: int = 10_000
    step_per_token: int = 20
    requests: tuple[Request, ...] = ()
    workload: WorkloadOrigin | None = None  # a workload window's (docs/workloads.md)

    def features(self) -> str:
        shared = sum(1 for r in self.requests if r.prefix)
        origin = ""
        if self.workload is not None:
            w = self.workload
            origin = f", workload {w.name}[{w.start}:+{w.length}]"
        return (
            f"{len(self.requests)} requests, {self.num_blocks} blocks of {self.block_size}, "
            f"budget {self.token_budget}, {shared} with prefixes{origin}"
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "profile": self.profile,
            "seed": self.seed,
            "block_size": self.block_size,
            "num_blocks": self.num_blocks,
            "token_budget": self.token_budget,
            "max_running": self.max_running,
            "step_base": self.step_base,
            "step_per_token": self.step_per_token,
            "requests": [r.to_list() for r in self.requests],
        }
        if self.workload is not None:  # a generated scenario's dict has no such key
            data["workload"] = self.workload.to_dict()
        return data


PARAMS = ("block_size", "num_blocks", "token_budget", "max_running", "step_base",
          "step_per_token")  # fmt: skip


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def scenario_from_dict(data: Any) -> KVScenario:
    try:
        params = {name: _int(data[name]) for name in PARAMS}
        requests = tuple(
            Request(_int(i), _int(a), _int(p), _int(o), _int(pr), tuple(_int(h) for h in hs))
            for i, a, p, o, pr, hs in data["requests"]
        )
        origin = WorkloadOrigin.from_dict(data["workload"]) if "workload" in data else None
        scenario = KVScenario(str(data["profile"]), _int(data["seed"]), requests=requests,
                              workload=origin, **params)  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise ScenarioError(f"not a kvbatch scenario: {type(exc).__name__}: {exc}") from None
    validate(scenario)
    return scenario


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def validate(scenario: KVScenario) -> None:
    """ScenarioError unless the scenario is valid (docs/kvbatch.md, "The scenario")."""
    s = scenario
    if min(s.block_size, s.num_blocks, s.token_budget, s.max_running, s.step_base) < 1:
        raise ScenarioError("kvbatch: block_size, num_blocks, budgets and step_base must be >= 1")
    if s.step_per_token < 0:
        raise ScenarioError("kvbatch: step_per_token must be >= 0")
    ids = [r.id for r in s.requests]
    if len(set(ids)) != len(ids):
        raise ScenarioError("kvbatch: request ids must be distinct")
    for r in s.requests:
        if r.arrival < 0 or r.prompt < 1 or r.output < 1 or r.priority not in (0, 1):
            raise ScenarioError(f"kvbatch: request {r.id}: arrival >= 0, prompt and output >= 1, "
                                "priority 0 or 1")  # fmt: skip
        if len(r.prefix) > r.prompt // s.block_size:
            raise ScenarioError(f"kvbatch: request {r.id}: more prefix hashes than full blocks")
        if blocks_for(r.prompt + r.output, s.block_size) > s.num_blocks:
            raise ScenarioError(f"kvbatch: request {r.id} does not fit the cache alone")


@dataclass(frozen=True)
class KVProfile:
    name: str
    description: str
    seeds: tuple[int, ...]
    max_requests: int
    max_prompt: int
    max_output: int
    workload: WorkloadSet | None = None  # requests from these windows (docs/workloads.md)


PROFILES = {
    "quick": KVProfile("quick", "40 small batches under block pressure", tuple(range(40)),
                       8, 24, 8),
    "default": KVProfile("default", "300 batches, longer prompts", tuple(range(300)),
                         16, 48, 16),
}  # fmt: skip


# The built-in workload profile: its bounds, over the shipped traffic samples when it is
# loaded (the model's ``profiles``, tracediff.workload.over_samples).
WORKLOAD = KVProfile(
    "workload", "windows of 16 requests of the shipped traffic samples", tuple(range(24)),
    16, 64, 16,
)  # fmt: skip


# A profile file's keys (``profile_from_toml``); the bounds a generated scenario draws under.
PROFILE_KEYS = ("name", "description", "seeds", "max_requests", "max_prompt", "max_output",
                "workload")  # fmt: skip
PROFILE_BOUNDS = {"max_requests": (1, 64), "max_prompt": (1, 4096), "max_output": (1, 4096)}


def profile_from_toml(data: dict[str, Any], path: str) -> KVProfile:
    """A profile file of the project (``NAME.toml``): the quick profile's bounds unless it
    gives its own, its seeds (``"0..99"`` or a list), and a ``[workload]`` table that takes
    the requests from request-trace windows (docs/workloads.md); ProfileError naming the key."""
    from tracediff import workload
    from tracediff.errors import ProfileError
    from tracediff.project.seeds import parse_seeds

    unknown = sorted(set(data) - set(PROFILE_KEYS))
    if unknown:
        raise ProfileError(f"{path}: unknown key {unknown[0]!r}; allowed: {list(PROFILE_KEYS)}")
    base = PROFILES["quick"]
    name = data.get("name", Path(path).stem)
    description = data.get("description", f"kvbatch profile {path}")
    if not isinstance(name, str) or not name or not isinstance(description, str):
        raise ProfileError(f"{path}: name and description must be strings")
    seeds_value = data.get("seeds", "0..39")
    try:
        if isinstance(seeds_value, str):
            seeds = parse_seeds(seeds_value)
        elif isinstance(seeds_value, list) and all(type(v) is int for v in seeds_value):
            seeds = parse_seeds(",".join(str(v) for v in seeds_value)) if seeds_value else ()
        else:
            raise ProfileError(f'{path}: seeds must be a seed set ("0..99") or a list')
    except UsageError as exc:
        raise ProfileError(f"{path}: seeds: {exc}") from None
    bounds = {}
    for key, (low, high) in PROFILE_BOUNDS.items():
        value = data.get(key, getattr(base, key))
        if type(value) is not int or not low <= value <= high:
            raise ProfileError(f"{path}: {key} must be an integer in {low}..{high}")
        bounds[key] = value
    workloads = None
    if "workload" in data:
        spec = workload.parse_table(
            data["workload"], Path(path).parent, lambda key: f"{path} [workload] {key or ''}"
        )
        workloads = workload.load(spec)
    return KVProfile(name, description, seeds, workload=workloads, **bounds)


def generate_from(profile: KVProfile, seed: int, draws: Draws) -> KVScenario:
    """The scenario ``draws`` make (tracediff.draws): seeded by "kvbatch:PROFILE:SEED" it
    is the scenario of that seed (every draw answers as the same call on random.Random
    did); tracediff shrinks by reducing the draws and fuzzes by letting Hypothesis answer
    them, so fuzzing reaches every scenario this generator can make (request ids in any
    order of arrival included)."""
    if profile.workload is not None:
        return from_window(profile, seed, profile.workload.window(seed))
    rng = draws
    bs = rng.choice((2, 4, 4, 8))
    token_budget = rng.choice((4, 8, 16, 32))
    max_running = rng.choice((2, 3, 4, 8))
    count = rng.integer(2, profile.max_requests)
    families = rng.integer(1, 3)
    periods = _echo_periods(draws.sub("echo"), families)
    ids = list(range(count))
    rng.shuffle(ids)
    requests: list[Request] = []
    at = 0
    for rid in ids:
        at += rng.choice((0, 0, 1000, 5000, 20000, 60000))
        if rng.boolean(0.3):
            prompt = bs * rng.integer(1, max(1, profile.max_prompt // bs))
        else:
            prompt = rng.integer(1, profile.max_prompt)
        output = rng.integer(1, profile.max_output)
        priority = 0 if rng.boolean(0.2) else 1
        full = prompt // bs
        prefix: list[int] = []
        if full and rng.boolean(0.75):
            family = rng.below(families)
            shared = rng.integer(0, full)
            last = rng.integer(shared, full)
            period = periods[family] or shared
            prefix = [(family + 1) * 1000 + i % period for i in range(shared)]
            prefix += [(rid + 1) * 100000 + i for i in range(shared, last)]
        requests.append(Request(rid, at, prompt, output, priority, tuple(prefix)))
    biggest = max(blocks_for(r.prompt + r.output, bs) for r in requests)
    num_blocks = biggest + rng.integer(0, biggest * rng.choice((0, 1, 1, 3)))
    return KVScenario(
        profile.name,
        seed,
        block_size=bs,
        num_blocks=num_blocks,
        token_budget=token_budget,
        max_running=max_running,
        step_base=rng.choice((5000, 10000)),
        step_per_token=rng.choice((0, 20)),
        requests=tuple(requests),
    )


def _echo_periods(rng: Draws, families: int) -> list[int]:
    """Per prefix family, the period after which its hashes repeat (0: never): a prompt
    that holds the same block content twice, ``[1000, 1001, 1000, 1001]``, as a workload's
    ``hash_ids`` may. Drawn from a stream of its own (``draws.sub("echo")``), so that the
    rest of a seed's scenario is what it was before families could repeat."""
    return [rng.choice((0, 0, 0, 1, 2, 3)) for _ in range(families)]


def from_window(profile: KVProfile, seed: int, window: Window) -> KVScenario:
    """A workload window as a kvbatch scenario (docs/workloads.md, "kvbatch").

    One block of the trace (``block_tokens`` tokens, Mooncake's 512) is one KV block of
    the scenario: a prompt of ``t`` trace tokens is ``ceil(t * block_size / block_tokens)``
    tokens (clipped to ``max_prompt``), and its ``hash_ids`` are its prefix hashes (the
    full blocks' ones), so requests share cached blocks exactly where the trace's share
    content. Outputs are the trace's times ``output_scale``, rounded up, clipped to
    ``1..max_output``; arrivals the gaps since the window's first request times
    ``time_scale``. Block size, budgets, the cache's size, step times and priorities are
    drawn from the seed as the generator draws them.
    """
    assert profile.workload is not None
    spec = profile.workload.spec
    rng = random.Random(f"kvbatch:{profile.name}:{seed}")
    bs = rng.choice((2, 4, 4, 8))
    token_budget = rng.choice((4, 8, 16, 32))
    max_running = rng.choice((2, 3, 4, 8))
    first = window.requests[0].arrival_us
    requests: list[Request] = []
    prompts_clipped = outputs_clipped = 0
    for rid, r in enumerate(window.requests):
        scaled = max(1, -(-r.input_tokens * bs // spec.block_tokens))
        prompt = min(scaled, profile.max_prompt)
        wanted = max(1, math.ceil(r.output_tokens * spec.output_scale))
        output = min(wanted, profile.max_output)
        prompts_clipped += prompt != scaled
        outputs_clipped += output != wanted
        priority = 0 if rng.random() < 0.2 else 1
        prefix = r.hash_ids[: prompt // bs]
        arrival = int((r.arrival_us - first) * spec.time_scale)
        requests.append(Request(rid, arrival, prompt, output, priority, prefix))
    biggest = max(blocks_for(r.prompt + r.output, bs) for r in requests)
    num_blocks = biggest + rng.randint(0, biggest * rng.choice((0, 1, 1, 3)))
    scales: tuple[tuple[str, float], ...] = (
        ("time_scale", spec.time_scale),
        ("trace_tokens_per_token", spec.block_tokens / bs),
        ("max_prompt", profile.max_prompt),
        ("prompts_clipped", prompts_clipped),
        ("output_scale", spec.output_scale),
        ("max_output", profile.max_output),
        ("outputs_clipped", outputs_clipped),
    )
    return KVScenario(
        profile.name,
        seed,
        block_size=bs,
        num_blocks=num_blocks,
        token_budget=token_budget,
        max_running=max_running,
        step_base=rng.choice((5000, 10000)),
        step_per_token=rng.choice((0, 20)),
        requests=tuple(requests),
        workload=window.origin(scales),
    )


def plan_record(
    plan: int,
    now: int,
    run: list[list[int]],
    admit: list[list[int]],
    preempt: list[int],
    alloc: list[list[Any]],
    evict: list[list[int]],
    hits: int,
    finished: list[int],
    tokens: int,
    free: int,
) -> dict[str, Any]:
    """The plan record of docs/kvbatch.md, its keys in their fixed order."""
    return {"t": "plan", "plan": plan, "now": now, "run": run, "admit": admit,
            "preempt": preempt, "alloc": alloc, "evict": evict, "hits": hits,
            "finished": finished, "tokens": tokens, "free": free}  # fmt: skip
