"""vllm scenarios, profiles, the generator and the simulated model runner (docs/vllm.md).

A scenario is a pure value: the engine's configuration (blocks, budgets, policy, chunked
prefill, prefix caching, n-gram speculative decoding) and the traffic (requests with an
arrival step, a prompt built from a shared prefix family, an output length, a priority, an
optional stop token and an optional abort). A seed's scenario is a pure function of
(profile, seed); the tokens the simulated runner samples are a pure function of (seed,
request, position), drawn with a keyed hash, never from a shared stream, so that two
implementations that schedule alike are given the same tokens.

Nothing here imports vLLM.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any

from tracediff.errors import ScenarioError
from tracediff.workload import Window, WorkloadOrigin, WorkloadSet

FORMAT = "vllm-trace"
STOP_TOKEN = 1023  # the stop token a request with ``stop >= 0`` samples
POLICIES = ("fcfs", "priority")
# cause before consequence: whom vLLM preempted and resumed, what each admission hit, the
# tokens per request and the drafts, then the blocks those were given
PLAN_KEYS = (
    "t", "plan", "now", "preempted", "resumed", "new", "cached", "sched", "spec", "blocks",
    "finished", "free",
)  # fmt: skip
UPDATE_KEYS = ("t", "now", "tokens", "finished", "free")


@dataclass(frozen=True)
class Request:
    id: int
    arrival: int  # the engine step it arrives at
    prompt: int  # prompt tokens
    output: int  # max_tokens
    family: int = -1  # the shared prefix family its prompt starts with (-1: none)
    shared: int = 0  # how many of the family's tokens it starts with
    priority: int = 0  # lower first, under the priority policy
    stop: int = -1  # the output index at which it samples the stop token (-1: never)
    abort: int = -1  # the step at which the client aborts it (-1: never)

    def to_list(self) -> list[int]:
        return [self.id, self.arrival, self.prompt, self.output, self.family, self.shared,
                self.priority, self.stop, self.abort]  # fmt: skip


CONFIG = (
    "block_size", "num_blocks", "max_num_seqs", "max_num_batched_tokens", "max_model_len",
    "long_prefill", "spec_k", "accept",
)  # fmt: skip
FLAGS = ("chunked_prefill", "prefix_caching")


@dataclass(frozen=True)
class VllmScenario:
    profile: str
    seed: int
    block_size: int = 16
    num_blocks: int = 16  # the KV cache's blocks, the null block included
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 64
    max_model_len: int = 256
    long_prefill: int = 0  # long_prefill_token_threshold (0: off)
    spec_k: int = 0  # n-gram draft tokens per step (0: no speculative decoding)
    accept: int = 70  # percent: how often a draft token is the one the model samples
    chunked_prefill: bool = True
    prefix_caching: bool = True
    policy: str = "fcfs"
    requests: tuple[Request, ...] = ()
    workload: WorkloadOrigin | None = None  # a workload window's (docs/workloads.md)

    def features(self) -> str:
        bits = [
            f"{len(self.requests)} requests",
            f"{self.num_blocks} blocks of {self.block_size}",
            f"budget {self.max_num_batched_tokens}",
            f"{self.max_num_seqs} seqs",
            self.policy,
        ]
        if self.spec_k:
            bits.append(f"ngram k={self.spec_k}")
        if not self.prefix_caching:
            bits.append("no prefix cache")
        if not self.chunked_prefill:
            bits.append("no chunked prefill")
        if self.long_prefill:
            bits.append(f"long prefill {self.long_prefill}")
        aborts = sum(r.abort >= 0 for r in self.requests)
        if aborts:
            bits.append(f"{aborts} aborts")
        if self.workload is not None:
            w = self.workload
            bits.append(f"workload {w.name}[{w.start}:+{w.length}]")
        return ", ".join(bits)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"profile": self.profile, "seed": self.seed}
        for name in CONFIG:
            data[name] = getattr(self, name)
        for name in FLAGS:
            data[name] = getattr(self, name)
        data["policy"] = self.policy
        data["requests"] = [r.to_list() for r in self.requests]
        if self.workload is not None:  # a generated scenario's dict has no such key
            data["workload"] = self.workload.to_dict()
        return data


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{value!r} is not an integer")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{value!r} is not a boolean")
    return value


def scenario_from_dict(data: Any) -> VllmScenario:
    try:
        if not isinstance(data, dict):
            raise TypeError("not a map")
        # other keys are ignored: a saved regression adds what found it (format, impls,
        # signature, note, model) to the scenario's own
        config: dict[str, Any] = {name: _int(data[name]) for name in CONFIG}
        config.update({name: _bool(data[name]) for name in FLAGS})
        policy = data["policy"]
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
        requests = []
        for row in data["requests"]:
            if not isinstance(row, list) or len(row) != 9:
                raise ValueError(f"request {row!r:.40} is not a list of 9 integers")
            requests.append(Request(*(_int(v) for v in row)))
        if not isinstance(data["profile"], str):
            raise TypeError("profile is not a string")
        origin = WorkloadOrigin.from_dict(data["workload"]) if "workload" in data else None
        scenario = VllmScenario(
            data["profile"], _int(data["seed"]), policy=policy, requests=tuple(requests),
            workload=origin, **config,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as exc:
        raise ScenarioError(f"not a vllm scenario: {type(exc).__name__}: {exc}") from None
    validate(scenario)
    return scenario


def blocks_for(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def validate(scenario: VllmScenario) -> None:
    """ScenarioError unless the scenario is one vLLM accepts and can finish."""
    s = scenario
    if s.block_size not in (4, 8, 16, 32):
        raise ScenarioError("vllm: block_size must be 4, 8, 16 or 32")
    if min(s.num_blocks, s.max_num_seqs, s.max_num_batched_tokens, s.max_model_len) < 1:
        raise ScenarioError("vllm: blocks, max_num_seqs, budgets and max_model_len must be >= 1")
    if s.max_num_batched_tokens < s.max_num_seqs:
        raise ScenarioError("vllm: max_num_batched_tokens must be >= max_num_seqs")
    if not s.chunked_prefill and s.max_num_batched_tokens < s.max_model_len:
        raise ScenarioError("vllm: without chunked prefill the token budget must hold "
                            "max_model_len")  # fmt: skip
    if not 0 <= s.long_prefill <= s.max_model_len:
        raise ScenarioError("vllm: long_prefill must be 0..max_model_len")
    if not 0 <= s.spec_k <= 4 or not 0 <= s.accept <= 100:
        raise ScenarioError("vllm: spec_k must be 0..4 and accept 0..100")
    if s.spec_k and s.max_num_batched_tokens <= s.spec_k:
        raise ScenarioError("vllm: the token budget must exceed spec_k")
    if s.policy not in POLICIES:
        raise ScenarioError(f"vllm: policy must be one of {', '.join(POLICIES)}")
    ids = [r.id for r in s.requests]
    if len(set(ids)) != len(ids):
        raise ScenarioError("vllm: request ids must be distinct")
    for r in s.requests:
        if r.id < 0 or r.id > 999_999 or r.arrival < 0 or r.prompt < 1 or r.output < 1:
            raise ScenarioError(f"vllm: request {r.id}: id 0..999999, arrival >= 0, prompt "
                                "and output >= 1")  # fmt: skip
        if not (r.family == -1 and r.shared == 0) and not (
            0 <= r.family and 0 <= r.shared <= r.prompt
        ):
            raise ScenarioError(f"vllm: request {r.id}: a family >= 0 with 0..prompt shared "
                                "tokens, or family -1 with none")  # fmt: skip
        if not 0 <= r.priority <= 9:
            raise ScenarioError(f"vllm: request {r.id}: priority must be 0..9")
        if not -1 <= r.stop < r.output:
            raise ScenarioError(f"vllm: request {r.id}: stop must be -1 or an output index")
        if r.abort != -1 and r.abort < r.arrival:
            raise ScenarioError(f"vllm: request {r.id}: aborted before it arrives")
        if r.prompt + r.output + s.spec_k + 1 > s.max_model_len:
            raise ScenarioError(f"vllm: request {r.id} is longer than max_model_len")
        if blocks_for(r.prompt + r.output + s.spec_k, s.block_size) > s.num_blocks - 1:
            raise ScenarioError(f"vllm: request {r.id} does not fit the cache alone")


# -- the simulated model runner ----------------------------------------------------------
def draw(*key: Any) -> int:
    """A keyed deterministic draw: 64 bits of BLAKE2b over the key's text."""
    text = ":".join(str(k) for k in key).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _stream(count: int, *key: Any) -> list[int]:
    """``count`` tokens of a keyed SHAKE-128 stream (a longer stream of the same key starts
    with the shorter one): one hash call for a whole prompt."""
    data = hashlib.shake_128(":".join(str(k) for k in key).encode()).digest(2 * count)
    return [1 + int.from_bytes(data[i : i + 2], "little") % 1000 for i in range(0, 2 * count, 2)]


