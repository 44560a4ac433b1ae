"""What a trace's header and records may hold: the content schema of trace format 2.

The framing (``reader.py``) guarantees that the bytes are the ones written; this module
guarantees that what they decode to is a tracediff trace, so that the code reading it
(``show``, ``diff``, ``replay``, golden explanations) never meets a string where a number
belongs, a row of the wrong length or a completion of a round that was never planned.
A file that decodes cleanly but breaks the schema is a :class:`TraceFormatError` naming the
file, the record and the field (exit 2); nothing else escapes.

The schema is data, read from three places so that it follows the scheduler model rather
than copying it:

* ``tracediff/models/specdec/sched/record.py``: ``PLAN_KEYS`` (the keys of a plan record, in order),
  ``COLUMNS`` (which plan fields are rows, and their column names) and ``TABLES`` (the wide
  tables held as typed columns, checked by ``tracediff/trace/columns.py``'s ``columns_problem``;
  the header's ``types`` must declare exactly these types);
* the trace header's own ``columns`` map, which says how many columns each row of *this*
  trace has (a trace written by another version is checked against what it declares);
* the small tables below: the kind of value each column and key holds (a column or key
  they do not name holds any plain value; kinds are in ``kinds.py``), and the keys of the
  records the engine and the driver write around the plans (a new record type, or a new
  key of one of them, is added to ``EVENT_KEYS``).

The driver checks every plan and retirement an implementation returns with the same
:func:`record_problem` before they are recorded, so a trace tracediff wrote always reads
back, and a record that breaks the schema is the implementation's finding at run time
rather than a trace nobody can read.

Beyond each record on its own, :class:`TraceChecker` checks what replay relies on across
records: the clock never goes back, a request arrives once and is in the header's
scenario, and a completion finishes a round that is in flight, lane for lane, with counts
that fit what the lane was offered. A later trace format replaces this module as a whole.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Final

from tracediff.errors import ScenarioError, TraceFormatError
from tracediff.models.specdec.scenario.model import MAX_DRAFT, Scenario
from tracediff.models.specdec.sched.record import (
    COLUMNS,
    PLAN_KEYS,
    ROUND_COLUMNS,
    ROUND_LANE_COLUMNS,
    SOURCE_PROBE,
    SOURCE_REFRESH,
    SOURCE_WINNER,
    TYPE_NAMES,
)
from tracediff.models.specdec.sched.record import TABLES as TYPED_TABLES
from tracediff.trace.columns import TYPES as COLUMN_TYPES
from tracediff.trace.columns import TableSpec, columns_problem
from tracediff.trace.kinds import (
    ARRAY_TYPES,
    BOOL,
    COUNT,
    INT,
    INTS,
    NUMBER,
    NUMBERS,
    PLAIN,
    Kind,
    is_array,
    is_plain,
    one_of,
)

TRACE_FORMAT: Final = "tracediff-trace"
SCHEMA_VERSION: Final = 2
HEADER_KEYS: Final = ("format", "version", "scenario", "columns", "types")

VALUE_SHOWN: Final = 40  # characters of a bad value quoted in a message

SOURCE = one_of((SOURCE_WINNER, SOURCE_PROBE, SOURCE_REFRESH))

# The kind of each column, by name (a name means the same in every row that has it). A
# column not named here holds any plain value; a column whose name is itself a row kind in
# the header's ``columns`` map (``round``'s ``lanes``) is a nested list of such rows.
COLUMN_KINDS: Final[Mapping[str, Kind]] = {
    # plan rows
    "request": INT,
    "slot": INT,
    "cap": INT,
    "fixed_width": INT,
    "alloc": INT,
    "last_served": INT,
    "curve": NUMBERS,
    "id": INT,
    "kind": INT,
    "cohort": INT,
    "prefill": BOOL,
    "bound": INT,
    "b_pad": INT,
    "width": INT,
    "prefixes": INTS,
    "expected": NUMBER,
    "duration": INT,
    "value": NUMBER,
    "budget": INT,
    "by": INT,
    "position": INT,
    "depth": INT,
    "trials": INT,
    "gain": NUMBER,
    "cost": NUMBER,
    "source": SOURCE,
    "prefill_request": INT,
    "prefill_tokens": INT,
    "prefix": INT,
    "rate": NUMBER,
    "next_progress": INT,
    # completion lanes (written by the engine)
    "verified": COUNT,
    "accepted": COUNT,
    "tokens": COUNT,
    "finished": BOOL,
    "offer": COUNT,
}

# Plan keys that hold one row (or null) rather than a list of rows.
SINGLE_ROWS: Final = frozenset({"round"})
NULLABLE_ROWS: Final = frozenset({"round"})
# Plan keys known to hold a list of rows. A row kind named in neither set (one the model
# gains later) is read by its shape: null, a list of rows (every item a list), or one row.
TABLES: Final = frozenset({"eligible", "candidates", "pruned", "probes", "lane_values"})
# The kind of each plan key that is not a row kind; ``t`` is checked on its own.
PLAN_KEY_KINDS: Final[Mapping[str, Kind]] = {
    "plan": COUNT,
    "now": COUNT,
    "prefill": INT,
    "credit_before": NUMBER,
    "winner": INT,
    "probe": INT,
    "refresh": INT,
    "credit_after": NUMBER,
}

# The records the engine and the driver write around the plans: the world's inputs
# (arrival, completion) and the retirements an implementation returns from complete().
COMPLETION_LANE_COLUMNS: Final = ("request", "verified", "accepted", "tokens", "finished", "offer")
EVENT_KEYS: Final[Mapping[str, tuple[str, ...]]] = {
    "arrival": ("t", "now", "request"),
    "completion": ("t", "now", "round", "observed_us", "lanes"),
    "retire": ("t", "now", "requests"),
}
EVENT_KEY_KINDS: Final[Mapping[str, Kind]] = {
    "now": COUNT,
    "request": INT,
    "round": COUNT,
    "observed_us": COUNT,
    "requests": INTS,
}
RECORD_TYPES: Final = ("plan", *EVENT_KEYS)
# How a plan key is checked (compared by identity in the hot loop).
_VALUE, _TABLE, _ROW, _ROW_OR_NULL, _BY_SHAPE = "value", "table", "row", "row or null", "shape"
_COLUMNS = "columns"


class SchemaError(ValueError):
    """One record's content breaks the schema; ``str()`` says where and how."""


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 3] + "..."


