"""Field-level comparison of two decoded records: deepdiff, named paths, classification.

deepdiff finds every leaf that differs; this module turns its raw paths into names a reader
knows (``round.lanes[17].prefix``) using the column names the trace header carries
(rows are lists, so a row index becomes a column name), orders the changes as the record
lays them out, and classifies each one:

- a key that one record has and the other lacks: *structure*;
- two equal numbers of different types (``0`` vs ``0.0``, ``1`` vs ``True``): *type*;
- a float that moved: *rounding* while its relative error is within
  :data:`~tracediff.compare.model.ROUNDING_REL_ERROR`, else *value*;
- anything else that differs (an int, a string, a flag, a list's length, ``None``): a
  *decision* when it lies in a field that holds the record's choice (its model's
  ``choice_fields``, e.g. a plan's ``round``, ``probe`` and ``refresh``; every field of a
  record type the model does not list), else *bookkeeping* (a dominator id, an eligible
  lane's cap, a candidate's prefixes: recorded on the way to a choice that came out the
  same).

The record's kind is its most fundamental change's (structure, decision, bookkeeping, type,
value, rounding). In a decision, the floats that moved with it are knock-on effects and get
no ULP distance: their size says nothing about the cause.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from tracediff.compare.floats import relative_error, ulp_distance
from tracediff.compare.model import (
    BOOKKEEPING,
    DECISION,
    KINDS,
    ROUNDING,
    ROUNDING_REL_ERROR,
    STRUCTURE,
    TYPE,
    VALUE,
    FieldChange,
)


def _import_deepdiff() -> Any:
    """``deepdiff.DeepDiff``, imported without numpy unless numpy is loaded already.

    deepdiff imports numpy whenever it is installed (for it, numpy is optional), and numpy's
    import reserves about 1.2 GB of address space: under a worker's ``--memory-limit`` it
    never returns (OpenBLAS retries its allocations, one CPU at 100 %), so an explanation of
    a finding in a capped worker hung. tracediff's records hold plain msgpack values, never
    numpy ones, so deepdiff is given none: ``import numpy`` fails for the moment of its
    import (a ``None`` in ``sys.modules``), and works again after it for whatever else wants
    numpy."""
    if "numpy" in sys.modules:
        from deepdiff import DeepDiff as loaded

        return loaded
    sys.modules["numpy"] = None  # type: ignore[assignment]
    try:
        from deepdiff import DeepDiff as loaded
    finally:
        if "numpy" in sys.modules and sys.modules["numpy"] is None:
            del sys.modules["numpy"]
    return loaded


DeepDiff = _import_deepdiff()


Columns = Mapping[str, Sequence[str]]

_MISSING = object()
_STRUCTURAL = {"dictionary_item_added", "dictionary_item_removed"}


def record_label(record: Mapping[str, Any] | None, index: int) -> str:
    """How a path names a record: ``plan 12``, ``completion``, ``header``."""
    if record is None:
        return "end"
    if index == 0:
        return "header"
    kind = str(record.get("t", "record"))
    number = record.get(kind)
    if isinstance(number, int) and not isinstance(number, bool):
        return f"{kind} {number}"
    return kind


MAX_DIFFS = 10_000  # differing leaves of one record looked at; far more than any report shows


class _QuietAtMaxDiffs(logging.Filter):
    """deepdiff logs a warning when it stops at ``max_diffs``: that is the point here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "max number of diffs" not in record.getMessage()


logging.getLogger("deepdiff.diff").addFilter(_QuietAtMaxDiffs())


def record_changes(
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    columns: Columns,
    choice: frozenset[str] | None = None,
) -> list[FieldChange]:
    """Every differing leaf of two records, in the order the record lays them out.

    Where a table has a different number of rows in the two records, rows no longer line up
    by index, so its changes are reported row by row (``pruned[3]``: the whole rows) rather
    than column by column.
    """
    # Bounded: a table of 300,000 rows more must not cost a minute (and a GB) to report
    # row by row; past MAX_DIFFS differing leaves the rest are not listed (nor counted).
    tree = DeepDiff(a, b, view="tree", ignore_order=False, verbose_level=2, max_diffs=MAX_DIFFS)
    found: dict[tuple[str, ...], tuple[list[int], FieldChange]] = {}
    for report_type, levels in tree.items():
        for level in levels:
            raw = level.path(output_format="list")
            names, order, cut = _name(raw, a, b, columns)
            if cut is not None:
                va, vb = _resolve(a, raw[:cut]), _resolve(b, raw[:cut])
            else:
                va, vb = _value(level.t1), _value(level.t2)
            if names in found:
                continue
            floats = isinstance(va, float) and isinstance(vb, float)
            if report_type in _STRUCTURAL:
                kind = STRUCTURE
            elif floats:
                rel = relative_error(va, vb)
                kind = ROUNDING if rel is not None and rel <= ROUNDING_REL_ERROR else VALUE
            elif _same_number(va, vb):
                kind = TYPE
            elif choice is None or (raw and raw[0] in choice):
                kind = DECISION
            else:
                kind = BOOKKEEPING
            change = FieldChange(
                path=names,
                kind=kind,
                a=None if va is _MISSING else va,
                b=None if vb is _MISSING else vb,
                ulps=ulp_distance(va, vb) if floats else None,
                rel_error=relative_error(va, vb) if floats else None,
            )
            found[names] = (order, change)
    return [change for _order, change in sorted(found.values(), key=lambda item: item[0])]


