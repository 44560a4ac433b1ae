"""Hostile and damaged traces: reading one either succeeds or raises TraceFormatError.

Nothing else may escape (no ValueError from msgpack, no MemoryError from a forged length, no
RecursionError from deep nesting). ``TRACEDIFF_FUZZ_EXAMPLES`` sets the quick run's size;
``TRACEDIFF_FUZZ_LONG=1`` enables the long, slow-marked run.
"""

from __future__ import annotations

import os
import struct
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracediff.errors import TraceFormatError
from tracediff.trace import TraceReader, decode, encode, first_difference, trace_bytes

FUZZ_EXAMPLES = int(os.environ.get("TRACEDIFF_FUZZ_EXAMPLES", "300"))
LONG_EXAMPLES = 20_000
LONG_ENABLED = os.environ.get("TRACEDIFF_FUZZ_LONG") == "1"

# No example database: these tests must not leave a .hypothesis directory behind.
FUZZ_SETTINGS = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

DEEP_ARRAY = b"\x91" * 100_000 + b"\xc0"
HUGE_MAP = b"\xdf\xff\xff\xff\xff"  # a map claiming 2^32 - 1 entries and holding none
HUGE_ARRAY = b"\xdd\xff\xff\xff\xff"
HUGE_STR = b"\xdb\xff\xff\xff\xff"
DEEP_MAPS = b"\x81\xa1k" * 65 + b"\xc0"  # valid msgpack, one level past MAX_DEPTH
HOSTILE_PAYLOADS = [DEEP_ARRAY, HUGE_MAP, HUGE_ARRAY, HUGE_STR, DEEP_MAPS]
# well-formed maps, so that forged frames also reach the structural and end-frame checks
PLAUSIBLE_MAPS = [
    encode({"records": 99, "digest": "0" * 64}),
    encode({"records": 0, "digest": ""}),
    encode({"impl": "forged"}),
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=8),
)
records = st.dictionaries(
    st.text(max_size=4),
    st.one_of(scalars, st.lists(scalars, max_size=4)),
    max_size=5,
)


@dataclass(frozen=True)
class Trace:
    data: bytes
    header: bytes
    payloads: list[bytes]
    provenance: dict[str, Any] | None


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    header = encode({"format": "tracediff-trace", "version": 1, "scenario": draw(records)})
    payloads = [encode(r) for r in draw(st.lists(records, max_size=6))]
    provenance = draw(st.none() | st.fixed_dictionaries({"impl": st.text(max_size=6)}))
    return Trace(trace_bytes(header, payloads, provenance), header, payloads, provenance)


