"""The plan record: the one shape every implementation returns from ``plan()``.

Records are plain dicts whose keys are in ``PLAN_KEYS`` order. The five wide tables
(``TABLES``) are typed columns (``tracediff/trace/columns.py``): a list of encoded columns in the
order below, which both built-in schedulers build directly. The ``round`` is one row (a
list in ``ROUND_COLUMNS`` order) whose lanes are rows too. The driver encodes records as
they are, so building them in this order is what makes two implementations' bytes
comparable. An implementation may also return a wide table as a list of rows:
:func:`packed_record` turns it into columns (what the driver does for it, at the cost the
built-in schedulers avoid). ``docs/trace-format.md`` documents every field.
"""

from __future__ import annotations

from typing import Any

from tracediff.trace.columns import (
    TableSpec,
    columns_ok,
    exact_bins,
    is_column_form,
    pack_rows,
    unpack_rows,
)

PLAN_KEYS = (
    "t",
    "plan",
    "now",
    "eligible",
    "prefill",
    "credit_before",
    "candidates",
    "pruned",
    "winner",
    "probes",
    "probe",
    "refresh",
    "credit_after",
    "round",
    "lane_values",
)
# The wide tables are typed columns (``tracediff/trace/columns.py``): (name, type) in order.
ELIGIBLE = TableSpec(
    "eligible",
    (
        ("request", "i32"),
        ("slot", "i16"),
        ("cap", "u8"),
        ("fixed_width", "i8"),
        ("alloc", "u8"),
        ("last_served", "i32"),
        ("curve", "f64[7]"),
    ),
)
CANDIDATES = TableSpec(
    "candidates",
    (
        ("id", "i32"),
        ("kind", "u8"),
        ("cohort", "i16"),
        ("prefill", "bool"),
        ("bound", "u8"),
        ("b_pad", "i16"),
        ("width", "i16"),
        ("prefixes", "u8[]"),
        ("expected", "f64"),
        ("duration", "i64"),
        ("value", "f64"),
        ("budget", "i16"),
    ),
)
PRUNED = TableSpec("pruned", (("id", "i32"), ("by", "i32")))
PROBES = TableSpec(
    "probes",
    (
        ("position", "i16"),
        ("request", "i32"),
        ("depth", "u8"),
        ("trials", "i32"),
        ("gain", "f64"),
        ("expected", "f64"),
        ("duration", "i64"),
        ("cost", "f64"),
    ),
)
LANE_VALUES = TableSpec(
    "lane_values",
    (("request", "i32"), ("expected", "f64"), ("rate", "f64"), ("next_progress", "i64")),
)
TABLES: dict[str, TableSpec] = {
    spec.name: spec for spec in (ELIGIBLE, CANDIDATES, PRUNED, PROBES, LANE_VALUES)
}
ELIGIBLE_COLUMNS = ELIGIBLE.names
CANDIDATE_COLUMNS = CANDIDATES.names
PRUNED_COLUMNS = PRUNED.names
PROBE_COLUMNS = PROBES.names
ROUND_COLUMNS = (
    "source",
    "kind",
    "b_pad",
    "width",
    "prefill_request",
    "prefill_tokens",
    "lanes",
    "expected",
    "duration",
)
ROUND_LANE_COLUMNS = ("request", "slot", "prefix", "alloc")
LANE_VALUE_COLUMNS = LANE_VALUES.names

COLUMNS: dict[str, tuple[str, ...]] = {
    "eligible": ELIGIBLE_COLUMNS,
    "candidates": CANDIDATE_COLUMNS,
    "pruned": PRUNED_COLUMNS,
    "probes": PROBE_COLUMNS,
    "round": ROUND_COLUMNS,
    "lanes": ROUND_LANE_COLUMNS,
    "lane_values": LANE_VALUE_COLUMNS,
}

# The header's ``types`` map: each typed table's column types, in column order.
TYPE_NAMES: dict[str, list[str]] = {
    name: [type_name for _, type_name in spec.columns] for name, spec in TABLES.items()
}

SOURCE_WINNER, SOURCE_PROBE, SOURCE_REFRESH = "winner", "probe", "refresh"


