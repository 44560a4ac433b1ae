"""One request of a workload, as every reader gives it, whatever the file's format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TraceRequest:
    """A request read from a request trace.

    ``arrival_us`` is on the file's own clock (integer microseconds; a window's scenario
    counts from its first request). ``hash_ids`` are the prefix-cache block hashes of the
    prompt, in order (Mooncake's ``hash_ids``: one per 512-token block, equal ids meaning
    equal content); empty for formats that record none.
    """

    line: int  # 1-based line of the file, for messages and provenance
    arrival_us: int
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


LineParser = Callable[[str, int], TraceRequest]
"""A format's reader of one line: (its text, its number) -> the request; ValueError saying
what is wrong (the caller adds the file and line)."""
