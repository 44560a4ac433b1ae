"""The Scenario data type: everything a run needs, frozen and serialisable.

A scenario is the whole input of one run: the scheduler's parameters, the simulated
engine's hidden truth and the requests. It goes into the trace header in full, so a trace
replays without the generator, and it round-trips through ``to_dict``/``from_dict``.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tracediff.errors import ScenarioError
from tracediff.models.specdec.scenario.fields import FieldError, fields_of
from tracediff.workload import WorkloadOrigin

ALLOCATIONS = ("host", "device", "mixed")
PROPOSERS = ("mtp", "copy")
MAX_DRAFT = 7
# The two kinds of verification round, as a scenario's eager graph shapes name them
# ``(kind, b_pad, width-or-tokens)``; the scheduler's formulas use the same numbers.
RECT = 0
RAGGED = 1
# A scenario's documented bounds (docs/profiles.md): request counts 1..64, and no request
# generating or prompting more than MAX_TOKENS tokens (the largest profile: 600 and 4096;
# bench's cells: 10**6, so that no request finishes while it is timed). Checked before any
# work, so a forged scenario cannot make a reader run for minutes.
MAX_REQUESTS = 64
MAX_SEED = 2**53 - 1  # seeds as the profiles' seed sets allow them
MAX_TOKENS = 1_000_000


@dataclass(frozen=True)
class RequestSpec:
    """One generation request as it arrives, plus the engine's hidden truth about it."""

    id: int
    arrival_us: int
    prompt_len: int
    max_new: int
    proposer: str = "mtp"
    grammar_cap: int = -1  # -1: no grammar; 0..3: grammar lane with this draft cap
    host_stop: bool = False
    fixed_width: int = -1  # -1: ranked; 0..7: pinned draft count
    stop_at: int = -1  # -1: no stop; else the generated count at which a stop string lands
    accept_base: float = 0.7  # truth: conditional acceptance at depth 1
    accept_decay: float = 0.9  # truth (mtp): conditional acceptance shrinks by this per depth

    @property
    def grammar(self) -> bool:
        return self.grammar_cap >= 0

    @property
    def fixed(self) -> bool:
        return self.fixed_width >= 0


@dataclass(frozen=True)
class SchedulerParams:
    """The scheduler's knobs; the starting values of docs/scheduler.md are the defaults."""

    allocation: str = "device"
    ragged: bool = False  # "mixed graphs": ragged candidates and eager shapes
    queue_depth: int = 1
    max_lanes: int = 64
    verify_budget: int = 128
    batch_buckets: tuple[int, ...] = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
    token_buckets: tuple[int, ...] = (8, 16, 24, 32, 48, 64, 96, 128)
    alpha: float = 0.6
    prior_weight: float = 4.0
    probe_rate: float = 0.02
    credit_cap: float = 2.0
    probe_min_trials: int = 8
    refresh_period_us: int = 200_000
    refresh_tolerance: float = 0.05
    prefill_chunk: int = 512
    prefill_bonus_cap: float = 128.0  # expected-token bonus a waiting prefill row can earn
    prefill_bonus_period_us: int = 10_000  # waiting this long earns one token of bonus
    # Prior duration model (µs) of the packed round table.
    base_us: int = 9_000
    lane_us: int = 300
    token_us: int = 40
    eager_penalty_us: int = 2_500
    prefill_base_us: int = 1_500
    prefill_token_us: int = 4
    eager_shapes: tuple[tuple[int, int, int], ...] = ()  # (kind, b_pad, width_or_q_pad)
    # The prior is rounded up to a multiple of this (µs). Real tables hold coarse timings,
    # and coarse durations are what make exact value ties (and so the tie-breaks) reachable.
    duration_quantum_us: int = 1


