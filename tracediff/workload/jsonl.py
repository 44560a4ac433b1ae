"""JSON-lines formats: Mooncake's traces and tracediff's own simple format."""

from __future__ import annotations

import json
from typing import Any

from tracediff.errors import NESTING
from tracediff.workload.numbers import count, decimal_us
from tracediff.workload.request import TraceRequest

MOONCAKE_KEYS = frozenset({"timestamp", "input_length", "output_length"})
OWN_KEYS = frozenset({"arrival_us", "input_tokens", "output_tokens"})


def _object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(NESTING) from None
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, expected an object")
    return value


def _field(data: dict[str, Any], key: str) -> Any:
    if key not in data:
        raise ValueError(f"no {key!r}")
    return data[key]


def _hashes(data: dict[str, Any]) -> tuple[int, ...]:
    value = data.get("hash_ids", [])
    if not isinstance(value, list):
        raise ValueError(f"hash_ids is {type(value).__name__}, expected a list of integers")
    return tuple(count(v, "hash_ids") for v in value)


def parse_mooncake(text: str, line: int) -> TraceRequest:
    data = _object(text)
    stamp = _field(data, "timestamp")
    # Mooncake's timestamps are milliseconds (integers in the published traces)
    return TraceRequest(
        line,
        decimal_us(stamp, 1000, "timestamp"),
        count(_field(data, "input_length"), "input_length"),
        count(_field(data, "output_length"), "output_length"),
        _hashes(data),
    )


def parse_own(text: str, line: int) -> TraceRequest:
    data = _object(text)
    return TraceRequest(
        line,
        count(_field(data, "arrival_us"), "arrival_us"),
        count(_field(data, "input_tokens"), "input_tokens"),
        count(_field(data, "output_tokens"), "output_tokens"),
        _hashes(data),
    )