def prompt_tokens(seed: int, r: Request) -> list[int]:
    """The prompt: the family's first ``shared`` tokens, then the request's own."""
    own = _stream(r.prompt, seed, "prompt", r.id)[r.shared :]
    return _stream(r.shared, seed, "family", r.family) + own


def output_token(seed: int, r: Request, index: int) -> int:
    """The token the model samples as output ``index`` of ``r``."""
    if index == r.stop:
        return STOP_TOKEN
    return 1 + draw(seed, "output", r.id, index) % 1000


def draft_tokens(seed: int, r: Request, index: int, k: int, accept: int) -> list[int]:
    """What the n-gram proposer proposes for outputs ``index``, ``index + 1``, ...: 0..k
    tokens, each the sampled one with probability ``accept`` percent."""
    count = draw(seed, "drafts", r.id, index) % (k + 1)
    drafts = []
    for i in range(count):
        true = output_token(seed, r, index + i)
        if draw(seed, "accept", r.id, index + i) % 100 < accept:
            drafts.append(true)
        else:
            drafts.append(1 + true % 1000 if true != STOP_TOKEN else 1)
    return drafts


def sampled_tokens(seed: int, r: Request, index: int, drafts: list[int]) -> list[int]:
    """The tokens one step samples for ``r`` from output ``index`` on, verifying
    ``drafts``: every leading draft that is the true token, then one more."""
    tokens = []
    for i, d in enumerate(drafts):
        true = output_token(seed, r, index + i)
        tokens.append(true)
        if d != true:
            return tokens
    tokens.append(output_token(seed, r, index + len(drafts)))
    return tokens


