"""Typed columns: how the wide tables of a plan record are held and encoded (record schema 2).

A plan record's wide tables (eligible lanes, candidates, pruned, probes, lane values) are
not lists of rows but lists of *columns*, one per column name, in the header's order. Each
column is a msgpack bin of little-endian fixed-width values of one type; a ragged column
(a list per row, such as a candidate's prefixes) is a two-element list
``[lengths, values]`` of such bins. A table of ``n`` rows therefore encodes as a few dozen
bins instead of thousands of small msgpack objects, which is what makes encoding, digesting
and checking a plan record cheap.

The encoding is canonical: a table's rows determine its bytes exactly (each value has one
representation in its column's type), so two implementations that decide the same produce
the same bytes. Types (``TYPES``):

=========  =====================================  ==============================
type       one row's value                        bytes per row
=========  =====================================  ==============================
bool       ``True``/``False``                     1 (0 or 1)
u8         integer 0..255                         1
i8         integer -128..127                      1
i16        integer -32768..32767                  2
i32        integer, 32-bit signed                 4
i64        integer, 64-bit signed                 8
f64        finite IEEE-754 double                 8
f64[7]     exactly 7 finite doubles               56
u8[]       a list of integers 0..255 (ragged)     ``[u16 length, u8 values...]``
=========  =====================================  ==============================

Writers either build columns directly (:func:`pack_values` from a sequence,
:func:`column_bytes` from an ``array.array``, :class:`TableBuilder` row by row) or hand
rows to :func:`pack_rows`; readers get
rows back with :func:`unpack_rows`. :func:`columns_problem` checks a table a file or an
implementation supplied without turning it into rows.
"""

from __future__ import annotations

import math
import struct
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any, Final, TypeGuard

LITTLE: Final = sys.byteorder == "little"
_ITEMSIZE: Final = {code: array(code).itemsize for code in "bBhHiqd"}


@dataclass(frozen=True)
class ColumnType:
    """One column type: its name, the ``array`` typecode of one value, values per row
    (``arity``; 7 for a survival curve), whether rows hold lists (``ragged``), and the
    inclusive range of an integer type."""

    name: str
    typecode: str
    arity: int = 1
    ragged: bool = False
    low: int | None = None
    high: int | None = None

    @property
    def itemsize(self) -> int:
        return _ITEMSIZE[self.typecode]

    @property
    def floating(self) -> bool:
        return self.typecode == "d"

    @property
    def boolean(self) -> bool:
        return self.name == "bool"

    def empty(self) -> Any:
        """This type's column of a table with no rows."""
        return [b"", b""] if self.ragged else b""


def _int(name: str, typecode: str, bits: int, signed: bool = True) -> ColumnType:
    low = -(1 << (bits - 1)) if signed else 0
    high = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    return ColumnType(name, typecode, low=low, high=high)


TYPES: Final[dict[str, ColumnType]] = {
    t.name: t
    for t in (
        ColumnType("bool", "B", low=0, high=1),
        _int("u8", "B", 8, signed=False),
        _int("i8", "b", 8),
        _int("i16", "h", 16),
        _int("i32", "i", 32),
        _int("i64", "q", 64),
        ColumnType("f64", "d"),
        ColumnType("f64[7]", "d", arity=7),
        ColumnType("u8[]", "B", ragged=True, low=0, high=255),
    )
}
# the lengths of a ragged column's rows
LENGTHS: Final = _int("u16", "H", 16, signed=False)

# the format is defined by these sizes
assert _ITEMSIZE == {"b": 1, "B": 1, "h": 2, "H": 2, "i": 4, "q": 8, "d": 8}, (
    f"array typecodes have unexpected sizes on this platform: {_ITEMSIZE}"
)


class ColumnError(ValueError):
    """A table that cannot be (or was not) encoded as its typed columns; ``str()`` names
    the table, the row or column, and the value."""


