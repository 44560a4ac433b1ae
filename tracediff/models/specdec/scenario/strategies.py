"""Hypothesis strategies for scenarios, for property tests of any scheduler implementation.

They describe data and nothing else (running, shrinking and storing examples is
Hypothesis's business). Every value they produce is a valid :class:`Scenario`
(``validate()`` passes), kept small so that a property test drives dozens of them in
seconds: few requests, short generations, short prompts. Within that, every concept of the
model can appear: host, device and mixed allocation, rect and ragged ("mixed graphs")
candidates with eager shapes, queue depths 0 to 2, and requests with grammar caps, host
stops, fixed widths, stop strings and both proposers. Shrinking heads towards one plain
``mtp`` request on the default parameters.

Use them in your own tests::

    from hypothesis import given, settings
    from tracediff.models.specdec.scenario.strategies import scenarios

    @settings(max_examples=50, deadline=None)
    @given(scenarios(max_requests=6))
    def test_my_scheduler_retires_everything(scenario): ...
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from hypothesis import strategies as st

from tracediff.models.specdec.scenario.model import (
    ALLOCATIONS,
    MAX_DRAFT,
    PROPOSERS,
    RAGGED,
    RECT,
    EngineTruth,
    RequestSpec,
    Scenario,
    SchedulerParams,
)

__all__ = ["engine_truths", "request_specs", "scenarios", "scheduler_params"]

_DEFAULTS = SchedulerParams()
_BATCH_BUCKETS = _DEFAULTS.batch_buckets
_TOKEN_BUCKETS = _DEFAULTS.token_buckets

# Strategies are built once and reused: building one per draw (and Hypothesis validating
# each new one) costs more than drawing from it.
# Generation-scale probabilities and rates: exact binary fractions keep examples readable.
_UNIT = st.sampled_from([0.0, 0.125, 0.25, 0.5, 0.75, 0.875, 1.0])
_BOOLEANS = st.booleans()
_PROPOSERS = st.sampled_from(PROPOSERS)
_ALLOCATIONS = st.sampled_from(ALLOCATIONS)


@functools.lru_cache(maxsize=1024)
def _integers(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


@functools.lru_cache(maxsize=1024)
def _maybe(low: int, high: int, absent: int = -1) -> st.SearchStrategy[int]:
    """``absent`` (what shrinking heads for) or an integer in [low, high]."""
    return st.one_of(st.just(absent), st.integers(low, high))


def _draw_request(
    draw: st.DrawFn,
    request_id: int,
    max_new: int,
    prompt_len: int,
    arrival_window_us: int,
) -> RequestSpec:
    new = draw(_integers(1, max(1, max_new)))
    return RequestSpec(
        id=request_id,
        arrival_us=draw(_maybe(0, max(0, arrival_window_us), absent=0)),
        prompt_len=draw(_integers(1, max(1, prompt_len))),
        max_new=new,
        proposer=draw(_PROPOSERS),
        grammar_cap=draw(_maybe(0, 3)),
        host_stop=draw(_BOOLEANS),
        fixed_width=draw(_maybe(0, MAX_DRAFT)),
        # Also past max_new (the stop never lands) and 0 (the first round stops).
        stop_at=draw(_maybe(0, new + 4)),
        accept_base=draw(_UNIT),
        accept_decay=draw(_UNIT),
    )


@st.composite
def request_specs(
    draw: st.DrawFn,
    *,
    request_id: int | None = None,
    max_new: int = 40,
    prompt_len: int = 1200,
    arrival_window_us: int = 200_000,
) -> RequestSpec:
    """One request, every feature possible: proposer, grammar cap, host stop, fixed width,
    stop position and true acceptance.

    ``max_new``, ``prompt_len`` and ``arrival_window_us`` are upper bounds of the draws;
    ``request_id`` fixes the id (else one of 0..1000 is drawn).
    """
    rid = draw(_integers(0, 1000)) if request_id is None else request_id
    return _draw_request(draw, rid, max_new, prompt_len, arrival_window_us)


@functools.lru_cache(maxsize=256)
def _eager_shapes(
    batch_buckets: tuple[int, ...], token_buckets: tuple[int, ...]
) -> st.SearchStrategy[tuple[tuple[int, int, int], ...]]:
    shapes = [(RECT, b, w) for b in batch_buckets for w in range(MAX_DRAFT + 1)]
    shapes += [(RAGGED, b, t) for b in batch_buckets for t in token_buckets]
    return st.lists(st.sampled_from(shapes), max_size=12, unique=True).map(
        lambda chosen: tuple(sorted(chosen))
    )


@functools.lru_cache(maxsize=64)
def _subsets(values: tuple[int, ...]) -> st.SearchStrategy[list[int]]:
    return st.lists(st.sampled_from(values), unique=True)


def _draw_buckets(draw: st.DrawFn, values: tuple[int, ...]) -> tuple[int, ...]:
    """``values`` themselves (what shrinking heads for) or a strictly increasing subset."""
    if draw(_BOOLEANS):
        return values
    top = draw(st.sampled_from(values))
    below = tuple(v for v in values if v < top)
    chosen = draw(_subsets(below)) if below else []
    return tuple(sorted({top, *chosen}))


def _choice(default: Any, *others: Any) -> st.SearchStrategy[Any]:
    return st.sampled_from([default, *others])


_PARAM_CHOICES: dict[str, st.SearchStrategy[Any]] = {
    "alpha": _choice(_DEFAULTS.alpha, 0.0, 0.3, 0.9, 1.0),
    "prior_weight": _choice(_DEFAULTS.prior_weight, 0.5, 1.0, 16.0),
    "probe_rate": _choice(_DEFAULTS.probe_rate, 0.0, 0.25, 1.0),
    "credit_cap": _choice(_DEFAULTS.credit_cap, 0.0, 0.5, 8.0),
    "probe_min_trials": _choice(_DEFAULTS.probe_min_trials, 0, 1, 64),
    "refresh_period_us": _choice(_DEFAULTS.refresh_period_us, 1, 20_000, 10_000_000),
    "refresh_tolerance": _choice(_DEFAULTS.refresh_tolerance, 0.0, 0.5),
    "prefill_chunk": _choice(_DEFAULTS.prefill_chunk, 128, 4096),
    # coarse clocks and a cost proportional to tokens make exact value ties (tie-breaks)
    "duration_quantum_us": _choice(_DEFAULTS.duration_quantum_us, 1_000, 4_000),
    "base_us": _choice(_DEFAULTS.base_us, 0),
    "lane_us": _choice(_DEFAULTS.lane_us, 0),
}
_VERIFY_BUDGET = _maybe(1, 160, absent=_DEFAULTS.verify_budget)


@st.composite
def scheduler_params(
    draw: st.DrawFn,
    *,
    allocation: str | None = None,
    ragged: bool | None = None,
    queue_depth: int | None = None,
) -> SchedulerParams:
    """Scheduler knobs around the starting values of docs/scheduler.md (which shrinking returns to).

    Allocation, graph mode and queue depth are drawn unless given. Besides them: small
    verification budgets and lane counts (so budgets bind and requests wait for a slot),
    other bucket sets, eager shapes (ragged scenarios), and probe, refresh, prior and
    prefill-chunk settings.
    """
    buckets = _draw_buckets(draw, _BATCH_BUCKETS)
    tokens = _draw_buckets(draw, _TOKEN_BUCKETS)
    graphs_ragged = draw(_BOOLEANS) if ragged is None else ragged
    return SchedulerParams(
        allocation=draw(_ALLOCATIONS) if allocation is None else allocation,
        ragged=graphs_ragged,
        queue_depth=draw(_integers(0, 2)) if queue_depth is None else queue_depth,
        max_lanes=draw(_maybe(1, buckets[-1], absent=buckets[-1])),
        verify_budget=draw(_VERIFY_BUDGET),
        batch_buckets=buckets,
        token_buckets=tokens,
        eager_shapes=draw(_eager_shapes(buckets, tokens)) if graphs_ragged else (),
        **{name: draw(strategy) for name, strategy in _PARAM_CHOICES.items()},
    )


_TRUTHS = st.builds(
    EngineTruth,
    duration_drift=st.sampled_from([0.15, 0.0, 0.5]),
    duration_noise=st.sampled_from([0.02, 0.0, 0.2]),
    device_truncation=_UNIT,
    copy_match=_UNIT,
    copy_zero_run=_UNIT,
    duration_quantum_us=st.sampled_from([1, 1_000, 4_000]),
    copy_max_offer=st.sampled_from([10, 7, 3]),
)


def engine_truths() -> st.SearchStrategy[EngineTruth]:
    """The simulated engine's hidden truth: drift, noise, truncation and copy behaviour."""
    return _TRUTHS