@dataclass(frozen=True)
class EngineTruth:
    """What the simulated engine knows and the scheduler must learn.

    True round durations come from a cost model of their own (``true_*``), not from the
    scheduler's prior: the table update and the timing probes have something to learn.
    """

    duration_drift: float = 0.15  # each shape's true cost differs from the model by up to this
    duration_noise: float = 0.02  # per-round jitter
    device_truncation: float = 0.25  # chance the device verifies fewer drafts than the ceiling
    copy_match: float = 0.92  # copy proposer's acceptance while it matches
    copy_zero_run: float = 0.3  # chance a broken copy match is followed by a miss run at all
    # True cost model (µs): base + per padded lane + per verified-grid token; tokens past the
    # knee cost ``knee_factor`` times as much; uncaptured shapes pay the true eager penalty.
    true_base_us: int = 9_500
    true_lane_us: int = 260
    true_token_us: int = 44
    knee_tokens: int = 96
    knee_factor: float = 1.5
    true_eager_penalty_us: int = 3_000
    duration_quantum_us: int = 1  # true durations are multiples of this (a coarse clock)
    # Copy proposer: a match spans this many tokens (inclusive range) and offers at most
    # ``copy_max_offer`` drafts at a time; a broken match is followed by a run of rounds that
    # offer nothing, 1..copy_miss_max long.
    copy_span_min: int = 4
    copy_span_max: int = 40
    copy_max_offer: int = 10
    copy_miss_max: int = 4