@dataclass(frozen=True)
class TableSpec:
    """A table's columns: ``(name, type name)`` pairs in encoding order."""

    name: str
    columns: tuple[tuple[str, str], ...]
    # derived in __post_init__ (not compared, not given)
    names: tuple[str, ...] = field(default=(), init=False, compare=False, repr=False)
    width: int = field(default=0, init=False, compare=False, repr=False)
    first_size: int = field(default=1, init=False, compare=False, repr=False)
    pick_plain: Any = field(default=None, init=False, compare=False, repr=False)
    single: bool = field(default=False, init=False, compare=False, repr=False)
    plain_sizes: list[int] = field(default_factory=list, init=False, compare=False, repr=False)
    floats: tuple[int, ...] = field(default=(), init=False, compare=False, repr=False)
    pick_floats: Any = field(default=None, init=False, compare=False, repr=False)
    bools: tuple[int, ...] = field(default=(), init=False, compare=False, repr=False)
    ragged: tuple[int, ...] = field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name, type_name in self.columns:
            if type_name not in TYPES:
                raise ValueError(f"column {name!r} has unknown type {type_name!r}")
        types = tuple(TYPES[type_name] for _, type_name in self.columns)
        # what the hot check (``columns_ok``) needs, computed once
        sizes = tuple(t.itemsize * t.arity for t in types)
        plain = [i for i, t in enumerate(types) if not t.ragged]
        floats = [i for i, t in enumerate(types) if t.floating]
        if not plain or plain[0] != 0:
            raise ValueError(f"table {self.name!r}: the first column must not be ragged")
        set_ = object.__setattr__
        set_(self, "_types", types)
        set_(self, "names", tuple(name for name, _ in self.columns))
        set_(self, "width", len(types))
        set_(self, "first_size", sizes[0])
        set_(self, "pick_plain", itemgetter(*plain))
        set_(self, "single", len(plain) == 1)
        set_(self, "plain_sizes", [sizes[i] for i in plain])
        set_(self, "floats", tuple(floats))
        set_(self, "pick_floats", itemgetter(*floats) if floats else None)
        set_(self, "bools", tuple(i for i, t in enumerate(types) if t.boolean))
        set_(self, "ragged", tuple(i for i, t in enumerate(types) if t.ragged))

    @property
    def types(self) -> tuple[ColumnType, ...]:
        types: tuple[ColumnType, ...] = self._types  # type: ignore[attr-defined]
        return types

    def empty(self) -> list[Any]:
        """The encoded table with no rows (one empty column per column)."""
        return [t.empty() for t in self.types]


_STRUCTS: dict[tuple[str, int], struct.Struct] = {}


def pack_values(code: str, values: Sequence[Any]) -> bytes:
    """``values`` as one column's little-endian bytes, ``code`` a ``struct`` format code
    (``b B h i q d``). The fastest way from a Python sequence to a column: one cached
    ``struct.Struct`` per (code, count), two to four times faster than an ``array`` and its
    ``tobytes``. Out-of-range integers raise ``struct.error``."""
    key = (code, len(values))
    packer = _STRUCTS.get(key)
    if packer is None:
        if len(_STRUCTS) > 4096:  # counts vary with the scenario: keep the cache bounded
            _STRUCTS.clear()
        packer = _STRUCTS[key] = struct.Struct(f"<{len(values)}{code}")
    return packer.pack(*values)


def _swapped_bytes(values: array[Any]) -> bytes:
    """An ``array`` column as its little-endian bytes on a big-endian machine."""
    values = array(values.typecode, values)
    values.byteswap()
    return values.tobytes()


# An ``array`` column as its little-endian bytes, so that every machine writes the same
# bytes. On a little-endian machine that is ``array.tobytes`` itself: no Python frame per
# column, which the schedulers' hot paths call a few dozen times per plan.
column_bytes: Callable[[array[Any]], bytes] = array.tobytes if LITTLE else _swapped_bytes


def _array(typecode: str, data: bytes) -> array[Any]:
    values = array(typecode)
    values.frombytes(data)
    if not LITTLE:
        values.byteswap()
    return values