@functools.lru_cache(maxsize=64)
def _ids(count: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, 1000), min_size=count, max_size=count, unique=True)


_PARAMS = scheduler_params()


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    min_requests: int = 1,
    max_requests: int = 6,
    max_new: int = 40,
    prompt_len: int = 1200,
    arrival_window_us: int = 200_000,
    params: st.SearchStrategy[SchedulerParams] | None = None,
    profile: str = "hypothesis",
) -> Scenario:
    """A small valid scenario: scheduler parameters, engine truth and requests.

    Request ids are distinct but need not be 0..n-1 (an implementation must not assume
    they are), and arrivals may tie. ``params`` replaces the default
    :func:`scheduler_params` strategy, e.g. ``scheduler_params(allocation="mixed")``.
    """
    exact = draw(_EXACT)
    count = draw(_integers(min_requests, max_requests))
    ids = list(range(count))
    if draw(_BOOLEANS):
        ids = draw(_ids(count))
    requests = tuple(
        _draw_request(draw, request_id, max_new, prompt_len, arrival_window_us)
        for request_id in ids
    )
    scenario = Scenario(
        profile=profile,
        seed=draw(_integers(0, 2**31 - 1)),
        params=draw(_PARAMS if params is None else params),
        truth=draw(_TRUTHS),
        requests=requests,
    )
    if exact:
        scenario = _exact(draw, scenario)
    scenario.validate()
    return scenario


# A third of the examples in the exact-floats regime (docs/scheduler.md, "Regimes"): the only
# scenarios where float comparisons (probe funding, the refresh tolerance) meet with equality.
_EXACT = st.sampled_from([False, False, True])
_EXACT_RATES = st.sampled_from([0.0, 0.125, 0.25, 0.5])
_EXACT_CAPS = st.sampled_from([0.5, 1.0, 2.0, 3.0])
_EXACT_TOLERANCES = st.sampled_from([0.0, 0.25, 0.5])


def _exact(draw: st.DrawFn, scenario: Scenario) -> Scenario:
    from tracediff.models.specdec.scenario.generator import EXACT_TOKEN_RATES, exact_floats

    params, truth = exact_floats(
        scenario.params,
        scenario.truth,
        token_us=draw(st.sampled_from(EXACT_TOKEN_RATES)),
        probe_rate=draw(_EXACT_RATES),
        credit_cap=draw(_EXACT_CAPS),
        refresh_tolerance=draw(_EXACT_TOLERANCES),
    )
    requests = tuple(
        dataclasses.replace(r, accept_base=1.0, accept_decay=1.0) for r in scenario.requests
    )
    return dataclasses.replace(scenario, params=params, truth=truth, requests=requests)