# -- profiles and the generator ------------------------------------------------------------
@dataclass(frozen=True)
class VllmProfile:
    name: str
    description: str
    seeds: tuple[int, ...]
    max_requests: int
    max_prompt: int
    max_output: int
    starve: float  # how often the cache holds only a little more than the largest request
    workload: WorkloadSet | None = None  # requests from these windows (docs/workloads.md)


PROFILES = {
    "quick": VllmProfile("quick", "60 small engines, from starved to ample caches",
                         tuple(range(60)), 10, 80, 12, 0.5),
    "default": VllmProfile("default", "300 engines, longer prompts and outputs",
                           tuple(range(300)), 16, 160, 24, 0.5),
    "stress": VllmProfile("stress", "200 busy engines under block pressure",
                          tuple(range(200)), 40, 200, 32, 0.8),
}  # fmt: skip
# The built-in workload profile: its bounds, over the shipped traffic samples when it is
# loaded (the model's ``profiles``, tracediff.workload.over_samples).
WORKLOAD = VllmProfile(
    "workload", "windows of 16 requests of the shipped traffic samples", tuple(range(24)),
    16, 160, 24, 0.5,
)  # fmt: skip
STEP_US = 10_000  # one engine step is 10 ms of (scaled) trace time


def _engine(rng: random.Random, profile: VllmProfile) -> dict[str, Any]:
    """The engine configuration a seed draws (the requests are drawn after it)."""
    bs = rng.choice((4, 8, 16, 16))
    spec_k = rng.choice((0, 0, 2, 3))
    policy = rng.choice(("fcfs", "fcfs", "priority"))
    prefix_caching = rng.random() < 0.8
    chunked = rng.random() < 0.85
    max_model_len = profile.max_prompt + profile.max_output + 8
    max_num_seqs = rng.choice((2, 4, 8, 16))
    budget = max(max_num_seqs, rng.choice((16, 32, 64, 128)))
    if spec_k:
        budget = max(budget, 2 * (spec_k + 1))
    if not chunked:
        budget = max(budget, max_model_len)
    return {
        "block_size": bs,
        "spec_k": spec_k,
        "policy": policy,
        "prefix_caching": prefix_caching,
        "chunked_prefill": chunked,
        "max_model_len": max_model_len,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": budget,
        "long_prefill": rng.choice((0, 0, 0, bs, 2 * bs, 24)),
    }


def _cache(rng: random.Random, profile: VllmProfile, engine: dict[str, Any],
           requests: list[Request]) -> int:  # fmt: skip
    """The cache's blocks: starved (a little more than the largest request) or ample."""
    bs, k = engine["block_size"], engine["spec_k"]
    needs = [blocks_for(r.prompt + r.output + k, bs) for r in requests]
    if rng.random() < profile.starve:
        return max(needs) + 1 + rng.randint(0, 3)
    return max(needs) + 1 + rng.randint(0, sum(needs))