class TableBuilder:
    """Rows appended one at a time, encoded as typed columns by :meth:`columns`.

    The readable way to build a table, and the exact path behind :func:`pack_rows`: ``add``
    takes one row in column order. A value that its column's type cannot hold raises
    :class:`ColumnError` at once.
    """

    def __init__(self, spec: TableSpec) -> None:
        self.spec = spec
        self._types = spec.types
        self._values: list[array[Any]] = [array(t.typecode) for t in self._types]
        self._lengths: list[array[Any] | None] = [
            array(LENGTHS.typecode) if t.ragged else None for t in self._types
        ]
        self.rows = 0

    def add(self, *row: Any) -> None:
        if len(row) != len(self._types):
            raise ColumnError(
                f"{self.spec.name}[{self.rows}]: a row of {len(row)} values, expected "
                f"{len(self._types)} "
                f"({', '.join(self.spec.names)})"
            )
        for position, (value, kind) in enumerate(zip(row, self._types, strict=True)):
            try:
                _append(self._values[position], self._lengths[position], kind, value)
            except (TypeError, OverflowError, ValueError) as exc:
                name = self.spec.names[position]
                raise ColumnError(
                    f"{self.spec.name}[{self.rows}].{name} is {type(value).__name__} "
                    f"{value!r:.40}, which a {kind.name} column cannot hold ({exc})"
                ) from None
        self.rows += 1

    def columns(self) -> list[Any]:
        """The table as its encoded columns."""
        out: list[Any] = []
        for values, lengths in zip(self._values, self._lengths, strict=True):
            if lengths is None:
                out.append(column_bytes(values))
            else:
                out.append([column_bytes(lengths), column_bytes(values)])
        return out


def _append(values: array[Any], lengths: array[Any] | None, kind: ColumnType, value: Any) -> None:
    if lengths is not None:
        if not isinstance(value, list | tuple):
            raise TypeError("a list is expected")
        items = list(value)
        _check_ints(items, kind)
        lengths.append(len(items))
        values.extend(items)
    elif kind.arity > 1:
        if not isinstance(value, list | tuple) or len(value) != kind.arity:
            raise TypeError(f"a list of {kind.arity} numbers is expected")
        items = [_number(v) for v in value]
        values.extend(items)
    elif kind.floating:
        values.append(_number(value))
    else:
        _check_ints([value], kind)
        values.append(int(value))


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("a number is expected")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def _check_ints(items: list[Any], kind: ColumnType) -> None:
    for item in items:
        if kind.boolean:
            if not isinstance(item, bool | int) or item not in (0, 1):
                raise TypeError("a boolean is expected")
        elif isinstance(item, bool) or not isinstance(item, int):
            raise TypeError("an integer is expected")
        if kind.low is not None and kind.high is not None and not kind.low <= item <= kind.high:
            raise OverflowError(f"outside {kind.low}..{kind.high}")


def pack_rows(spec: TableSpec, rows: Sequence[Sequence[Any]]) -> list[Any]:
    """Rows (lists in column order) as the table's encoded columns; :class:`ColumnError`
    names the first value its column cannot hold.

    The fast path transposes the table and converts each column in C (``array`` checks
    every integer's range and type as it stores it); anything it refuses, or a float column
    it cannot vouch for, goes through :class:`TableBuilder` row by row, which names the
    culprit.
    """
    if not rows:
        return spec.empty()
    try:
        fast = _pack_fast(spec, rows)
    except (TypeError, OverflowError, ValueError):
        fast = None
    if fast is not None and columns_problem(spec, fast) is None:
        return fast
    builder = TableBuilder(spec)
    for row in rows:
        if not isinstance(row, list | tuple):
            raise ColumnError(
                f"{spec.name}[{builder.rows}] is {type(row).__name__} {row!r:.40}, expected a row"
            )
        builder.add(*row)
    return builder.columns()