@dataclass(frozen=True)
class Scenario:
    profile: str
    seed: int
    params: SchedulerParams = field(default_factory=SchedulerParams)
    truth: EngineTruth = field(default_factory=EngineTruth)
    requests: tuple[RequestSpec, ...] = ()
    # where the requests came from when a workload's window made them (docs/workloads.md);
    # None for a generated scenario, whose dict then has no "workload" key at all
    workload: WorkloadOrigin | None = None

    def features(self) -> str:
        """One line naming what this scenario exercises (for reports)."""
        p = self.params
        flags = []
        if any(r.grammar for r in self.requests):
            flags.append("grammar")
        if any(r.host_stop for r in self.requests):
            flags.append("host-stop")
        if any(r.fixed for r in self.requests):
            flags.append("fixed")
        if any(r.proposer == "copy" for r in self.requests):
            flags.append("copy")
        if p.alpha == 1.0:
            flags.append("exact")
        if p.base_us == 0 and p.lane_us == 0:
            flags.append("linear cost")
        if p.duration_quantum_us > 1:
            flags.append(f"quantum {p.duration_quantum_us} us")
        if p.verify_budget < SchedulerParams.verify_budget:
            flags.append(f"budget {p.verify_budget}")
        if p.max_lanes < len(self.requests):
            flags.append(f"{p.max_lanes} slots")
        graphs = "mixed-graphs" if p.ragged else "rect"
        if self.workload is not None:
            w = self.workload
            flags.append(f"workload {w.name}[{w.start}:+{w.length}]")
        return (
            f"{len(self.requests)} request{'' if len(self.requests) == 1 else 's'}, "
            f"{p.allocation} allocation, {graphs}, "
            f"queue {p.queue_depth}" + (", " + ", ".join(flags) if flags else "")
        )

    def to_dict(self) -> dict[str, Any]:
        data = {
            "profile": self.profile,
            "seed": self.seed,
            # params and truth hold numbers, strings, bools and tuples of ints only: the
            # fields read as they are (asdict's deepcopy per field gives the same values)
            "params": {
                k: _plain(v)
                for k, v in zip(_PARAMS_FIELDS, _params_values(self.params), strict=True)
            },
            "truth": dict(zip(_TRUTH_FIELDS, _truth_values(self.truth), strict=True)),
            # every RequestSpec field is a number, string or bool: no copy needed, and the
            # generic dataclasses.asdict (a deepcopy per field) was most of a header's cost
            "requests": [
                dict(zip(_REQUEST_FIELDS, _request_values(r), strict=True)) for r in self.requests
            ],
        }
        if self.workload is not None:
            data["workload"] = self.workload.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: Any) -> Scenario:
        """Rebuild and validate a scenario; raises ScenarioError naming the bad field.

        Scenarios come from files (trace headers, the regression corpus), so every value is
        checked against its field's type before anything uses it (``scenario/fields.py``).
        Keys other than the five fields and ``workload`` are ignored (a saved regression
        carries its note and signature beside them).
        """
        try:
            if not isinstance(data, dict):
                raise FieldError(f"expected an object, got {type(data).__name__}")
            top = {k: v for k, v in data.items() if k in _TOP_KEYS}
            checked = fields_of(_Top, top, "scenario")
            requests_in = data["requests"]
            if not isinstance(requests_in, list):
                raise FieldError(f"requests is {type(requests_in).__name__}, expected a list")
            if len(requests_in) > MAX_REQUESTS:
                # before any work: a forged header of 200,000 requests costs nothing
                raise FieldError(
                    f"requests holds {len(requests_in):,}, more than the {MAX_REQUESTS} a "
                    "scenario may have"
                )
            scenario = cls(
                profile=checked["profile"],
                seed=checked["seed"],
                params=SchedulerParams(**fields_of(SchedulerParams, data["params"], "params")),
                truth=EngineTruth(**fields_of(EngineTruth, data["truth"], "truth")),
                requests=tuple(
                    RequestSpec(**fields_of(RequestSpec, r, f"requests[{i}]"))
                    for i, r in enumerate(requests_in)
                ),
                workload=(
                    WorkloadOrigin.from_dict(data["workload"]) if "workload" in data else None
                ),
            )
        except FieldError as exc:
            raise ScenarioError(f"malformed scenario: {exc}") from None
        scenario.validate()
        return scenario

    def validate(self) -> None:
        p = self.params
        problems = []
        if p.allocation not in ALLOCATIONS:
            problems.append(f"allocation {p.allocation!r} not in {ALLOCATIONS}")
        if p.queue_depth not in (0, 1, 2):
            problems.append(f"queue_depth {p.queue_depth} not in 0..2")
        if not 1 <= p.max_lanes <= max(p.batch_buckets, default=0):
            problems.append(f"max_lanes {p.max_lanes} outside the batch buckets")
        if list(p.batch_buckets) != sorted(set(p.batch_buckets)) or not p.batch_buckets:
            problems.append("batch_buckets must be strictly increasing")
        if list(p.token_buckets) != sorted(set(p.token_buckets)) or not p.token_buckets:
            problems.append("token_buckets must be strictly increasing")
        # Scenarios also come from files: a negative cost, duration or count would send the
        # simulated clock backwards or a loop below zero.
        negative = [
            f"{part}.{f.name}"
            for part, values in (("params", p), ("truth", self.truth))
            for f in dataclasses.fields(values)
            if _below_zero(getattr(values, f.name))
        ]
        if negative:
            problems.append(f"{negative} must not be negative")
        # What the formulas divide by (sched/formulas.py): a zero there is a file that makes
        # every implementation raise, which replay would otherwise report as their fault.
        if not p.prior_weight > 0:
            problems.append("prior_weight must be above 0 (acceptance estimates divide by it)")
        if min(p.batch_buckets, default=1) < 1 or min(p.token_buckets, default=1) < 1:
            problems.append("batch_buckets and token_buckets must be at least 1")
        if p.prefill_bonus_period_us < 1:
            problems.append("prefill_bonus_period_us must be at least 1")
        if p.base_us + p.lane_us + p.token_us < 1:
            problems.append("base_us + lane_us + token_us must be at least 1 (a round costs time)")
        if p.verify_budget < 1:
            problems.append("verify_budget must be at least 1")
        if p.token_buckets and p.token_buckets[0] <= MAX_DRAFT:
            # A ragged shape's Q_pad then always exceeds any rect width (docs/scheduler.md).
            problems.append(f"token_buckets must start above {MAX_DRAFT}")
        if p.duration_quantum_us < 1 or self.truth.duration_quantum_us < 1:
            problems.append("duration_quantum_us must be at least 1")
        if p.prefill_chunk < 1 or p.prefill_base_us < 1 or p.prefill_token_us < 0:
            problems.append("prefill_chunk and prefill_base_us >= 1, prefill_token_us >= 0")
        if p.refresh_period_us < 0 or p.probe_min_trials < 0 or p.credit_cap < 0:
            problems.append("refresh_period_us, probe_min_trials and credit_cap must be >= 0")
        t = self.truth
        if not 1 <= t.copy_span_min <= t.copy_span_max or t.copy_max_offer < 0:
            problems.append("copy spans need 1 <= copy_span_min <= copy_span_max")
        if t.copy_miss_max < 1 or t.knee_tokens < 0 or t.knee_factor < 0:
            problems.append("copy_miss_max >= 1, knee_tokens and knee_factor >= 0")
        if not 0 <= self.seed <= MAX_SEED:
            problems.append(f"seed {self.seed} must be from 0 to {MAX_SEED} (as a profile's)")
        if not self.profile.strip() or any(ch in self.profile for ch in "\x00\n\r"):
            problems.append(f"profile {self.profile[:40]!r} must be a name")
        ids = [r.id for r in self.requests]
        if len(set(ids)) != len(ids):
            problems.append("request ids must be unique")
        for r in self.requests:
            if r.proposer not in PROPOSERS:
                problems.append(f"request {r.id}: proposer {r.proposer!r} not in {PROPOSERS}")
            if r.max_new < 1 or r.prompt_len < 1 or r.arrival_us < 0:
                problems.append(f"request {r.id}: max_new, prompt_len >= 1, arrival_us >= 0")
            if r.max_new > MAX_TOKENS or r.prompt_len > MAX_TOKENS:
                problems.append(
                    f"request {r.id}: max_new and prompt_len must be at most {MAX_TOKENS:,}"
                )
            if not -1 <= r.grammar_cap <= 3:
                problems.append(f"request {r.id}: grammar_cap must be -1..3")
            if not -1 <= r.fixed_width <= MAX_DRAFT:
                problems.append(f"request {r.id}: fixed_width must be -1..{MAX_DRAFT}")
            if not (0.0 <= r.accept_base <= 1.0 and 0.0 <= r.accept_decay <= 1.0):
                problems.append(f"request {r.id}: accept_base/decay must lie in [0, 1]")
        if problems:
            raise ScenarioError(
                f"scenario {self.profile}:{self.seed} is invalid: " + "; ".join(problems)
            )