def plan_record(
    *,
    plan: int,
    now: int,
    eligible: list[Any],
    prefill: int,
    credit_before: float,
    candidates: list[Any],
    pruned: list[Any],
    winner: int,
    probes: list[Any],
    probe: int,
    refresh: int,
    credit_after: float,
    round_: list[Any] | None,
    lane_values: list[Any],
) -> dict[str, Any]:
    """Build a plan record with its keys in schema order."""
    return {
        "t": "plan",
        "plan": plan,
        "now": now,
        "eligible": eligible,
        "prefill": prefill,
        "credit_before": credit_before,
        "candidates": candidates,
        "pruned": pruned,
        "winner": winner,
        "probes": probes,
        "probe": probe,
        "refresh": refresh,
        "credit_after": credit_after,
        "round": round_,
        "lane_values": lane_values,
    }


def empty_plan_record(*, plan: int, now: int, eligible: list[Any], credit: float) -> dict[str, Any]:
    """A plan call that chooses nothing: no lane eligible and no prefill row waiting."""
    return plan_record(
        plan=plan,
        now=now,
        eligible=eligible,
        prefill=-1,
        credit_before=credit,
        candidates=CANDIDATES.empty(),
        pruned=PRUNED.empty(),
        winner=-1,
        probes=PROBES.empty(),
        probe=-1,
        refresh=-1,
        credit_after=credit,
        round_=None,
        lane_values=LANE_VALUES.empty(),
    )


# The tables' widths, and where candidates' one ragged column is, for the fast path below
# (unrolled: it runs once per plan record of every run).
_WIDTHS = tuple(spec.width for spec in TABLES.values())
_RAGGED = CANDIDATES.ragged[0]
assert tuple(TABLES) == ("eligible", "candidates", "pruned", "probes", "lane_values")
assert [spec.ragged for spec in TABLES.values()] == [(), (_RAGGED,), (), (), ()]
_ONLY_BYTES = {bytes}


def already_exact(record: dict[str, Any]) -> bool:
    """Whether every wide table is already exact columns (what the built-in schedulers
    return): each a list of the table's width of ``bytes``, the ragged column a list of
    two. One C-level pass over every column instead of a check per table and column."""
    get = record.get
    tables: tuple[Any, ...] = (
        get("eligible"),
        get("candidates"),
        get("pruned"),
        get("probes"),
        get("lane_values"),
    )
    if set(map(type, tables)) != {list} or tuple(map(len, tables)) != _WIDTHS:
        return False
    eligible, candidates, pruned, probes, lane_values = tables
    ragged = candidates[_RAGGED]
    if type(ragged) is not list or len(ragged) != 2:
        return False
    return (
        set(
            map(
                type,
                (
                    *eligible,
                    *candidates[:_RAGGED],
                    *ragged,
                    *candidates[_RAGGED + 1 :],
                    *pruned,
                    *probes,
                    *lane_values,
                ),
            )
        )
        == _ONLY_BYTES
    )


def packed_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with every wide table in exact column form: tables given as rows packed
    into typed columns, bytes-like bins (``bytearray``, ``memoryview``) made ``bytes``.
    The same dict when nothing needed it; raises :class:`ColumnError` for a value a column
    cannot hold. The implementation's own dict is never changed."""
    if already_exact(record):
        return record
    out = record
    for name, spec in TABLES.items():
        value = record.get(name)
        if is_column_form(value):
            exact = exact_bins(spec, value)
        elif isinstance(value, list | tuple):
            exact = pack_rows(spec, value)
        else:
            continue  # not a table at all: the schema check names it
        if exact is not value:
            if out is record:
                out = dict(record)
            out[name] = exact
    return out


def rows_view(record: Any) -> Any:
    """A copy of a plan record with every well-formed typed table as a list of rows (the
    shape explanations, ``show`` and the state replays read); anything else (other records,
    malformed tables) is left as it is."""
    if not isinstance(record, dict) or record.get("t") != "plan":
        return record
    out = dict(record)
    for name, spec in TABLES.items():
        value = out.get(name)
        if isinstance(value, list) and columns_ok(spec, value):
            out[name] = unpack_rows(spec, value)
    return out
