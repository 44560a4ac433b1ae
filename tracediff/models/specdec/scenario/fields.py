"""Untyped data (JSON, TOML) checked into dataclass fields, by the fields' own annotations.

Scenario files, trace headers and profile TOML files are read into plain dicts; before a
value reaches a dataclass it is checked against the field's annotated type here, so that a
string where a number belongs, a NaN, a 30-digit integer or a list of the wrong length is
refused by name (:class:`FieldError`, which callers turn into their own one-line error)
rather than met later as a crash. Fields added to a dataclass are checked without any change
here: the annotation is the schema.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Any

# The largest integer accepted: exact as a float, and far beyond any real count, clock or
# seed; a forged 30-digit value is refused rather than met inside a scheduler.
INT_LIMIT = 2**53
TEXT_LIMIT = 200  # characters of a name
SHOWN = 40  # characters of a bad value quoted in a message


class FieldError(ValueError):
    """A value that does not fit its field; ``str()`` names the field and what it expects."""


def shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def fields_of(cls: Any, data: Any, where: str, *, partial: bool = False) -> dict[str, Any]:
    """``data`` checked against dataclass ``cls``: no unknown keys, every field without a
    default present (unless ``partial``), each value of its field's type (ints widened to
    float where a float belongs, lists to tuples)."""
    if not isinstance(data, dict):
        raise FieldError(f"{where} is {type(data).__name__} {shown(data)}, expected a table")
    hints, fields = _schema(cls)
    unknown = sorted(str(k) for k in data if k not in fields)
    if unknown:
        raise FieldError(f"{where} has unknown keys {unknown}; allowed: {sorted(fields)}")
    if not partial:
        required = [
            name
            for name, f in fields.items()
            if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
            and name not in data
        ]
        if required:
            raise FieldError(f"{where} lacks {required}")
    return {key: conform(value, hints[key], f"{where}.{key}") for key, value in data.items()}


@functools.lru_cache(maxsize=64)
def _schema(cls: Any) -> tuple[dict[str, Any], dict[str, dataclasses.Field[Any]]]:
    """A dataclass's resolved annotations and fields, once per class: resolving annotations
    costs far more than checking a value, and a scenario file holds many requests."""
    return typing.get_type_hints(cls), {f.name: f for f in dataclasses.fields(cls)}


def conform(value: Any, hint: Any, where: str) -> Any:
    """``value`` as type ``hint`` (int, float, bool, str or tuples of them), or FieldError."""
    kind = type(value)
    if hint is bool:
        ok = kind is bool
    elif hint is int:
        ok = kind is int and -INT_LIMIT <= value <= INT_LIMIT
    elif hint is float:
        ok = (kind is float and math.isfinite(value)) or (
            kind is int and -INT_LIMIT <= value <= INT_LIMIT
        )
        value = float(value) if ok else value
    elif hint is str:
        ok = kind is str and len(value) <= TEXT_LIMIT
    elif typing.get_origin(hint) is tuple:
        if kind not in (list, tuple):
            raise FieldError(f"{where} is {kind.__name__} {shown(value)}, expected a list")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(conform(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if len(value) != len(args):
            raise FieldError(
                f"{where} is {shown(value)}, a list of {len(value)}; expected {len(args)} items"
            )
        pairs = enumerate(zip(value, args, strict=True))
        return tuple(conform(v, a, f"{where}[{i}]") for i, (v, a) in pairs)
    else:
        ok = True  # a field type this check does not know: the dataclass takes it as it is
    if not ok and kind is int and hint in (int, float):
        raise FieldError(f"{where} is {shown(value)}, beyond the ±2**53 a number may be")
    if not ok:
        expected = {bool: "true or false", int: "an integer", float: "a finite number"}.get(
            hint, f"a string of at most {TEXT_LIMIT} characters" if hint is str else str(hint)
        )
        raise FieldError(f"{where} is {kind.__name__} {shown(value)}, expected {expected}")
    return value
