"""Feature coverage: which scheduler features a profile's scenarios really exercise.

A seed set is only as good as what it makes the scheduler do. This module reads one trace's
records (header first, as :func:`tracediff.models.specdec.engine.driver.drive` yields them) and
counts, per feature, how many plan calls exercised it; :func:`tracediff.campaign.clauses.coverage`
does that for every scenario of a profile (through the model's ``trace_coverage`` and
``observed_coverage``), driving the reference, and adds the counts up. A feature no scenario
reaches is a finding: the profile cannot catch a divergence there.

Everything is derived from the records alone (the header's scenario, plan records,
completions and retirements), so the same analysis works on a stored trace of any
implementation. What each feature counts (the *plans* column) is the number of plan calls
that exercised it:

- ``requests N-M``: every plan call of a scenario whose request count lies in the band;
- ``allocation host`` / ``device``: a round with lanes in a scenario of that allocation;
  ``allocation mixed``: a round that holds both a host- and a device-allocated lane;
- ``fixed width``, ``grammar lane``, ``mtp lane``, ``copy lane``: a chosen round with such
  a lane; ``prefill row``: a chosen round with a prefill row; ``prefill-only round``: one
  with a prefill row and no lane;
- ``rect graph`` / ``ragged graph``: the chosen round's kind (rounds with lanes);
  ``eager shape``: the chosen shape is one of the scenario's eager (uncaptured) shapes;
- ``host-stop held back``: a plan call at which a decoding host-stop request, otherwise
  eligible (tokens left after its pending advance), is kept out of the eligible lanes
  because it has a round in flight;
- ``queued round``: a plan call made while at least one round is already in flight;
  ``two rounds queued``: while two are (only queue depth 2 allows it);
- ``pruned candidates``: a plan call that pruned at least one candidate;
- ``acceptance probe`` / ``refresh probe``: the chosen round's source is ``probe`` /
  ``refresh``; ``no round``: a plan call that returned no round;
- ``retirement`` and ``device truncation`` are seen at completions and counted against the
  plan whose round completed: a completion that retired a request, and one in which a
  device lane verified fewer drafts than its ceiling (the device truncated, or a copy
  proposer offered fewer);
- ``round lanes N-M``: a chosen round with that many lanes. These are reported but not
  required (``INFORMATIONAL``): they show how large the batches a profile produces really
  are, which the request count alone does not say.

Rule coverage goes one step further: features say what the scenarios *contain*, clauses
say which condition of each [fixed] rule *decided* something
(:mod:`tracediff.models.specdec.sched.clauses` lists them;
:class:`tracediff.models.specdec.sched.decided.DecidingReference` observes the reference). A
clause is counted per plan (per completion for the completion rules) in which it decided.

A report is *complete* when every required feature was exercised, and every required clause
decided, in at least one scenario.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.clauses import NAMES as CLAUSE_NAMES
from tracediff.models.specdec.sched.core import DEVICE, HOST
from tracediff.models.specdec.sched.formulas import RECT
from tracediff.models.specdec.sched.record import COLUMNS, SOURCE_PROBE, SOURCE_REFRESH, rows_view

BANDS: tuple[tuple[int, int], ...] = ((1, 1), (2, 4), (5, 8), (9, 16), (17, 32), (33, 64))


def band_name(low: int, high: int, what: str = "requests") -> str:
    return f"{what} {low}" if low == high else f"{what} {low}-{high}"


FEATURES: tuple[str, ...] = (
    *(band_name(low, high) for low, high in BANDS),
    "allocation host",
    "allocation device",
    "allocation mixed",
    "rect graph",
    "ragged graph",
    "eager shape",
    "fixed width",
    "grammar lane",
    "mtp lane",
    "copy lane",
    "host-stop held back",
    "queued round",
    "two rounds queued",
    "prefill row",
    "prefill-only round",
    "pruned candidates",
    "acceptance probe",
    "refresh probe",
    "no round",
    "retirement",
    "device truncation",
    *(band_name(low, high, "round lanes") for low, high in BANDS),
)

# Reported but not required: a profile that never reaches them is not (yet) a failure.
# Round sizes are what the scheduler makes of a scenario, not what the profile asks for, and
# in the model as built the bounded prefill bonus keeps rounds below about 24 lanes (see
# docs/scheduler.md), so no shipped profile reaches the top band.
INFORMATIONAL: frozenset[str] = frozenset(
    band_name(low, high, "round lanes") for low, high in BANDS
)


def _column(table: str) -> dict[str, int]:
    return {name: i for i, name in enumerate(COLUMNS[table])}


_ELIGIBLE = _column("eligible")
_ROUND = _column("round")
_LANE = _column("lanes")


@dataclass
class _Request:
    max_new: int
    prompt_len: int
    proposer: str
    grammar: bool
    host_stop: bool
    fixed: bool
    prefilled: int = 0
    generated: int = 0
    draining: bool = False


@dataclass
class _Tracker:
    """Follows one trace's records and counts, per feature, the plans that exercised it."""

    allocation: str
    eager_shapes: frozenset[tuple[int, int, int]]
    requests: dict[int, _Request]
    band: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FEATURES, 0))
    # plan number -> its round's lanes [(request, prefix, alloc)], prefill request and tokens
    in_flight: dict[int, tuple[list[tuple[int, int, int]], int, int]] = field(default_factory=dict)
    plans: int = 0

    @classmethod
    def from_header(cls, header: dict[str, Any]) -> _Tracker:
        scenario = header["scenario"]
        params = scenario["params"]
        requests = {
            int(r["id"]): _Request(
                max_new=int(r["max_new"]),
                prompt_len=int(r["prompt_len"]),
                proposer=str(r["proposer"]),
                grammar=int(r["grammar_cap"]) >= 0,
                host_stop=bool(r["host_stop"]),
                fixed=int(r["fixed_width"]) >= 0,
            )
            for r in scenario["requests"]
        }
        return cls(
            allocation=str(params["allocation"]),
            eager_shapes=frozenset(
                (int(k), int(b), int(w)) for k, b, w in params.get("eager_shapes", ())
            ),
            requests=requests,
            band=_band_of(len(requests)),
        )

    def feed(self, record: dict[str, Any]) -> None:
        kind = record.get("t")
        if kind == "plan":
            self._plan(rows_view(record))
        elif kind == "completion":
            self._completion(record)
        elif kind == "retire":
            self._retire(record)

    def _hit(self, feature: str) -> None:
        self.counts[feature] += 1

    def _plan(self, record: dict[str, Any]) -> None:
        self.plans += 1
        self._hit(self.band)
        if self.in_flight:
            self._hit("queued round")
        if len(self.in_flight) >= 2:
            self._hit("two rounds queued")
        eligible = {row[_ELIGIBLE["request"]] for row in record["eligible"]}
        if any(
            self._held_back(rid, state)
            for rid, state in self.requests.items()
            if rid not in eligible
        ):
            self._hit("host-stop held back")
        if record["pruned"]:
            self._hit("pruned candidates")
        round_ = record["round"]
        if round_ is None:
            self._hit("no round")
            return
        source = round_[_ROUND["source"]]
        if source == SOURCE_PROBE:
            self._hit("acceptance probe")
        elif source == SOURCE_REFRESH:
            self._hit("refresh probe")
        lanes = [
            (lane[_LANE["request"]], lane[_LANE["prefix"]], lane[_LANE["alloc"]])
            for lane in round_[_ROUND["lanes"]]
        ]
        prefill_request = round_[_ROUND["prefill_request"]]
        prefill_tokens = round_[_ROUND["prefill_tokens"]]
        self.in_flight[record["plan"]] = (lanes, prefill_request, prefill_tokens)
        if prefill_request >= 0:
            self._hit("prefill row" if lanes else "prefill-only round")
        if not lanes:
            return
        shape = (round_[_ROUND["kind"]], round_[_ROUND["b_pad"]], round_[_ROUND["width"]])
        self._hit("rect graph" if shape[0] == RECT else "ragged graph")
        self._hit(_band_of(len(lanes), "round lanes"))
        if shape in self.eager_shapes:
            self._hit("eager shape")
        allocs = {alloc for _request, _prefix, alloc in lanes}
        if self.allocation == "mixed":
            if allocs == {HOST, DEVICE}:
                self._hit("allocation mixed")
        else:
            self._hit(f"allocation {self.allocation}")
        specs = [self.requests[request] for request, _prefix, _alloc in lanes]
        for feature, present in (
            ("fixed width", any(s.fixed for s in specs)),
            ("grammar lane", any(s.grammar for s in specs)),
            ("mtp lane", any(s.proposer == "mtp" for s in specs)),
            ("copy lane", any(s.proposer == "copy" for s in specs)),
        ):
            if present:
                self._hit(feature)

    def _held_back(self, request_id: int, state: _Request) -> bool:
        if not state.host_stop or state.draining or state.prefilled < state.prompt_len:
            return False
        rounds = 0
        advance = 0
        for lanes, _prefill, _tokens in self.in_flight.values():
            for request, prefix, _alloc in lanes:
                if request == request_id:
                    rounds += 1
                    advance += 1 + prefix
        return rounds > 0 and state.max_new - state.generated - advance >= 1

    def _completion(self, record: dict[str, Any]) -> None:
        plan = record["round"]
        lanes, prefill_request, prefill_tokens = self.in_flight.pop(plan)
        truncated = False
        for (request, prefix, alloc), result in zip(lanes, record["lanes"], strict=True):
            _request, verified, _accepted, tokens, finished, _offer = result
            state = self.requests[request]
            state.generated += tokens
            if finished or state.generated >= state.max_new:
                state.draining = True
            if alloc == DEVICE and verified < prefix:
                truncated = True
        if truncated:
            self._hit("device truncation")
        if prefill_request >= 0:
            self.requests[prefill_request].prefilled += prefill_tokens

    def _retire(self, record: dict[str, Any]) -> None:
        # The driver yields a retirement right after the completion that caused it.
        if record["requests"]:
            self._hit("retirement")


