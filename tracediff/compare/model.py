"""What comparison produces: divergences, their field changes and context, and whole reports.

These are plain frozen dataclasses with JSON-friendly contents (records are the decoded
trace maps), so a presenter can render them and the JSON presenter can write them and read
them back without knowing how they were found. Nothing here renders or prints.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tracediff.outcomes import Kind, Status, Step

# The kinds of divergence, from the most to the least fundamental (tracediff.outcomes.Kind
# describes each).
STRUCTURE, DECISION, BOOKKEEPING, TYPE = Kind.STRUCTURE, Kind.DECISION, Kind.BOOKKEEPING, Kind.TYPE
VALUE, ROUNDING, ERROR, TIMEOUT = Kind.VALUE, Kind.ROUNDING, Kind.ERROR, Kind.TIMEOUT
KINDS = (STRUCTURE, DECISION, BOOKKEEPING, TYPE, VALUE, ROUNDING, ERROR, TIMEOUT)
# A float change is *rounding* while its relative error stays within this (about 4,500 ULPs
# of a double): summation order or grouping, not a wrong formula or a stale input.
ROUNDING_REL_ERROR = 1e-12

# Scenario outcomes (the runner's statuses).
IDENTICAL, DIVERGED = Status.IDENTICAL, Status.DIVERGED

DEFAULT_CONTEXT = 5  # records before a divergence shown side by side

_INDEX = re.compile(r"\[[^\]]*\]")
_NUMBERED = re.compile(r"^(.*\D) \d+$")  # "plan 12", "after plan 4"


def field_text(segments: tuple[str, ...]) -> str:
    """One path notation everywhere (diff, replay, state, JSON): ``round.lanes[17].prefix``.

    Segments are column or key names, each maybe followed by its index (``lanes[17]``);
    they are joined with dots. The text is plain ASCII for the trace schema's names.
    """
    return ".".join(segments)


def path_text(path: tuple[str, ...]) -> str:
    """A record-first path as text: ``plan 35: candidates[17].expected``."""
    if not path:
        return ""
    head, rest = path[0], path[1:]
    return f"{head}: {field_text(rest)}" if rest else head


def normalise_path(path: tuple[str, ...]) -> str:
    """The path with indices and record numbers elided: ``plan: round.lanes[*].prefix``."""
    parts = []
    for segment in path:
        segment = _INDEX.sub("[*]", segment)
        match = _NUMBERED.match(segment)
        parts.append(match.group(1) if match else segment)
    return path_text(tuple(parts))


@dataclass(frozen=True)
class FieldChange:
    """One leaf that differs between the two records at the divergence.

    ``path`` names the field below the record (``("round", "lanes[17]", "prefix")``); ``a``
    and ``b`` are the two values (``None`` where a side has no such field, see ``kind``).
    ``ulps`` and ``rel_error`` are set for a float that moved.
    """

    path: tuple[str, ...]
    kind: str
    a: Any
    b: Any
    ulps: int | None = None
    rel_error: float | None = None

    @property
    def location(self) -> str:
        return field_text(self.path)


@dataclass(frozen=True)
class StateDiff:
    """The first point at which the two implementations' ``state()`` already disagreed.

    Both implementations are driven again and their states compared after every event
    (an arrival, a completion, a plan); this names the first event after which they differ
    and the first differing field, in the path notation of :func:`field_text`, with state
    lists of maps named by their ``id`` (``requests[id=3].pending_advance``).
    """

    event: str  # "completion of plan 9", "arrival of request 3", "plan 9"
    index: int  # the record index of that event (header 0)
    plan: int | None  # the plan number at, or last before, the event
    field: str  # "requests[id=3].pending_advance"; "" for the state as a whole
    a: Any
    b: Any
    plans_before: int | None = None  # plans from this event to the first differing record

    @property
    def cause(self) -> str:
        """The field with its indices and ids elided: ``requests[*].pending_advance``.
        Findings of several signatures that share it most likely share one bug."""
        return _INDEX.sub("[*]", self.field)


@dataclass(frozen=True)
class ContextRow:
    """One record around the divergence, as each implementation wrote it.

    ``a`` or ``b`` is ``None`` where that implementation has no record at ``index`` (its
    trace ended, or it failed). Rows before the divergence are equal by construction.
    """

    index: int
    a: dict[str, Any] | None
    b: dict[str, Any] | None

    @property
    def same(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True)
class RoundMark:
    """One plan's round, for the timeline picture: what ran, how wide, how many lanes."""

    plan: int
    now: int
    source: str  # winner / probe / refresh; "" when the plan chose no round
    kind: int  # 0 rect, 1 ragged (the trace schema's round kinds)
    b_pad: int
    width: int
    lanes: int
    prefill: bool
    prefixes: tuple[int, ...] = ()  # each lane's prefix (drafts verified), when recorded

    @property
    def drafts(self) -> int:
        return sum(self.prefixes)

    @property
    def idle(self) -> bool:
        return self.source == ""

    @property
    def shape(self) -> str:
        """``8×3`` for a rect round (B_pad × W), ``8q48`` for ragged (B_pad, Q_pad)."""
        if self.idle:
            return "-"
        if self.b_pad == 0:
            return "prefill"
        return f"{self.b_pad}{'×' if self.kind == 0 else 'q'}{self.width}"


