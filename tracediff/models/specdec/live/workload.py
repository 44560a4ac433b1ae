"""What a live run serves: the scenario (for the scheduler) and the prompts (for the model).

Both come from one seed through the scenario package's keyed draws, so ``--requests N --seed
S`` always asks the same questions; what the answers cost is measured live. Prompts are
phrases of a seeded word list, with phrases repeated so that the ``copy`` proposer finds
n-grams to look up from the first round on.

The scenario is an ordinary :class:`~tracediff.models.specdec.scenario.model.Scenario` (profile
``live``):
its requests carry the real prompt lengths, and its ``truth`` fields, which only the
simulator reads, keep their defaults. Stops are real: a host-stop request stops at the first
generated occurrence of its stop byte, checked on the host after each round, so its
``stop_at`` is -1 (nobody knows in advance where the stop lands).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tracediff.models.specdec.scenario import rng
from tracediff.models.specdec.scenario.model import (
    MAX_DRAFT,
    RequestSpec,
    Scenario,
    SchedulerParams,
)

PROFILE = "live"
RECT, RAGGED = 0, 1
STOP_BYTES = b"aeiou"  # common in the model's text, so stops land in some requests


@dataclass(frozen=True)
class WorkloadOptions:
    """The knobs of a live run's workload (the model's are in ``ModelConfig``)."""

    requests: int = 8
    seed: int = 0
    allocation: str = "device"
    ragged: bool = False
    queue_depth: int = 1
    max_new: tuple[int, int] = (24, 64)
    arrival_spread_us: int = 20_000  # arrivals are uniform over this window
    copy_share: float = 0.4
    grammar_share: float = 0.15
    host_stop_share: float = 0.15
    fixed_share: float = 0.1
    eager_share: float = 0.25  # mixed graphs: the share of shapes that are not captured


@dataclass(frozen=True)
class Workload:
    scenario: Scenario
    prompts: tuple[bytes, ...]  # by request id
    stops: tuple[int, ...]  # stop byte by request id, -1 for none

    @property
    def max_context(self) -> int:
        return max(r.prompt_len + r.max_new for r in self.scenario.requests)


def _words(seed: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = []
    for index in range(24):
        size = rng.randint(seed, "word-size", 2, 6, index)
        words.append(
            "".join(letters[rng.randint(seed, "letter", 0, 25, index, k)] for k in range(size))
        )
    return words


def make_prompt(seed: int, request: int) -> bytes:
    """A prompt of 3..6 phrases, each drawn from a pool of three, so phrases repeat."""
    words = _words(seed)
    pool = []
    for phrase in range(3):
        size = rng.randint(seed, "phrase-size", 2, 4, request, phrase)
        pool.append(
            " ".join(
                words[rng.randint(seed, "word", 0, len(words) - 1, request, phrase, k)]
                for k in range(size)
            )
        )
    count = rng.randint(seed, "phrases", 3, 6, request)
    phrases = [pool[rng.randint(seed, "pick", 0, 2, request, k)] for k in range(count)]
    return (". ".join(phrases) + ". ").encode("ascii")


def build(options: WorkloadOptions) -> Workload:
    """The scenario and prompts of a live run; raises ScenarioError on impossible options."""
    seed = options.seed
    requests = []
    prompts = []
    stops = []
    low, high = options.max_new
    for request in range(options.requests):
        prompt = make_prompt(seed, request)
        host_stop = rng.chance(seed, "host-stop", options.host_stop_share, request)
        grammar = rng.chance(seed, "grammar", options.grammar_share, request)
        fixed = rng.chance(seed, "fixed", options.fixed_share, request)
        copy = rng.chance(seed, "copy", options.copy_share, request)
        requests.append(
            RequestSpec(
                id=request,
                arrival_us=rng.randint(seed, "arrival", 0, options.arrival_spread_us, request),
                prompt_len=len(prompt),
                max_new=rng.randint(seed, "max-new", low, high, request),
                proposer="copy" if copy else "mtp",
                grammar_cap=rng.randint(seed, "grammar-cap", 1, 3, request) if grammar else -1,
                host_stop=host_stop,
                fixed_width=rng.randint(seed, "fixed-width", 1, MAX_DRAFT, request)
                if fixed
                else -1,
                stop_at=-1,
            )
        )
        prompts.append(prompt)
        stop = STOP_BYTES[rng.randint(seed, "stop", 0, len(STOP_BYTES) - 1, request)]
        stops.append(stop if host_stop else -1)
    params = SchedulerParams(
        allocation=options.allocation,
        ragged=options.ragged,
        queue_depth=options.queue_depth,
        max_lanes=min(64, max(1, options.requests)),
        prefill_chunk=64,
    )
    if options.ragged:
        # Mixed graphs: some shapes are not captured and run eagerly (on CUDA), as in the
        # generator's mixed-graphs scenarios; the scheduler's prior charges them a penalty.
        eager = [
            (kind, b_pad, width)
            for kind, b_pad, width in round_shapes(params)
            if rng.chance(seed, "eager", options.eager_share, kind, b_pad, width)
        ]
        params = dataclasses.replace(params, eager_shapes=tuple(eager))
    scenario = Scenario(profile=PROFILE, seed=seed, params=params, requests=tuple(requests))
    scenario.validate()
    return Workload(scenario=scenario, prompts=tuple(prompts), stops=tuple(stops))


def round_shapes(params: SchedulerParams) -> list[tuple[int, int, int]]:
    """Every lane-carrying shape (kind, b_pad, W or Q_pad) rounds can take under ``params``."""
    top = next((b for b in params.batch_buckets if b >= params.max_lanes), params.max_lanes)
    buckets = [b for b in params.batch_buckets if b <= top]
    shapes = [(RECT, b, w) for b in buckets for w in range(MAX_DRAFT + 1)]
    shapes += [(RAGGED, b, t) for b in buckets for t in params.token_buckets if t >= b]
    return shapes