def _band_of(count: int, what: str = "requests") -> str:
    for low, high in BANDS:
        if low <= count <= high:
            return band_name(low, high, what)
    return band_name(*(BANDS[-1] if count > BANDS[-1][1] else BANDS[0]), what)


@dataclass(frozen=True)
class TraceCoverage:
    """One trace's analysis: its plan calls and, per feature, the plans that exercised it."""

    plans: int
    counts: dict[str, int]


def analyse_trace(records: Iterable[dict[str, Any]]) -> TraceCoverage:
    """Follow one trace's records (header first) and count features per plan call."""
    iterator = iter(records)
    header = next(iterator, None)
    if not isinstance(header, dict) or "scenario" not in header:
        raise ValueError("a trace's records must start with its header (with the scenario)")
    tracker = _Tracker.from_header(header)
    for record in iterator:
        tracker.feed(record)
    return TraceCoverage(tracker.plans, dict(tracker.counts))


def feature_counts(records: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Per feature (every name of ``FEATURES``, in that order), the plans of one trace that
    exercised it; 0 for a feature the trace never reached."""
    return analyse_trace(records).counts


# -- the model's coverage members (tracediff.model.DecisionModel) ------------------------------
def trace_coverage(records: Iterable[dict[str, Any]]) -> tuple[int, tuple[int, ...]]:
    """One trace's plan calls and, per name of ``FEATURES`` in order, the plans that
    exercised it."""
    result = analyse_trace(records)
    return result.plans, tuple(result.counts[name] for name in FEATURES)


def observed_coverage(
    scenario: Scenario, impl: str, private_copy: Callable[[Scenario], Scenario]
) -> tuple[int, tuple[int, ...], tuple[int, ...]] | None:
    """With the reference, drive the observed reference
    (:class:`~tracediff.models.specdec.sched.decided.DecidingReference`) and the driver each
    on a ``private_copy`` of the scenario: its plans, feature counts and, per clause of
    :data:`~tracediff.models.specdec.sched.clauses.CLAUSES`, the plans it decided in. None
    for any other implementation (its trace is read instead)."""
    if impl != "reference":
        return None
    from tracediff.models.specdec.engine.driver import drive
    from tracediff.models.specdec.sched.decided import DecidingReference

    observed = DecidingReference(private_copy(scenario))
    plans, counts = trace_coverage(drive(private_copy(scenario), observed))
    return plans, counts, tuple(observed.decided[name] for name in CLAUSE_NAMES)