def _bad(where: str, value: Any, kind: Kind) -> SchemaError:
    return SchemaError(f"{where} is {type(value).__name__} {_shown(value)}, expected {kind.name}")


class Layout:
    """One row kind's columns: ``(name, kind)`` each, kind None for a nested row kind, and
    the positions of the columns of each kind, grouped for the fast path."""

    def __init__(self, columns: tuple[tuple[str, Kind | None], ...]) -> None:
        self.columns = columns
        self.width = len(columns)
        self.names = ", ".join(name for name, _ in columns)
        groups: dict[int, tuple[Kind, list[int]]] = {}
        self.nested: list[tuple[int, str]] = []
        for position, (name, kind) in enumerate(columns):
            if kind is None:
                self.nested.append((position, name))
            else:
                groups.setdefault(id(kind), (kind, []))[1].append(position)
        # each kind's columns, picked out of the transposed table by one C call
        self.groups = [
            (kind, positions[0] if len(positions) == 1 else None, itemgetter(*positions))
            for kind, positions in groups.values()
        ]


@dataclass(frozen=True)
class Schema:
    """The row layout a trace declares (its header's ``columns``), checked against this
    version's plan keys; :meth:`check` checks one decoded record."""

    columns: Mapping[str, tuple[str, ...]]
    # the typed tables (``tracediff/trace/columns.py``), by plan key
    tables: Mapping[str, TableSpec] = field(default_factory=lambda: dict(TYPED_TABLES))
    # (column name, kind or None for a nested row kind) per row kind, built once
    _rows: dict[str, Layout] = field(default_factory=dict, repr=False, compare=False)
    _round_fast: bool = field(default=False, init=False, repr=False, compare=False)
    # how each plan key after ``t`` is checked: (key, how, kind), how one of _HOW
    _plan: list[tuple[str, str, Kind]] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, cols in self.columns.items():
            if name not in self.tables:
                self._rows[name] = Layout(tuple((col, self._kind_of(name, col)) for col in cols))
        # the current round layout has a fast path (``_round_ok``); another layout the
        # general one
        object.__setattr__(
            self,
            "_round_fast",
            tuple(self.columns.get("round", ())) == ROUND_COLUMNS
            and tuple(self.columns.get("lanes", ())) == ROUND_LANE_COLUMNS,
        )
        for key in PLAN_KEYS[1:]:
            if key in self.tables:
                how = _COLUMNS
            elif key not in self._rows:
                how = _VALUE
            elif key in SINGLE_ROWS:
                how = _ROW_OR_NULL if key in NULLABLE_ROWS else _ROW
            else:
                how = _TABLE if key in TABLES else _BY_SHAPE
            self._plan.append((key, how, PLAN_KEY_KINDS.get(key, PLAIN)))

    def _kind_of(self, row: str, column: str) -> Kind | None:
        """A column's kind; None when it holds nested rows (a row kind of its own)."""
        if column in self.columns and column != row:
            return None
        return COLUMN_KINDS.get(column, PLAIN)

    @classmethod
    def current(cls) -> Schema:
        """The schema this tracediff writes (``tracediff/models/specdec/sched/record.py``)."""
        return _CURRENT

    def check(self, record: Any) -> None:
        """Raise :class:`SchemaError` if ``record`` breaks the schema."""
        if not isinstance(record, dict):
            raise SchemaError(f"a record is a {type(record).__name__}, expected a map")
        kind = record.get("t")
        if kind == "plan":
            self._check_plan(record)
        elif isinstance(kind, str) and kind in EVENT_KEYS:
            self._check_event(kind, record)
        else:
            raise SchemaError(f"record type {_shown(kind)} is not one of {list(RECORD_TYPES)}")

    def _check_keys(self, what: str, record: dict[str, Any], keys: tuple[str, ...]) -> None:
        # Key order is part of the compared bytes, not of what a reader can rely on: a record
        # with its keys in another order is a difference for diff to name, not damage.
        if tuple(record) == keys or len(record) == len(keys) and all(k in record for k in keys):
            return
        missing = [k for k in keys if k not in record]
        extra = [_shown(k) for k in record if k not in keys]
        parts = [f"lacks {missing}"] if missing else []
        parts += [f"has unknown keys {extra}"] if extra else []
        raise SchemaError(f"{what} record {' and '.join(parts)}; expected keys {list(keys)}")

    def _check_plan(self, record: dict[str, Any]) -> None:
        self._check_keys("plan", record, PLAN_KEYS)
        for key, how, kind in self._plan:
            value = record[key]
            if how is _COLUMNS:
                problem = columns_problem(self.tables[key], value)
                if problem is not None:
                    raise SchemaError(problem)
            elif how is _VALUE:
                if not kind.check(value):
                    raise _bad(key, value, kind)
            elif how is _TABLE:
                self._check_table(key, key, value)
            elif how is _ROW or (how is _ROW_OR_NULL and value is not None):
                if key != "round" or not self._round_fast or not _round_ok(value):
                    self._check_row(key, key, value)
            elif how is _BY_SHAPE and value is not None:
                # a row kind this version does not know: a list of rows, or one row
                if is_array(value) and all(is_array(item) for item in value):
                    self._check_table(key, key, value)
                else:
                    self._check_row(key, key, value)

    def _check_event(self, kind: str, record: dict[str, Any]) -> None:
        self._check_keys(kind, record, EVENT_KEYS[kind])
        for key in EVENT_KEYS[kind][1:]:
            value = record[key]
            if kind == "completion" and key == "lanes":
                self._check_rows("lanes", value, _COMPLETION_LANES)
                continue
            key_kind = EVENT_KEY_KINDS[key]
            if not key_kind.check(value):
                raise _bad(key, value, key_kind)

    def _check_table(self, where: str, name: str, value: Any) -> None:
        if name not in self._rows:
            raise SchemaError(
                f"{where}: the header's columns do not declare the {name!r} rows it holds"
            )
        self._check_rows(where, value, self._rows[name])

    def _check_rows(self, where: str, value: Any, layout: Layout) -> None:
        if not is_array(value):
            raise SchemaError(
                f"{where} is {type(value).__name__} {_shown(value)}, expected a list of rows"
            )
        if self._rows_ok(value, layout):
            return
        for number, row in enumerate(value):
            self._check_layout(f"{where}[{number}]", row, layout)

    def _check_row(self, where: str, name: str, value: Any) -> None:
        layout = self._rows[name]
        if not self._rows_ok([value], layout):
            self._check_layout(where, value, layout)

    def _rows_ok(self, rows: list[Any], layout: Layout) -> bool:
        """The fast path: the whole table at once, the columns of one kind together. False
        sends the caller to the exact check, row by row, which finds and names the bad cell
        (or finds none: the fast path may refuse what the exact check accepts)."""
        if not rows:
            return True
        if not set(map(type, rows)) <= ARRAY_TYPES or set(map(len, rows)) != {layout.width}:
            return False
        columns = list(zip(*rows, strict=False))  # the widths were checked just above
        for kind, single, pick in layout.groups:
            if single is not None:
                values: Sequence[Any] = columns[single]
            else:
                values = list(chain.from_iterable(pick(columns)))
            if not kind.column_ok(values):
                return False
        for position, name in layout.nested:
            nested = self._rows.get(name)
            values = columns[position]
            if nested is None or not set(map(type, values)) <= ARRAY_TYPES:
                return False
            if not self._rows_ok(list(chain.from_iterable(values)), nested):
                return False
        return True

    def _check_layout(self, where: str, row: Any, layout: Layout) -> None:
        if not is_array(row):
            raise SchemaError(
                f"{where} is {type(row).__name__} {_shown(row)}, expected a row "
                f"of {layout.width} columns"
            )
        if len(row) != layout.width:
            raise SchemaError(
                f"{where} has {len(row)} columns, the header declares {layout.width} "
                f"({layout.names})"
            )
        for (column, kind), value in zip(layout.columns, row, strict=True):
            if kind is None:
                self._check_table(f"{where}.{column}", column, value)
            elif not kind.check(value):
                raise _bad(f"{where}.{column}", value, kind)


