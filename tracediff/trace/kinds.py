"""Kinds of values in a trace record, each with a per-value predicate and a fast test of a
whole column at once.

The column test is what lets the driver check every plan an implementation returns at a
few percent of what producing it costs: it takes the values of one kind from a whole table
together (``zip(*rows)``) and does a handful of C-level passes over them (the set of their
types, their minimum and maximum, ``math.isfinite`` mapped over them). It may refuse a
column that is fine (a number column holding ints and floats together); the caller then
falls back to the per-value predicate, which decides exactly and names the bad value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Any, Final

# Integers in a trace are clocks (µs), counts and ids; 2**53 (285 years of microseconds)
# keeps each exact as a float too, and refuses the 64-bit extremes a forged file would use
# to make a loop or an allocation run away.
INT_LIMIT: Final = 2**53

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


def _is_int(value: Any) -> bool:
    return type(value) is int and -INT_LIMIT <= value <= INT_LIMIT


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= INT_LIMIT


def _is_number(value: Any) -> bool:
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    return kind is int and -INT_LIMIT <= value <= INT_LIMIT


def is_plain(value: Any) -> bool:
    """JSON's data model: what ``show --jsonl`` can print and every reader can walk."""
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is list:
            stack.extend(item)
        elif kind is dict:
            if any(type(key) is not str for key in item):
                return False
            stack.extend(item.values())
        elif kind is float:
            if not math.isfinite(item):
                return False
        elif kind is int:
            if not -INT_LIMIT <= item <= INT_LIMIT:
                return False
        elif item is not None and kind is not bool and kind is not str:
            return False
    return True


# Column-at-once tests: each does a handful of C-level passes over the column, which is what
# lets the driver check every plan an implementation returns at a few percent of its cost.
_INT_TYPES: Final = frozenset({int})
_FLOAT_TYPES: Final = frozenset({float})
LIST_TYPES: Final = frozenset({list})
_BOOL_TYPES: Final = frozenset({bool})


def _ints_ok(column: Sequence[Any], low: int = -INT_LIMIT) -> bool:
    if not column:
        return True
    return set(map(type, column)) <= _INT_TYPES and min(column) >= low and max(column) <= INT_LIMIT


def _counts_ok(column: Sequence[Any]) -> bool:
    return _ints_ok(column, 0)


def _numbers_ok(column: Sequence[Any]) -> bool:
    types = set(map(type, column))
    if types <= _FLOAT_TYPES:
        return all(map(math.isfinite, column))
    return types <= _INT_TYPES and _ints_ok(column)


def _bools_ok(column: Sequence[Any]) -> bool:
    return set(map(type, column)) <= _BOOL_TYPES


def _lists_of(inner: ColumnCheck) -> ColumnCheck:
    def ok(column: Sequence[Any]) -> bool:
        return set(map(type, column)) <= LIST_TYPES and inner(list(chain.from_iterable(column)))

    return ok


def _per_value(check: Check) -> ColumnCheck:
    return lambda column: all(map(check, column))


def _kind(name: str, check: Check, column_ok: ColumnCheck | None = None) -> Kind:
    return Kind(name, check, column_ok or _per_value(check))


INT = _kind("an integer", _is_int, _ints_ok)
COUNT = _kind("a non-negative integer", _is_count, _counts_ok)
NUMBER = _kind("a finite number", _is_number, _numbers_ok)
BOOL = _kind("true or false", lambda v: type(v) is bool, _bools_ok)
INTS = _kind(
    "a list of integers",
    lambda v: type(v) is list and all(_is_int(x) for x in v),
    _lists_of(_ints_ok),
)
NUMBERS = _kind(
    "a list of finite numbers",
    lambda v: type(v) is list and all(_is_number(x) for x in v),
    _lists_of(_numbers_ok),
)
PLAIN = _kind("a plain value (no bytes, no non-finite floats)", is_plain)


def one_of(values: Sequence[str]) -> Kind:
    """A string from ``values``."""
    allowed = frozenset(values)
    return _kind(f"one of {list(values)}", lambda v: type(v) is str and v in allowed)