def _pack_fast(spec: TableSpec, rows: Sequence[Sequence[Any]]) -> list[Any] | None:
    # ``array`` converts in C and refuses what its typecode cannot hold (a float in an
    # integer column, an integer out of range, anything not a number). What it lets through
    # that the types forbid (a non-finite float, a bool byte other than 0 or 1) is what
    # ``columns_problem`` checks afterwards; an int in a float column is that float. A bool
    # outside a bool column ``array`` would store as 0 or 1, where TableBuilder refuses it:
    # such a table goes to TableBuilder, so that a row's acceptance never depends on the others.
    width = len(spec.columns)
    if any(type(row) is not list and type(row) is not tuple or len(row) != width for row in rows):
        return None
    out: list[Any] = []
    for kind, values in zip(spec.types, zip(*rows, strict=True), strict=True):
        if not kind.boolean and bool in set(
            map(type, chain.from_iterable(values) if kind.ragged or kind.arity > 1 else values)
        ):
            return None
        if kind.ragged:
            out.append(
                [
                    column_bytes(array(LENGTHS.typecode, map(len, values))),
                    column_bytes(array(kind.typecode, chain.from_iterable(values))),
                ]
            )
        elif kind.arity > 1:
            if any(len(v) != kind.arity for v in values):
                return None
            out.append(column_bytes(array(kind.typecode, chain.from_iterable(values))))
        else:
            out.append(column_bytes(array(kind.typecode, values)))
    return out


def is_packed(value: Any) -> bool:
    """Whether a table value is already encoded columns (rather than a list of rows)."""
    return isinstance(value, list) and bool(value) and type(value[0]) is bytes


# Column bins an implementation may give as other bytes-like objects: a ``bytearray``, a
# ``bytes`` subclass or a C-contiguous ``memoryview`` (say of an ``array``) packs as the very
# same msgpack bin as ``bytes`` of its contents, so the trace cannot tell them apart, and the
# runner (which checks a record only when its bytes differ from the first implementation's)
# could not refuse them consistently. They are accepted and turned into ``bytes`` before
# anything reads them. A memoryview that is not contiguous does not pack at all: it is left
# as it is, and the schema check names its table and column.
def _as_bin(value: Any) -> Any:
    if type(value) is bytes:
        return value
    if isinstance(value, bytes | bytearray) or (
        isinstance(value, memoryview) and value.c_contiguous
    ):
        return bytes(value)
    return value


def is_column_form(value: Any) -> TypeGuard[list[Any]]:
    """Whether a table value is columns (its first column a bin of some bytes-like kind)."""
    return (
        type(value) is list and bool(value) and isinstance(value[0], bytes | bytearray | memoryview)
    )


def exact_bins(spec: TableSpec, columns: list[Any]) -> list[Any]:
    """Column-form ``columns`` with every bytes-like bin as ``bytes``: the same object when
    all already are (or when its shape is wrong: the schema check names that)."""
    # the common case in a few C calls: every plain column bytes, every ragged one a list
    # of two bytes
    if set(map(type, columns)) <= {bytes, list} and (
        len(columns) != spec.width
        or all(
            set(map(type, columns[i])) <= {bytes} for i in spec.ragged if type(columns[i]) is list
        )
    ):
        return columns
    return [
        [_as_bin(part) for part in column] if type(column) is list else _as_bin(column)
        for column in columns
    ]


def unpack_rows(spec: TableSpec, columns: Sequence[Any]) -> list[list[Any]]:
    """A checked table's rows, each a list in column order (``bool`` columns give bools,
    ``f64[7]`` a list of 7 floats, ragged columns a list per row)."""
    decoded: list[list[Any]] = []
    for kind, column in zip(spec.types, columns, strict=True):
        if kind.ragged:
            lengths = _array(LENGTHS.typecode, column[0]).tolist()
            flat = _array(kind.typecode, column[1]).tolist()
            rows: list[Any] = []
            at = 0
            for length in lengths:
                rows.append(flat[at : at + length])
                at += length
            decoded.append(rows)
        elif kind.arity > 1:
            flat = _array(kind.typecode, column).tolist()
            step = kind.arity
            decoded.append([flat[i : i + step] for i in range(0, len(flat), step)])
        elif kind.boolean:
            decoded.append([bool(v) for v in column])
        else:
            decoded.append(_array(kind.typecode, column).tolist())
    return [list(row) for row in zip(*decoded, strict=True)]