def generate(profile: VllmProfile, seed: int) -> VllmScenario:
    if profile.workload is not None:
        return from_window(profile, seed, profile.workload.window(seed))
    rng = random.Random(f"vllm:{profile.name}:{seed}")
    engine = _engine(rng, profile)
    bs = engine["block_size"]
    count = rng.randint(2, profile.max_requests)
    families = [rng.randint(bs, profile.max_prompt) for _ in range(rng.randint(1, 3))]
    requests = []
    at = 0
    for rid in range(count):
        at += rng.choice((0, 0, 0, 1, 1, 2, 5))
        prompt = rng.randint(4, profile.max_prompt)
        family, shared = -1, 0
        if rng.random() < 0.7:
            family = rng.randrange(len(families))
            shared = min(prompt, families[family], rng.choice((families[family], prompt)))
        output = rng.randint(1, profile.max_output)
        priority = rng.randint(0, 2) if engine["policy"] == "priority" else 0
        stop = rng.randrange(output) if rng.random() < 0.25 else -1
        abort = at + rng.randint(0, 12) if rng.random() < 0.12 else -1
        requests.append(Request(rid, at, prompt, output, family, shared, priority, stop, abort))
    num_blocks = _cache(rng, profile, engine, requests)
    return VllmScenario(
        profile.name,
        seed,
        num_blocks=num_blocks,
        accept=rng.choice((0, 50, 80, 100)),
        requests=tuple(requests),
        **engine,
    )


def from_window(profile: VllmProfile, seed: int, window: Window) -> VllmScenario:
    """A workload window as a vllm scenario (docs/vllm.md, "Workloads").

    One block of the trace (``block_tokens`` tokens, Mooncake's 512) is one KV block of the
    scenario: a prompt of ``t`` trace tokens is ``ceil(t * block_size / block_tokens)``
    tokens (at least 4, clipped to ``max_prompt``). Its ``hash_ids`` make prefix families:
    requests whose first hash is the same share a family, and a request shares as many
    blocks of the family's tokens as its leading hashes agree with the family's chain (the
    first request's, extended by later ones that continue it). Outputs are the trace's
    times ``output_scale``, rounded up, clipped to ``1..max_output``; arrivals are steps of
    ``STEP_US`` (10 ms) of the gaps since the window's first request times ``time_scale``.
    The engine, priorities, stop tokens and aborts are drawn from the seed as the generator
    draws them.
    """
    assert profile.workload is not None
    spec = profile.workload.spec
    rng = random.Random(f"vllm:{profile.name}:{seed}")
    engine = _engine(rng, profile)
    bs = engine["block_size"]
    first = window.requests[0].arrival_us
    chains: dict[Any, list[Any]] = {}
    roots: dict[Any, int] = {}
    requests: list[Request] = []
    prompts_clipped = outputs_clipped = 0
    for rid, r in enumerate(window.requests):
        scaled = max(4, -(-r.input_tokens * bs // spec.block_tokens))
        prompt = min(scaled, profile.max_prompt)
        wanted = max(1, math.ceil(r.output_tokens * spec.output_scale))
        output = min(wanted, profile.max_output)
        prompts_clipped += prompt != scaled
        outputs_clipped += output != wanted
        hashes = list(r.hash_ids[: prompt // bs])
        family, shared = -1, 0
        if hashes:
            chain = chains.setdefault(hashes[0], list(hashes))
            family = roots.setdefault(hashes[0], len(roots))
            common = 0
            while common < min(len(chain), len(hashes)) and chain[common] == hashes[common]:
                common += 1
            if common == len(chain):
                chain.extend(hashes[common:])
                common = len(hashes)
            shared = min(prompt, common * bs)
        priority = rng.randint(0, 2) if engine["policy"] == "priority" else 0
        stop = rng.randrange(output) if rng.random() < 0.25 else -1
        arrival = int((r.arrival_us - first) * spec.time_scale) // STEP_US
        abort = arrival + rng.randint(0, 12) if rng.random() < 0.12 else -1
        requests.append(
            Request(rid, arrival, prompt, output, family, shared, priority, stop, abort)
        )
    num_blocks = _cache(rng, profile, engine, requests)
    scales: tuple[tuple[str, float], ...] = (
        ("time_scale", spec.time_scale),
        ("step_us", STEP_US),
        ("trace_tokens_per_token", spec.block_tokens / bs),
        ("max_prompt", profile.max_prompt),
        ("prompts_clipped", prompts_clipped),
        ("output_scale", spec.output_scale),
        ("max_output", profile.max_output),
        ("outputs_clipped", outputs_clipped),
    )
    return VllmScenario(
        profile.name,
        seed,
        num_blocks=num_blocks,
        accept=rng.choice((0, 50, 80, 100)),
        requests=tuple(requests),
        workload=window.origin(scales),
        **engine,
    )