def classify(changes: Sequence[FieldChange]) -> str:
    """The kind of a record's divergence: its most fundamental change's (see KINDS)."""
    kinds = {change.kind for change in changes}
    return next((kind for kind in KINDS if kind in kinds), ROUNDING)


def without_knock_on_ulps(changes: Sequence[FieldChange], kind: str) -> list[FieldChange]:
    """In a decision (or bookkeeping) divergence, floats moved because the choice did: their
    ULP distances would read as a rounding story, so they are dropped."""
    if kind not in (DECISION, BOOKKEEPING, STRUCTURE):
        return list(changes)
    return [
        replace(c, ulps=None, rel_error=None) if c.kind in (VALUE, ROUNDING) else c for c in changes
    ]


def _same_number(a: Any, b: Any) -> bool:
    """Equal numbers of different types: ``0`` and ``0.0``, ``1`` and ``True``."""
    numbers = (bool, int, float)
    if not (isinstance(a, numbers) and isinstance(b, numbers)) or type(a) is type(b):
        return False
    return bool(a == b)


def _value(value: Any) -> Any:
    # deepdiff marks the absent side of an added/removed item with a ``NotPresent`` object
    if type(value).__name__ == "NotPresent":
        return _MISSING
    return value


def _name(
    raw: Sequence[str | int], a: Any, b: Any, columns: Columns
) -> tuple[tuple[str, ...], list[int], int | None]:
    """Named segments, a sort key (position at each level) and a cut for one deepdiff path.

    Walks both records along the path (a side may lack the node: an added item), tracking
    whether the current node is a *table* (a list of rows: an index stays an index,
    ``lanes[17]``) or a *row* (an index becomes its column name, ``prefix``). ``cut`` is the
    number of path keys that reach a row of a table whose lengths differ (else None).
    """
    segments: list[str] = []
    order: list[int] = []
    node_a, node_b = a, b
    names: Sequence[str] | None = None  # the column names that apply to the current node
    table = False  # whether the current node is a table of such rows (else one row)
    for depth, key in enumerate(raw):
        present = node_a if node_a is not _MISSING else node_b
        if isinstance(key, str):
            order.append(_key_position(present, key))
            segments.append(key)
            name: str | None = key
        elif names is not None and not table and 0 <= key < len(names):
            order.append(key)
            name = names[key]
            segments.append(name)
        else:
            order.append(key)
            name = None
            if segments:
                segments[-1] += f"[{key}]"
            else:
                segments.append(f"[{key}]")
            if table and _length(node_a) != _length(node_b):
                return tuple(segments), order, depth + 1
        node_a, node_b = _child(node_a, key), _child(node_b, key)
        current = node_a if node_a is not _MISSING else node_b
        if name is not None:
            names = columns.get(name)
            table = names is not None and _is_table(current)
        elif table:
            table = False  # a row of the table: its indices are the table's columns
        else:
            names = None
    return tuple(segments), order, None


def _length(node: Any) -> int | None:
    return len(node) if isinstance(node, list) else None


def _resolve(node: Any, keys: Sequence[str | int]) -> Any:
    for key in keys:
        node = _child(node, key)
    return node


def _child(node: Any, key: str | int) -> Any:
    try:
        return node[key]
    except (KeyError, IndexError, TypeError):
        return _MISSING


def _key_position(node: Any, key: str) -> int:
    if isinstance(node, Mapping):
        for position, name in enumerate(node):
            if name == key:
                return position
    return 1 << 30


def _is_table(value: Any) -> bool:
    """A table is a list of rows (lists); a row holds scalars, maybe a nested table."""
    return isinstance(value, list) and all(isinstance(row, list) for row in value)