def columns_problem(spec: TableSpec, columns: Any) -> str | None:
    """What keeps ``columns`` from being ``spec``'s encoded table, or None.

    Checks the shape (one column per name, bins of whole values, every column the same
    number of rows, a ragged column's lengths adding up to its values), that floats are
    finite and booleans 0 or 1. Integer columns need no check: every bit pattern is a value.
    """
    return None if columns_ok(spec, columns) else _columns_problem(spec, columns)


def columns_ok(spec: TableSpec, columns: Any) -> bool:
    """:func:`columns_problem`'s fast yes: a handful of C-level passes per table, never a
    Python step per value or per column (the driver runs it on every plan record an
    implementation returns). False only sends the caller to the exact check."""
    if type(columns) is not list or len(columns) != spec.width:
        return False
    plain = spec.pick_plain(columns)
    if spec.single:
        plain = (plain,)
    if list(map(type, plain)).count(bytes) != len(plain):
        return False
    rows = len(plain[0]) // spec.first_size
    if list(map(len, plain)) != [rows * size for size in spec.plain_sizes]:
        return False
    if spec.floats:
        floats = spec.pick_floats(columns)
        if not _all_finite(floats if type(floats) is bytes else b"".join(floats)):
            return False
    for position in spec.bools:
        if columns[position].translate(None, b"\x00\x01"):
            return False
    for position in spec.ragged:
        column = columns[position]
        if type(column) is not list or len(column) != 2:
            return False
        lengths, values = column
        if (
            type(lengths) is not bytes
            or type(values) is not bytes
            or len(lengths) != 2 * rows
            or sum(_array(LENGTHS.typecode, lengths)) != len(values)
        ):
            return False
    return True


def _columns_problem(spec: TableSpec, columns: Any) -> str | None:
    """The exact check behind :func:`columns_problem`'s fast path: names what is wrong."""
    where = spec.name
    if not isinstance(columns, list):
        return f"{where} is {_kind(columns)}, expected a list of {len(spec.columns)} columns"
    if len(columns) != len(spec.columns):
        return (
            f"{where} has {len(columns)} columns, expected {len(spec.columns)} "
            f"({', '.join(spec.names)})"
        )
    rows: int | None = None
    for (name, _), kind, column in zip(spec.columns, spec.types, columns, strict=True):
        if kind.ragged:
            if (
                not isinstance(column, list)
                or len(column) != 2
                or type(column[0]) is not bytes
                or type(column[1]) is not bytes
            ):
                return f"{where}.{name} is {_kind(column)}, expected [lengths, values] bins"
            lengths_bin, values = column
            if len(lengths_bin) % LENGTHS.itemsize:
                return f"{where}.{name} lengths are {len(lengths_bin)} bytes, not whole u16 values"
            count = len(lengths_bin) // LENGTHS.itemsize
            total = sum(_array(LENGTHS.typecode, lengths_bin))
            if total * kind.itemsize != len(values):
                return (
                    f"{where}.{name} lengths add up to {total} values, its values bin holds "
                    f"{len(values)} bytes"
                )
        else:
            if type(column) is not bytes:
                return f"{where}.{name} is {_kind(column)}, expected a bin of {kind.name} values"
            size = kind.itemsize * kind.arity
            if len(column) % size:
                return f"{where}.{name} is {len(column)} bytes, not whole {kind.name} values"
            count = len(column) // size
            if kind.floating and column and not _all_finite(column):
                bad = next(v for v in _array("d", column) if not math.isfinite(v))
                return f"{where}.{name} holds float {bad}, expected finite numbers"
            if kind.boolean and column.translate(None, b"\x00\x01"):
                return f"{where}.{name} holds a byte other than 0 and 1 in a bool column"
        if rows is None:
            rows = count
        elif count != rows:
            return f"{where}.{name} has {count} rows, {spec.columns[0][0]} has {rows}"
    return None


def _all_finite(column: bytes) -> bool:
    # One C-level sum: a NaN or an infinity anywhere makes it non-finite. A finite sum that
    # overflows is the only false alarm, and the exact scan then decides.
    values = memoryview(column).cast("d") if LITTLE else _array("d", column)
    if math.isfinite(sum(values)):
        return True
    return all(math.isfinite(v) for v in values)


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r:.40}"