@dataclass(frozen=True, order=True)
class Signature:
    """What groups divergences: the kind and the field path with its indices elided."""

    kind: str
    path: str

    def __str__(self) -> str:
        return f"{self.kind} · {self.path}"


@dataclass(frozen=True)
class Divergence:
    """The explanation of one finding: where, what kind, which fields, and around it.

    ``impls`` is the pair compared: ``a`` the baseline (the first implementation) and ``b``
    the one that differs from it or failed. ``index`` is the body index of the first
    differing record (header 0); ``plan`` the plan number at or last before it; ``clock``
    the record's ``now`` (µs). ``path`` is the headline field, record first:
    ``("plan 1283", "round", "lanes[17]", "prefix")``.
    """

    kind: str
    profile: str
    seed: int
    features: str
    requests: int
    plans: int
    impls: tuple[str, str]
    index: int | None
    plan: int | None
    clock: int | None
    record_type: str | None
    path: tuple[str, ...]
    changes: tuple[FieldChange, ...] = ()
    total_changes: int = 0
    context: tuple[ContextRow, ...] = ()
    timeline_a: tuple[RoundMark, ...] = ()
    timeline_b: tuple[RoundMark, ...] = ()
    failed_impl: str | None = None
    message: str = ""
    notes: tuple[str, ...] = ()
    raised_in: str | None = None  # error: the driver method the implementation raised in
    state: StateDiff | None = None  # the first state difference, when states were compared
    state_note: str = ""  # why there is no state difference to show, if there is none
    later: str = ""  # what happened after a field divergence: "B raised ... at plan 30"

    @property
    def label(self) -> str:
        return f"{self.profile}:{self.seed}"

    @property
    def location(self) -> str:
        return path_text(self.path)

    @property
    def field(self) -> str:
        """The headline field below the record, ASCII: ``candidates[17].expected``."""
        return field_text(self.path[1:])

    @property
    def signature(self) -> Signature:
        if self.kind == ERROR and self.raised_in:
            # One cause, one signature: where the failing implementation raised (method and
            # exception type), whatever the other implementation recorded at that index.
            return Signature(ERROR, f"{self.raised_in}: {self.path[-1]}")
        return Signature(self.kind, normalise_path(self.path))

    @property
    def headline(self) -> FieldChange | None:
        """The change the headline path names, if the divergence is a field change."""
        for change in self.changes:
            if self.path[1:] == change.path:
                return change
        return None

    @property
    def max_ulps(self) -> int | None:
        ulps = [c.ulps for c in self.changes if c.ulps is not None]
        return max(ulps) if ulps else None

    @property
    def size(self) -> tuple[int, int]:
        """What "smallest scenario" orders by: fewest requests, then fewest plans."""
        return (self.requests, self.plans)


@dataclass(frozen=True)
class SignatureGroup:
    """All divergences of one signature: how many, and the smallest scenario showing it."""

    signature: Signature
    count: int
    smallest: Divergence
    labels: tuple[str, ...]
    # the state-diff causes of its members (StateDiff.cause), most frequent first
    causes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScenarioOutcome:
    """One scenario's verdict in a report (one JUnit test case); ``divergence`` if a finding."""

    suite: str
    profile: str
    seed: int
    features: str
    status: str
    plans: int = 0
    seconds: float = 0.0
    divergence: Divergence | None = None
    # A finding's explanation as one line of text when there is no ``divergence`` to show
    # (a golden-digest mismatch), else notes on top of it; and the command reproducing it.
    explanation: str = ""
    reproduce: str = ""

    @property
    def label(self) -> str:
        return f"{self.profile}:{self.seed}"

    @property
    def finding(self) -> bool:
        return self.status != IDENTICAL


# Gate steps: each step of ``tracediff gate`` and how it went.
PASSED, FAILED, NOT_CONFIGURED, EMPTY = Step.PASSED, Step.FAILED, Step.NOT_CONFIGURED, Step.EMPTY


@dataclass(frozen=True)
class StepOutcome:
    name: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class DiffReport:
    """Everything a presenter needs: the scenarios, their divergences, the gate's steps."""

    title: str
    impls: tuple[str, ...]
    outcomes: tuple[ScenarioOutcome, ...] = ()
    steps: tuple[StepOutcome, ...] = ()
    wall_seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def findings(self) -> tuple[ScenarioOutcome, ...]:
        """The findings, those with a full explanation (a divergence) first."""
        found = [o for o in self.outcomes if o.finding]
        return tuple(sorted(found, key=lambda o: o.divergence is None))

    @property
    def divergences(self) -> tuple[Divergence, ...]:
        return tuple(o.divergence for o in self.outcomes if o.divergence is not None)

    @property
    def plans(self) -> int:
        return sum(o.plans for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return not self.findings and all(s.status != FAILED for s in self.steps)

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)
