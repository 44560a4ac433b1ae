"""The [fixed] formulas of docs/scheduler.md, in one place that every implementation imports.

Bit-identical traces depend on the same floating-point operations in the same order, so
the arithmetic lives here and nowhere else; implementations differ only in how often they
call these functions. Every summation is an explicit left-to-right loop: ``sum()``,
``math.fsum`` or numpy would group differently and change the last bits.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Sequence

from tracediff.models.specdec.scenario.model import MAX_DRAFT, SchedulerParams

# The round kinds are defined with the scenario's graph shapes; re-exported for the rules.
from tracediff.models.specdec.scenario.model import RAGGED as RAGGED
from tracediff.models.specdec.scenario.model import RECT as RECT

KIND_NAMES = ("rect", "ragged")


def survival_curve(
    trials: Sequence[int], accepts: Sequence[int], alpha: float, prior_weight: float
) -> list[float]:
    """Monotone prefix survival s_1..s_7 (index 0 is s_1).

    ``trials``/``accepts`` are indexed by depth k = 1..7 at positions 0..6.
    """
    curve: list[float] = []
    power = 1.0
    previous = 1.0
    for k in range(MAX_DRAFT):
        power = power * alpha
        estimate = (accepts[k] + prior_weight * power) / (trials[k] + prior_weight)
        previous = estimate if estimate < previous else previous
        curve.append(previous)
    return curve


def lane_value(curve: Sequence[float], prefix: int) -> float:
    """Expected tokens of one lane verifying ``prefix`` drafts: 1 + s_1 + ... + s_p."""
    value = 1.0
    for k in range(prefix):
        value = value + curve[k]
    return value


def prefix_sums(curve: Sequence[float]) -> list[float]:
    """lane_value(curve, p) for p = 0..7, built by the same left-to-right additions."""
    sums = [1.0]
    value = 1.0
    for k in range(MAX_DRAFT):
        value = value + curve[k]
        sums.append(value)
    return sums


def expected_tokens(lane_values: Sequence[float]) -> float:
    """E of a round: lane values summed over the cohort in priority order."""
    total = 0.0
    for value in lane_values:
        total = total + value
    return total


def running_expected_tokens(lane_values: Sequence[float]) -> list[float]:
    """``expected_tokens(lane_values[:n])`` for n = 0..len: the same left-to-right additions
    from 0.0, each partial total kept (so entry n has the bits of the cohort of n lanes)."""
    return list(itertools.accumulate(lane_values, operator.add, initial=0.0))


def bucket(buckets: Sequence[int], size: int) -> int:
    """The smallest bucket >= size; callers guarantee one exists."""
    return buckets[bisect.bisect_left(buckets, size)]


def cohort_sizes(params: SchedulerParams, eligible: int) -> list[int]:
    """Cohort sizes tried: the batch buckets below the eligible count, then the count.

    Capped by the verification budget (a cohort never holds more lanes than the budget
    has tokens) and by the largest batch bucket.
    """
    limit = min(eligible, params.verify_budget, params.batch_buckets[-1])
    sizes = [b for b in params.batch_buckets if b < limit]
    if limit > 0:
        sizes.append(limit)
    return sizes


def prior_duration(params: SchedulerParams, kind: int, b_pad: int, width: int) -> int:
    """The packed round table's prior estimate (µs) of a shape before any observation.

    ``width`` is W for rect shapes (a full B×(W+1) grid) and Q_pad for ragged ones.
    Shapes that are not captured run eager and pay a penalty.
    """
    tokens = b_pad * (width + 1) if kind == RECT else width
    estimate = params.base_us + params.lane_us * b_pad + params.token_us * tokens
    if (kind, b_pad, width) in params.eager_shapes:
        estimate += params.eager_penalty_us
    return quantised(estimate, params.duration_quantum_us)


def quantised(duration: int, quantum: int) -> int:
    """``duration`` rounded up to a multiple of ``quantum`` (integer µs)."""
    return -(-duration // quantum) * quantum


def prefill_cost(params: SchedulerParams, chunk_tokens: int) -> int:
    """Duration (µs) a prefill row of ``chunk_tokens`` adds to a round."""
    return params.prefill_base_us + params.prefill_token_us * chunk_tokens


def prefill_bonus(params: SchedulerParams, waited_us: int) -> float:
    """Expected-token bonus of a prefill row that has waited ``waited_us`` (never starves)."""
    bonus = waited_us / params.prefill_bonus_period_us
    return bonus if bonus < params.prefill_bonus_cap else params.prefill_bonus_cap


def candidate_value(expected: float, bonus: float, duration: int) -> float:
    """A candidate's value: (E + prefill bonus) per µs."""
    return (expected + bonus) / duration


def service_rate(lane_expected: float, duration: int) -> float:
    """Tokens per second of one lane in a round of ``duration`` µs."""
    return lane_expected / duration * 1e6


def probe_cost(e_winner: float, d_winner: int, e_probe: float, d_probe: int) -> float:
    """What an acceptance probe costs in expected tokens, scaled to the winner's duration."""
    return (e_winner * d_probe) / d_winner - e_probe


def accrue_credit(params: SchedulerParams, credit: float, e_winner: float) -> float:
    accrued = credit + params.probe_rate * e_winner
    return accrued if accrued < params.credit_cap else params.credit_cap


def updated_estimate(estimate: int, observed: int) -> int:
    """The table's integer update after observing a shape: est + (observed - est) // 4."""
    return estimate + (observed - estimate) // 4


def dominates(
    expected_y: float,
    duration_y: int,
    shape_y: tuple[int, int, int],
    expected_x: float,
    duration_x: int,
    shape_x: tuple[int, int, int],
) -> bool:
    """Padding pruning: does candidate Y dominate X (same kind, cohort and prefill row)?

    ``shape`` is (b_pad, width used, width bound): among equal (E, d) the smaller shape
    wins, and the bound breaks ties between identical allocations.
    """
    if expected_y < expected_x or duration_y > duration_x:
        return False
    return expected_y > expected_x or duration_y < duration_x or shape_y < shape_x


def winner_key(
    value: float,
    duration: int,
    cohort: int,
    b_pad: int,
    width: int,
    kind: int,
    prefill: bool,
    candidate_id: int,
) -> tuple[float, int, int, int, int, int, bool, int]:
    """Sort key of the [fixed] winner rule: the smallest key wins.

    Highest value; then smaller duration, larger cohort, smaller B_pad, smaller W or
    Q_pad, rect before ragged, no prefill row first; candidate order last.
    """
    return (-value, duration, -cohort, b_pad, width, kind, prefill, candidate_id)


def probe_gain(added: Sequence[float], removed: Sequence[float]) -> float:
    """dE of an acceptance probe: gains of added slots minus those of removed slots.

    Each list is given in rank order and summed left to right.
    """
    gained = 0.0
    for value in added:
        gained = gained + value
    lost = 0.0
    for value in removed:
        lost = lost + value
    return gained - lost


def slot_rank(survival: float, depth: int, slot: int) -> tuple[float, int, int]:
    """Rank key of the free slot (lane, depth): higher survival, then shallower, lower slot."""
    return (-survival, depth, slot)
