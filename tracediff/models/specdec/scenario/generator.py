"""The seeded scenario generator: (profile, seed) -> Scenario, the same on any machine.

Every draw is a keyed counter-based draw (``rng``), so changing one request's feature
does not reshuffle the others, and adding a field later does not change old scenarios'
existing draws.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from tracediff.models.specdec.scenario import rng
from tracediff.models.specdec.scenario.model import (
    MAX_DRAFT,
    RAGGED,
    RECT,
    EngineTruth,
    RequestSpec,
    Scenario,
    SchedulerParams,
)
from tracediff.models.specdec.scenario.profiles import Generator, Profile, parse_seeds


def _between(seed: int, tag: str, low: float, high: float, *parts: int) -> float:
    return round(low + (high - low) * rng.uniform(seed, tag, *parts), 4)


def generate(profile: Profile, seed: int) -> Scenario:
    """The generated scenario of ``seed`` (a profile with a workload: scenario/workload.py)."""
    requests_n = profile.matrix.cell(seed)[0]
    gen = profile.generator
    params, truth, perfect, exact = scenario_params(profile, seed)
    scale = 1.0 / (1.0 + gen.max_new_decay * math.log2(requests_n))
    low = max(2, int(gen.max_new[0] * scale))
    high = max(low, int(gen.max_new[1] * scale))
    requests: list[RequestSpec] = []
    for i in range(requests_n):
        max_new = rng.randint(seed, "max_new", low, high, i)
        arrival = 0 if i == 0 else rng.randint(seed, "arrival", 0, gen.arrival_window_us, i)
        if i > 0 and rng.chance(seed, "burst", gen.p_burst, i):
            arrival = requests[-1].arrival_us  # arrives with the previous one, as in a burst
        requests.append(
            draw_request(
                seed,
                gen,
                i,
                arrival=arrival,
                prompt_len=rng.randint(seed, "prompt", gen.prompt_len[0], gen.prompt_len[1], i),
                max_new=max_new,
                proposer="copy" if rng.chance(seed, "copy", gen.p_copy, i) else "mtp",
                perfect=perfect_request(seed, gen, i, perfect, exact),
            )
        )
    scenario = Scenario(
        profile=profile.name,
        seed=seed,
        params=params,
        truth=truth,
        requests=tuple(requests),
    )
    scenario.validate()
    return scenario


def scenario_params(profile: Profile, seed: int) -> tuple[SchedulerParams, EngineTruth, bool, bool]:
    """The seed's scheduler parameters and engine truth (its matrix cell, regimes and eager
    shapes), whether some requests get perfect acceptance, and whether the exact-floats
    regime holds (then every request is perfect)."""
    _requests_n, allocation, graphs, queue_depth = profile.matrix.cell(seed)
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
    params, truth, perfect = _regimes(profile, seed, params)
    exact = seed in _exact_floats_seeds(gen.exact_floats_seeds)
    if exact:
        params, truth = _exact_floats(gen, seed, params, truth)
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
    return params, truth, perfect, exact


def perfect_request(seed: int, gen: Generator, i: int, perfect: bool, exact: bool) -> bool:
    """Whether request ``i``'s drafts are always accepted: every request in the exact-floats
    regime, a drawn share of them in the exact regime."""
    return exact or (perfect and rng.chance(seed, "perfect", gen.p_perfect, i))


def draw_request(
    seed: int,
    gen: Generator,
    i: int,
    *,
    arrival: int,
    prompt_len: int,
    max_new: int,
    proposer: str,
    perfect: bool,
) -> RequestSpec:
    """Request ``i`` with the given arrival, lengths and proposer, the rest of it drawn from
    the seed (each draw keyed by its purpose and ``i``, so none depends on another's order).
    ``perfect``: its drafts are always accepted (:func:`perfect_request`)."""
    request = RequestSpec(
        id=i,
        arrival_us=arrival,
        prompt_len=prompt_len,
        max_new=max_new,
        proposer=proposer,
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
    if perfect:
        return dataclasses.replace(request, accept_base=1.0, accept_decay=1.0)
    return request


def _regimes(
    profile: Profile, seed: int, params: SchedulerParams
) -> tuple[SchedulerParams, EngineTruth, bool]:
    """Swarm toggles drawn per seed (each independently): parameters, engine truth, and
    whether some requests get perfect acceptance.

    Real engines produce exact ties (integer µs timings, acceptance estimates from small
    counts); these regimes make them frequent enough that every tie-break and every equality
    boundary of the rules decides in a modest seed set.
    """
    gen = profile.generator
    truth = _truth(seed)
    perfect = False
    if rng.chance(seed, "regime-exact", gen.p_exact):
        # alpha 1.0: a lane's curve is exactly 1.0 until its first rejection, so its value
        # for p drafts is the whole number 1 + p; the truth's copy matches never fail.
        params = dataclasses.replace(params, alpha=1.0)
        truth = dataclasses.replace(truth, copy_match=1.0)
        perfect = True
    if rng.chance(seed, "regime-quantised", gen.p_quantised) and gen.quanta_us:
        quantum = gen.quanta_us[rng.randint(seed, "quantum", 0, len(gen.quanta_us) - 1)]
        periods = (50, 100, 200)
        period_ms = periods[rng.randint(seed, "refresh-period", 0, len(periods) - 1)]
        params = dataclasses.replace(
            params,
            duration_quantum_us=quantum,
            # on a coarse clock, ages are multiples of the quantum: a period that is one too
            # is met exactly, the boundary of the freshness test
            refresh_period_us=-(-period_ms * 1000 // quantum) * quantum,
        )
        truth = dataclasses.replace(truth, duration_quantum_us=quantum, duration_noise=0.0)
    if rng.chance(seed, "regime-linear", gen.p_linear):
        # A prior proportional to the padded tokens: with whole-number expected tokens, every
        # full grid has the same value, so durations and cohorts break the ties.
        rates = (100, 200, 400)
        rate = rates[rng.randint(seed, "linear-rate", 0, len(rates) - 1)]
        params = dataclasses.replace(params, base_us=0, lane_us=0, token_us=rate)
    if rng.chance(seed, "regime-tight", gen.p_tight_budget) and gen.tight_budgets:
        budgets = gen.tight_budgets
        budget = budgets[rng.randint(seed, "tight-budget", 0, len(budgets) - 1)]
        params = dataclasses.replace(params, verify_budget=budget)
    if rng.chance(seed, "regime-slots", gen.p_few_slots) and gen.few_slots:
        slots = gen.few_slots[rng.randint(seed, "few-slots", 0, len(gen.few_slots) - 1)]
        params = dataclasses.replace(params, max_lanes=slots)
    return params, truth, perfect


@functools.lru_cache(maxsize=16)
def _exact_floats_seeds(text: str) -> frozenset[int]:
    return frozenset(parse_seeds(text)) if text else frozenset()


def _exact_floats(
    gen: Generator, seed: int, params: SchedulerParams, truth: EngineTruth
) -> tuple[SchedulerParams, EngineTruth]:
    """The exact-floats regime: every float the rules compare is exact, so comparisons can
    meet with equality (a probe costing exactly the credit, a stale candidate exactly at the
    tolerance), which smooth random floats never do.

    Every draft is accepted (alpha 1.0, every request perfect, copy matches never fail), so
    every estimate is exactly 1.0 and E is a whole number of tokens. The prior's cost is
    proportional to the padded tokens and the engine's cost *is* the prior (a calibrated
    table: no drift, noise, knee, or a different eager penalty), so every duration stays
    the prior's integer and values are ratios of small integers: equal ratios round to
    equal floats. Probe rate, credit cap and tolerance are exact binary fractions drawn
    from values such scenarios reach: probe costs are whole or simple fractions of tokens,
    credit sums of exact steps, and value ratios 1, 1/2 and 3/4 occur between the
    allocations of one cohort.
    """

    def pick(tag: str, values: tuple[Any, ...]) -> Any:
        return values[rng.randint(seed, tag, 0, len(values) - 1)]

    return exact_floats(
        params,
        truth,
        token_us=pick("exact-rate", EXACT_TOKEN_RATES),
        probe_rate=float(pick("exact-probe-rate", gen.exact_probe_rates)),
        credit_cap=float(pick("exact-credit-cap", gen.exact_credit_caps)),
        refresh_tolerance=float(pick("exact-tolerance", gen.exact_tolerances)),
    )


EXACT_TOKEN_RATES = (100, 200, 400)  # µs per padded token of the exact-floats regime


def exact_floats(
    params: SchedulerParams,
    truth: EngineTruth,
    *,
    token_us: int,
    probe_rate: float,
    credit_cap: float,
    refresh_tolerance: float,
) -> tuple[SchedulerParams, EngineTruth]:
    """``params`` and ``truth`` made exact (see :func:`_exact_floats`); the requests must be
    made perfect too (``accept_base = accept_decay = 1.0``). ``fuzz`` draws it as well."""
    params = dataclasses.replace(
        params,
        alpha=1.0,
        base_us=0,
        lane_us=0,
        token_us=token_us,
        duration_quantum_us=1,
        probe_rate=probe_rate,
        credit_cap=credit_cap,
        refresh_tolerance=refresh_tolerance,
    )
    truth = dataclasses.replace(
        truth,
        copy_match=1.0,
        true_base_us=0,
        true_lane_us=0,
        true_token_us=token_us,
        knee_factor=1.0,
        duration_drift=0.0,
        duration_noise=0.0,
        duration_quantum_us=1,
        true_eager_penalty_us=params.eager_penalty_us,
    )
    return params, truth


def _truth(seed: int) -> EngineTruth:
    """The engine's own cost model: the prior's shape with coefficients off by up to 25 %."""
    base = EngineTruth()
    return dataclasses.replace(
        base,
        true_base_us=int(base.true_base_us * _between(seed, "true-base", 0.8, 1.25)),
        true_lane_us=int(base.true_lane_us * _between(seed, "true-lane", 0.75, 1.3)),
        true_token_us=int(base.true_token_us * _between(seed, "true-token", 0.75, 1.3)),
        knee_tokens=rng.randint(seed, "knee", 48, 160),
        true_eager_penalty_us=rng.randint(seed, "true-eager", 1_500, 4_500),
    )