_COMPLETION_LANES = Layout(tuple((c, COLUMN_KINDS[c]) for c in COMPLETION_LANE_COLUMNS))
_CURRENT = Schema({name: tuple(cols) for name, cols in COLUMNS.items()}, dict(TYPED_TABLES))


_SOURCES: Final = frozenset((SOURCE_WINNER, SOURCE_PROBE, SOURCE_REFRESH))
_INT_FIELDS: Final = itemgetter(1, 2, 3, 4, 5, 8)  # kind, b_pad, width, prefill_*, duration


def _round_ok(row: Any) -> bool:
    """The fast yes for a ``round`` row of this version's layout (``ROUND_COLUMNS``, lanes
    ``ROUND_LANE_COLUMNS``): a few C-level passes. False sends it to the exact check."""
    if type(row) is not list or len(row) != len(ROUND_COLUMNS):
        return False
    expected = row[7]
    lanes = row[6]
    if (
        type(row[0]) is not str
        or row[0] not in _SOURCES
        or type(expected) is not float
        or not math.isfinite(expected)
        or list(map(type, _INT_FIELDS(row))).count(int) != 6
        or type(lanes) is not list
    ):
        return False
    if not lanes:
        return True
    if list(map(type, lanes)).count(list) != len(lanes) or set(map(len, lanes)) != {4}:
        return False
    flat = list(chain.from_iterable(lanes))
    return list(map(type, flat)).count(int) == len(flat)