def _below_zero(value: Any) -> bool:
    """A number below zero, or a tuple (of tuples) holding one."""
    if isinstance(value, tuple):
        return any(_below_zero(item) for item in value)
    return isinstance(value, int | float) and value < 0


@dataclass(frozen=True)
class _Top:
    """The scalar top-level fields of a scenario file, for their checks (the nested ones are
    checked against their own classes)."""

    profile: str
    seed: int
    params: dict[str, Any]
    truth: dict[str, Any]
    requests: list[Any]


_TOP_KEYS = frozenset(f.name for f in dataclasses.fields(_Top))


_REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(RequestSpec))
_request_values = operator.attrgetter(*_REQUEST_FIELDS)
_PARAMS_FIELDS = tuple(f.name for f in dataclasses.fields(SchedulerParams))
_params_values = operator.attrgetter(*_PARAMS_FIELDS)
_TRUTH_FIELDS = tuple(f.name for f in dataclasses.fields(EngineTruth))
_truth_values = operator.attrgetter(*_TRUTH_FIELDS)


def _plain(value: Any) -> Any:
    """Tuples to lists, so a dict compares equal to its msgpack round trip."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


_T = TypeVar("_T")


def private_copy(scenario: Scenario) -> Scenario:
    """A copy of ``scenario`` that shares no object another holder could change: every
    dataclass in it is copied (an implementation may ``object.__setattr__`` a frozen one);
    the rest (numbers, strings, tuples of them) cannot change. Cheaper than ``deepcopy``,
    which matters: the runner makes two per implementation."""
    mine = _clone(scenario)
    object.__setattr__(mine, "params", _clone(scenario.params))
    object.__setattr__(mine, "truth", _clone(scenario.truth))
    object.__setattr__(mine, "requests", tuple(map(_clone, scenario.requests)))
    return mine


def _clone(value: _T) -> _T:
    """A shallow copy of a (frozen) dataclass instance: what ``copy.copy`` makes, without
    its generic ``__reduce_ex__`` round (a scenario of 64 requests is copied twice per
    implementation per run)."""
    twin = object.__new__(type(value))
    twin.__dict__.update(value.__dict__)
    return twin