def frame_offsets(data: bytes) -> list[int]:
    return [frame.offset for frame in TraceReader.from_bytes(data).frames()]


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A valid trace and a copy with one to three random corruptions applied."""
    trace = draw(traces())
    data = bytearray(trace.data)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        corrupt = draw(st.sampled_from(CORRUPTIONS))
        data = corrupt(draw, trace, data)
    return trace.data, bytes(data)


# Each corruption draws its own parameters; strategies are built from fixed pieces so that
# Hypothesis can cache them (building fresh strategies per example dominated the run time).
Corruption = Callable[[st.DrawFn, Trace, bytearray], bytearray]

HOSTILE = st.sampled_from(HOSTILE_PAYLOADS + PLAUSIBLE_MAPS) | st.binary(max_size=32)
FORGED_LENGTHS = st.sampled_from(
    [2**32 - 1, 2**31, 256 * 1024 * 1024, 256 * 1024 * 1024 + 1]
) | st.integers(min_value=0, max_value=2**32 - 1)


def position(draw: st.DrawFn, data: bytearray) -> int:
    return draw(st.integers(min_value=0, max_value=max(len(data) - 1, 0)))


def frame_start(draw: st.DrawFn, trace: Trace) -> int:
    return draw(st.sampled_from(frame_offsets(trace.data)))


def truncate(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    return data[: draw(st.integers(min_value=0, max_value=len(data)))]


def flip(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    out = bytearray(data)
    if out:
        out[position(draw, data)] ^= 1 << draw(st.integers(min_value=0, max_value=7))
    return out


def overwrite(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    at = position(draw, data)
    junk = draw(st.binary(min_size=1, max_size=16))
    return data[:at] + junk + data[at + len(junk) :]


def splice(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    source, target = position(draw, data), position(draw, data)
    piece = data[source : source + draw(st.integers(min_value=1, max_value=64))]
    return data[:target] + piece + data[target:]


def huge_length(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    start = frame_start(draw, trace)
    out = bytearray(data)
    if start + 5 <= len(out):
        out[start + 1 : start + 5] = struct.pack(">I", draw(FORGED_LENGTHS))
    return out


def hostile_record(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    # valid framing, CRC and end frame around a payload that only decoding can reject
    payloads = list(trace.payloads)
    payloads.insert(draw(st.integers(min_value=0, max_value=len(payloads))), draw(HOSTILE))
    return bytearray(trace_bytes(trace.header, payloads, trace.provenance))


def hostile_header(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    return bytearray(trace_bytes(draw(HOSTILE), trace.payloads, trace.provenance))


def forged_frame(draw: st.DrawFn, trace: Trace, data: bytearray) -> bytearray:
    # a well-formed frame (right length and CRC) of any kind, slipped in at a frame boundary
    start = frame_start(draw, trace)
    kind = draw(st.sampled_from([b"H", b"R", b"P", b"E"]))
    payload = draw(HOSTILE)
    frame = struct.pack(">cII", kind, len(payload), zlib.crc32(payload)) + payload
    return data[:start] + frame + data[start:]


CORRUPTIONS: list[Corruption] = [
    truncate,
    flip,
    overwrite,
    splice,
    huge_length,
    hostile_record,
    hostile_header,
    forged_frame,
]


def read_fully(data: bytes) -> None:
    """Everything a caller may do with a trace; only TraceFormatError may come out."""
    try:
        reader = TraceReader.from_bytes(data, name="fuzz.trace")
        reader.read()
        list(reader.records())
        _ = reader.provenance  # the property reads the whole file once more
    except TraceFormatError as error:
        assert error.path == "fuzz.trace"
        assert str(error).startswith("fuzz.trace")


def check_corrupted(original: bytes, data: bytes) -> None:
    read_fully(data)
    try:
        first_difference(
            TraceReader.from_bytes(original), TraceReader.from_bytes(data, name="fuzz.trace")
        )
    except TraceFormatError as error:
        assert error.path == "fuzz.trace"


@settings(FUZZ_SETTINGS, max_examples=FUZZ_EXAMPLES)
@given(case=corrupted())
def test_corrupted_traces_fail_cleanly(case: tuple[bytes, bytes]) -> None:
    check_corrupted(*case)


@settings(FUZZ_SETTINGS, max_examples=max(FUZZ_EXAMPLES // 3, 10))
@given(trace=traces())
def test_valid_traces_round_trip(trace: Trace) -> None:
    reader = TraceReader.from_bytes(trace.data)
    assert [payload for _, _, payload in reader.records()] == trace.payloads
    assert reader.provenance == trace.provenance
    assert first_difference(reader, TraceReader.from_bytes(trace.data)) is None


@settings(FUZZ_SETTINGS, max_examples=FUZZ_EXAMPLES)
@given(payload=st.binary(max_size=64))
def test_decode_of_random_bytes_fails_cleanly(payload: bytes) -> None:
    try:
        decode(payload, path="p", offset=0, record=0)
    except TraceFormatError:
        pass


@pytest.mark.slow
@pytest.mark.skipif(not LONG_ENABLED, reason="long fuzz run: set TRACEDIFF_FUZZ_LONG=1")
@settings(FUZZ_SETTINGS, max_examples=LONG_EXAMPLES)
@given(case=corrupted())
def test_corrupted_traces_fail_cleanly_long(case: tuple[bytes, bytes]) -> None:
    check_corrupted(*case)


# -- the worst cases, directly -----------------------------------------------------------------


@contextmanager
def _at_most_mib(limit: int) -> Iterator[None]:
    """The block allocates at most ``limit`` MiB at its peak: "fails fast without
    allocating", checked by memory rather than by a wall-clock bound a busy machine breaks."""
    tracemalloc.start()
    try:
        yield
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < limit * 2**20, f"peak {peak / 2**20:.1f} MiB"


def header() -> bytes:
    return encode({"format": "tracediff-trace", "version": 1})


def test_max_length_prefix_fails_fast_without_allocating() -> None:
    data = bytearray(trace_bytes(header(), [encode({"t": "plan"})]))
    record_start = frame_offsets(bytes(data))[1]
    data[record_start + 1 : record_start + 5] = b"\xff\xff\xff\xff"
    with _at_most_mib(16), pytest.raises(TraceFormatError, match="exceeds the 268435456") as info:
        TraceReader.from_bytes(bytes(data)).read()
    assert (info.value.offset, info.value.record) == (record_start, 1)


@pytest.mark.parametrize(
    "payload", HOSTILE_PAYLOADS, ids=["deep", "map", "array", "str", "deep-maps"]
)
def test_hostile_record_with_valid_crc_fails_fast(payload: bytes) -> None:
    data = trace_bytes(header(), [encode({"t": "plan"}), payload])
    record_start = frame_offsets(data)[2]
    with _at_most_mib(16), pytest.raises(TraceFormatError, match="corrupt: ") as info:
        TraceReader.from_bytes(data).read()
    assert (info.value.offset, info.value.record) == (record_start, 2)


def test_hostile_header_fails_at_open() -> None:
    with pytest.raises(TraceFormatError, match="nested too deeply") as info:
        TraceReader.from_bytes(trace_bytes(DEEP_ARRAY, []))
    assert (info.value.offset, info.value.record) == (12, 0)