def record_problem(record: Any) -> str | None:
    """What is wrong with a record an implementation returned, by this version's schema
    (the driver's check before recording it), or None."""
    try:
        _CURRENT.check(record)
    except SchemaError as exc:
        return str(exc)
    return None


# -- the header -------------------------------------------------------------------------------
def header_schema(header: Mapping[str, Any], name: str) -> tuple[Schema, Scenario]:
    """Check a decoded trace header; return the schema its records follow and its scenario.

    Raises :class:`TraceFormatError` naming ``name`` for a header that is not a tracediff
    trace header of this schema version.
    """

    def fail(message: str) -> TraceFormatError:
        return TraceFormatError(name, f"header: {message}", offset=None, record=0)

    if header.get("format") != TRACE_FORMAT:
        raise fail(f"format is {_shown(header.get('format'))}, expected {TRACE_FORMAT!r}")
    version = header.get("version")
    if type(version) is not int or version != SCHEMA_VERSION:
        hint = (
            "convert it with `tracediff upgrade`"
            if version == 1
            else "read it with the tracediff that wrote it, or re-record it"
        )
        raise fail(
            f"record schema version {_shown(version)}; this tracediff reads version "
            f"{SCHEMA_VERSION} ({hint})"
        )
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise fail(f"lacks {missing}")
    columns = header["columns"]
    if not isinstance(columns, dict):
        raise fail(f"columns is {type(columns).__name__}, expected a map of row kinds")
    declared: dict[str, tuple[str, ...]] = {}
    for kind, cols in columns.items():
        if not is_array(cols) or not all(isinstance(c, str) for c in cols):
            raise fail(f"columns[{kind!r}] is {_shown(cols)}, expected a list of column names")
        if len(set(cols)) != len(cols) or not cols:
            raise fail(f"columns[{kind!r}] {_shown(cols)} is empty or repeats a column")
        declared[kind] = tuple(cols)
    absent = [kind for kind in COLUMNS if kind not in declared]
    if absent:
        raise fail(f"columns lacks the row kinds {absent}")
    for key in PLAN_KEYS:
        if key in declared and key in PLAN_KEY_KINDS:
            raise fail(f"columns declares rows for {key!r}, which holds a single value")
    types = header["types"]
    if not isinstance(types, dict):
        raise fail(f"types is {type(types).__name__}, expected a map of column types by table")
    # (``table``, not ``name``: ``fail`` names the file by ``name``)
    for table, spec in TYPED_TABLES.items():
        if declared.get(table) != spec.names:
            raise fail(
                f"the {table} table's columns are {_shown(declared.get(table))}; this tracediff "
                f"reads {list(spec.names)}"
            )
        declared_types: Any = types.get(table)
        if not is_array(declared_types) or not all(isinstance(t, str) for t in declared_types):
            raise fail(
                f"types[{table!r}] is {_shown(declared_types)}, expected a list of column types"
            )
        unknown = [t for t in declared_types if t not in COLUMN_TYPES]
        if unknown:
            raise fail(
                f"types[{table!r}] declares the unknown column type {_shown(unknown[0])} "
                f"(known: {', '.join(COLUMN_TYPES)})"
            )
        expected = TYPE_NAMES[table]
        if list(declared_types) != expected:
            raise fail(
                f"types[{table!r}] is {_shown(declared_types)}; this tracediff reads {expected}"
            )
    scenario_data = header["scenario"]
    if not isinstance(scenario_data, dict):
        raise fail(f"scenario is {type(scenario_data).__name__}, expected a map")
    if not is_plain(header):
        raise fail("holds a value JSON cannot hold (bytes, a non-finite float or a huge int)")
    try:
        scenario = Scenario.from_dict(scenario_data)
    except ScenarioError as exc:
        raise fail(f"scenario is unusable: {exc}") from None
    return Schema(declared), scenario


