"""Kinds of values in a trace record, each with a per-value predicate and a fast test of a
whole column at once.

The column test is what lets the driver check every plan an implementation returns at a
few percent of what producing it costs: it takes the values of one kind from a whole table
together (``zip(*rows)``) and does a handful of C-level passes over them (the set of their
types, their minimum and maximum, ``math.isfinite`` mapped over them). It may refuse a
column that is fine (a number column holding ints and floats together); the caller then
falls back to the per-value predicate, which decides exactly and names the bad value.

Each predicate accepts what encodes to its kind, since the driver checks the objects an
implementation returns before they are encoded and a reader checks what it decoded: a tuple
is an array like a list, a float or int subclass (``numpy.float64``, an ``IntEnum``) packs as
its base type. A ``bool`` is never an integer: it packs as true or false. Integers may be as
large as msgpack holds (64 bits): nothing that reads a trace loops or allocates by one, and
the counts replay feeds an implementation are bounded by the trace checker.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

Check = Callable[[Any], bool]
ColumnCheck = Callable[[Sequence[Any]], bool]


@dataclass(frozen=True)
class Kind:
    """A kind of value: a predicate for one value, the words for what it expects, and a
    fast test of a whole column at once (``zip(*rows)``) that may answer False for a column
    that is fine (the exact predicate then decides, cell by cell, and names the culprit)."""

    name: str
    check: Check
    column_ok: ColumnCheck


def is_array(value: Any) -> bool:
    return isinstance(value, list | tuple)


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return is_int(value) and value >= 0


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return is_int(value)


def is_plain(value: Any) -> bool:
    """JSON's data model: what ``show --jsonl`` can print and every reader can walk (no
    bytes, no NaN or infinity, string keys)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list | tuple):
            stack.extend(item)
        elif isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, float):
            if not math.isfinite(item):
                return False
        elif item is not None and not isinstance(item, int | str):
            return False
    return True


# Column-at-once tests: the set of the values' exact types, then at most a minimum or an
# isfinite pass, all in C. A column of subclasses or of mixed ints and floats goes to the
# exact predicate instead.
_INT_TYPES: Final = frozenset({int})
_FLOAT_TYPES: Final = frozenset({float})
_BOOL_TYPES: Final = frozenset({bool})
ARRAY_TYPES: Final = frozenset({list, tuple})


def _ints_ok(column: Sequence[Any]) -> bool:
    return set(map(type, column)) <= _INT_TYPES


def _counts_ok(column: Sequence[Any]) -> bool:
    return not column or (set(map(type, column)) <= _INT_TYPES and min(column) >= 0)


def _numbers_ok(column: Sequence[Any]) -> bool:
    types = set(map(type, column))
    if types <= _FLOAT_TYPES:
        return all(map(math.isfinite, column))
    return types <= _INT_TYPES


def _bools_ok(column: Sequence[Any]) -> bool:
    return set(map(type, column)) <= _BOOL_TYPES


def _arrays_of(inner: ColumnCheck) -> ColumnCheck:
    def ok(column: Sequence[Any]) -> bool:
        return set(map(type, column)) <= ARRAY_TYPES and inner(list(chain.from_iterable(column)))

    return ok


def _per_value(check: Check) -> ColumnCheck:
    return lambda column: all(map(check, column))


def _kind(name: str, check: Check, column_ok: ColumnCheck | None = None) -> Kind:
    return Kind(name, check, column_ok or _per_value(check))


INT = _kind("an integer", is_int, _ints_ok)
COUNT = _kind("a non-negative integer", _is_count, _counts_ok)
NUMBER = _kind("a finite number", _is_number, _numbers_ok)
BOOL = _kind("true or false", lambda v: isinstance(v, bool), _bools_ok)
INTS = _kind(
    "a list of integers",
    lambda v: is_array(v) and all(is_int(x) for x in v),
    _arrays_of(_ints_ok),
)
NUMBERS = _kind(
    "a list of finite numbers",
    lambda v: is_array(v) and all(_is_number(x) for x in v),
    _arrays_of(_numbers_ok),
)
PLAIN = _kind("a plain value (no bytes, no non-finite floats)", is_plain)


def one_of(values: Sequence[str]) -> Kind:
    """A string from ``values``."""
    allowed = frozenset(values)
    return _kind(f"one of {list(values)}", lambda v: isinstance(v, str) and v in allowed)