# -- across records ---------------------------------------------------------------------------
@dataclass
class _Round:
    plan: int
    lanes: list[tuple[int, int]]  # (request, prefix) of each lane


class TraceChecker:
    """Checks a trace's records in order: each against the schema, and what replay relies
    on across them. ``check`` raises :class:`TraceFormatError` naming the file and record."""

    def __init__(self, header: Mapping[str, Any], name: str) -> None:
        self.name = name
        self.schema, self.scenario = header_schema(header, name)
        self._requests = {r.id for r in self.scenario.requests}
        self._arrived: set[int] = set()
        self._retired: set[int] = set()
        self._in_flight: list[_Round] = []
        self._now = 0
        self._round_at = self._position("round", ("request", "prefix"))

    def _position(self, name: str, wanted: tuple[str, ...]) -> tuple[int, tuple[int, ...]] | None:
        """Where a round row keeps its lanes, and where a lane its ``wanted`` columns."""
        cols = self.schema.columns.get(name, ())
        lane_cols = self.schema.columns.get("lanes", ())
        if "lanes" not in cols or not all(c in lane_cols for c in wanted):
            return None
        return cols.index("lanes"), tuple(lane_cols.index(c) for c in wanted)

    def check(self, record: Any, *, offset: int | None, index: int) -> None:
        self._checked(record, offset, index, schema=True)

    def check_recorded(self, record: Any, *, offset: int | None, index: int) -> None:
        """:meth:`check`, for a record being recorded whose plan the model's ``check_record``
        already passed: that is this schema's check of a plan (``record_problem``), so only
        what holds across records is left to check for one (a recording's cost)."""
        planned = isinstance(record, dict) and record.get("t") == "plan"
        self._checked(record, offset, index, schema=not planned)

    def _checked(self, record: Any, offset: int | None, index: int, *, schema: bool) -> None:
        try:
            if schema:
                self.schema.check(record)
            self._follow(record)
        except SchemaError as exc:
            raise TraceFormatError(
                self.name,
                f"{exc} (the content does not match the trace schema; re-record the trace)",
                offset=offset,
                record=index,
            ) from None

    def _follow(self, record: dict[str, Any]) -> None:
        now = record["now"]
        kind = record["t"]
        if now < self._now:
            raise SchemaError(f"{kind} record at {now} µs goes back in time (after {self._now} µs)")
        self._now = now
        if kind == "arrival":
            request = record["request"]
            if request not in self._requests:
                raise SchemaError(
                    f"arrival of request {request}, which the header's scenario does not hold"
                )
            if request in self._arrived:
                raise SchemaError(f"request {request} arrives a second time")
            self._arrived.add(request)
        elif kind == "plan":
            row = record.get("round")
            if row is not None and self._round_at is not None:
                at, (request_at, prefix_at) = self._round_at
                lanes = [(lane[request_at], lane[prefix_at]) for lane in row[at]]
                # a round can only run requests that are there: arrived, not yet retired, each
                # with a prefix the engine runs (it refuses others: no recording holds one)
                for request, prefix in lanes:
                    self._present(request, f"the round of plan {record['plan']} runs request")
                    if type(prefix) is not int or not 0 <= prefix <= MAX_DRAFT:
                        raise SchemaError(
                            f"the round of plan {record['plan']} gives request {request} a "
                            f"prefix of {_shown(prefix)}, outside 0..{MAX_DRAFT}"
                        )
                self._in_flight.append(_Round(record["plan"], lanes))
        elif kind == "retire":
            for request in record["requests"]:
                self._present(request, "a retirement of request")
                self._retired.add(request)
        elif kind == "completion" and self._round_at is not None:
            self._complete(record)

    def _present(self, request: Any, what: str) -> None:
        """``request`` has arrived and is not retired, or SchemaError: what replay would
        otherwise blame on the implementation (a decision no scheduler could make)."""
        if request not in self._arrived:
            raise SchemaError(f"{what} {_shown(request)}, which has not arrived")
        if request in self._retired:
            raise SchemaError(f"{what} {request}, which was retired before")

    def _complete(self, record: dict[str, Any]) -> None:
        number = record["round"]
        found = next((r for r in self._in_flight if r.plan == number), None)
        if found is None:
            raise SchemaError(f"completion of round {number}, which is not in flight")
        self._in_flight.remove(found)
        lanes = record["lanes"]
        if len(lanes) != len(found.lanes):
            raise SchemaError(
                f"completion of round {number} has {len(lanes)} lanes, the round {len(found.lanes)}"
            )
        for position, (lane, (request, prefix)) in enumerate(zip(lanes, found.lanes, strict=True)):
            got, verified, accepted, _tokens, _finished, _offer = lane
            where = f"lanes[{position}]"
            if got != request:
                raise SchemaError(f"{where}.request is {got}, the round's lane is {request}")
            if verified > max(prefix, 0) or verified > MAX_DRAFT:
                raise SchemaError(f"{where}.verified {verified} exceeds the lane's prefix {prefix}")
            if accepted > verified:
                raise SchemaError(f"{where}.accepted {accepted} exceeds verified {verified}")
