"""The trace file format: round trips, canonical bytes, atomic writes, and every error."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracediff.errors import TraceFormatError
from tracediff.trace import (
    MAX_FRAME_BYTES,
    BodyDigest,
    LockstepDigests,
    Trace,
    TraceReader,
    TraceWriter,
    decode,
    encode,
    first_difference,
    read_trace,
    trace_bytes,
)
from tracediff.trace.codec import MAX_DEPTH

HEADER: dict[str, Any] = {
    "format": "tracediff-trace",
    "version": 1,
    "scenario": {"seed": 7, "profile": "quick"},
}
RECORDS: list[dict[str, Any]] = [
    {"t": "plan", "step": i, "lanes": [i, i + 1], "score": i / 3, "ok": i % 2 == 0}
    for i in range(5)
]
PROVENANCE: dict[str, Any] = {"impl": "reference", "host": "ci-1", "wall_s": 1.25}


def build(
    records: list[dict[str, Any]] = RECORDS,
    header: dict[str, Any] = HEADER,
    provenance: dict[str, Any] | None = PROVENANCE,
) -> bytes:
    return trace_bytes(encode(header), [encode(r) for r in records], provenance)


def stored(payload: bytes) -> bytes:
    """``payload`` as uncompressed (stored) raw-deflate blocks: a valid next piece of any
    frame's deflate stream, so hand-built frames need no shared compressor state."""
    pieces = [payload[i : i + 0xFFFF] for i in range(0, len(payload), 0xFFFF)] or [b""]
    return b"".join(b"\x00" + struct.pack("<HH", len(p), len(p) ^ 0xFFFF) + p for p in pieces)


def frame(
    kind: bytes, payload: bytes, *, length: int | None = None, crc: int | None = None
) -> bytes:
    """A raw frame, with the length or checksum forged when asked."""
    data = stored(payload)
    return (
        struct.pack(
            ">cII",
            kind,
            len(data) if length is None else length,
            zlib.crc32(data) if crc is None else crc,
        )
        + data
    )


PREAMBLE = b"TDTRACE\n" + struct.pack(">HH", 2, 0)


def end_frame(header: bytes, records: list[bytes]) -> bytes:
    digest = BodyDigest()
    digest.add_header(header)
    for record in records:
        digest.add_record(record)
    return frame(b"E", encode({"records": len(records), "digest": digest.hexdigest()}))


def offsets(data: bytes) -> list[int]:
    return [f.offset for f in TraceReader.from_bytes(data).frames()]


def read_error(data: bytes) -> TraceFormatError:
    with pytest.raises(TraceFormatError) as info:
        TraceReader.from_bytes(data, name="t.trace").read()
    return info.value


# -- round trips -------------------------------------------------------------------------


def write_file(path: Path, provenance: dict[str, Any] | None = PROVENANCE) -> str:
    with TraceWriter(path, HEADER) as writer:
        for record in RECORDS:
            writer.write_record(encode(record))
        if provenance is not None:
            writer.write_provenance(provenance)
        assert writer.records == len(RECORDS)
    return writer.digest


def test_round_trip_from_file(tmp_path: Path) -> None:
    path = tmp_path / "a.trace"
    digest = write_file(path)

    trace = read_trace(path)
    assert trace == Trace(header=HEADER, records=RECORDS, provenance=PROVENANCE, digest=digest)
    reader = TraceReader(path)
    assert reader.header == HEADER
    assert reader.provenance == PROVENANCE
    assert list(reader.decoded_records()) == RECORDS
    assert reader.verify() == digest
    assert [f.kind for f in reader.frames()] == [b"H"] + [b"R"] * 5 + [b"P", b"E"]
    assert [f.index for f in reader.frames()] == list(range(8))


def test_round_trip_from_bytes_matches_the_file(tmp_path: Path) -> None:
    path = tmp_path / "a.trace"
    write_file(path)
    data = build()
    assert path.read_bytes() == data

    reader = TraceReader.from_bytes(data)
    assert reader.read() == read_trace(path)
    frames = list(reader.frames())
    assert frames[0].offset == 12
    assert [(i, o, p) for i, o, p in reader.records()] == [
        (f.index, f.offset, f.payload) for f in frames if f.kind == b"R"
    ]


def test_empty_trace_and_no_provenance() -> None:
    trace = TraceReader.from_bytes(build(records=[], provenance=None)).read()
    assert trace.records == [] and trace.provenance is None


def test_provenance_written_first_still_lands_before_the_end(tmp_path: Path) -> None:
    path = tmp_path / "a.trace"
    with TraceWriter(path, HEADER) as writer:
        writer.write_provenance(PROVENANCE)
        for record in RECORDS:
            writer.write_record(encode(record))
    assert path.read_bytes() == build()


def test_provenance_may_sit_anywhere_after_the_header() -> None:
    header, records = encode(HEADER), [encode(r) for r in RECORDS]
    data = (
        PREAMBLE
        + frame(b"H", header)
        + frame(b"P", encode(PROVENANCE))
        + b"".join(frame(b"R", r) for r in records)
        + end_frame(header, records)
    )
    reader = TraceReader.from_bytes(data)
    assert reader.read() == TraceReader.from_bytes(build()).read()
    # body indices stay 1.. even though the frame ordinals shifted by the provenance
    assert [i for i, _, _ in reader.records()] == [1, 2, 3, 4, 5]
    assert first_difference(reader, TraceReader.from_bytes(build())) is None


# -- digest and determinism ----------------------------------------------------------------


def test_digest_is_body_digest_of_the_payloads_and_ignores_provenance(tmp_path: Path) -> None:
    expected = BodyDigest()
    expected.add_header(encode(HEADER))
    for record in RECORDS:
        expected.add_record(encode(record))

    with_provenance = write_file(tmp_path / "a.trace")
    without = write_file(tmp_path / "b.trace", provenance=None)
    assert with_provenance == without == expected.hexdigest()
    assert expected.records == len(RECORDS)
    assert (tmp_path / "a.trace").read_bytes() != (tmp_path / "b.trace").read_bytes()
    assert read_trace(tmp_path / "b.trace").digest == expected.hexdigest()


def test_digest_separates_records_by_length() -> None:
    one, two = BodyDigest(), BodyDigest()
    one.add_header(b"\x80")
    two.add_header(b"\x80")
    one.add_record(b"\x01\x02")
    two.add_record(b"\x01")
    two.add_record(b"\x02")
    assert one.hexdigest() != two.hexdigest()


def test_body_digest_order_is_enforced() -> None:
    digest = BodyDigest()
    with pytest.raises(ValueError, match="header before"):
        digest.add_record(b"\x80")
    digest.add_header(b"\x80")
    with pytest.raises(ValueError, match="already has a header"):
        digest.add_header(b"\x80")


def test_writing_twice_gives_identical_bytes(tmp_path: Path) -> None:
    write_file(tmp_path / "a.trace")
    write_file(tmp_path / "b.trace")
    assert (tmp_path / "a.trace").read_bytes() == (tmp_path / "b.trace").read_bytes()


# -- first_difference ------------------------------------------------------------------------


def put(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_first_difference(tmp_path: Path) -> None:
    base = put(tmp_path / "base", build())
    same = put(tmp_path / "same", build())
    assert first_difference(base, same) is None

    changed = [dict(r) for r in RECORDS]
    changed[2]["score"] = 0.6666666666666667 + 1e-16
    assert first_difference(base, put(tmp_path / "k", build(records=changed))) == 3

    other_header = put(tmp_path / "h", build(header={**HEADER, "version": 2}))
    assert first_difference(base, other_header) == 0

    shorter = put(tmp_path / "short", build(records=RECORDS[:3]))
    assert first_difference(base, shorter) == 4
    assert first_difference(shorter, base) == 4

    other_provenance = put(tmp_path / "p", build(provenance={"impl": "optimized"}))
    assert first_difference(base, other_provenance) is None
    no_provenance = put(tmp_path / "np", build(provenance=None))
    assert first_difference(no_provenance, base) is None


def test_first_difference_reports_bad_files(tmp_path: Path) -> None:
    base = put(tmp_path / "base", build())
    with pytest.raises(TraceFormatError, match="does not exist"):
        first_difference(base, tmp_path / "missing")
    # equal bodies up to the cut, so the damaged end frame is reached and reported
    with pytest.raises(TraceFormatError, match="truncated: frame needs"):
        first_difference(base, put(tmp_path / "cut", build()[:-40]))


# -- atomic writes ---------------------------------------------------------------------------


class Boom(Exception):
    pass


def test_exception_inside_writer_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.trace"
    with pytest.raises(Boom), TraceWriter(path, HEADER) as writer:
        writer.write_record(encode(RECORDS[0]))
        raise Boom
    assert os.listdir(tmp_path) == []


def test_exception_inside_writer_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "a.trace"
    write_file(path)
    old = path.read_bytes()
    with pytest.raises(Boom), TraceWriter(path, {"other": True}) as writer:
        writer.write_record(encode({"t": "x"}))
        raise Boom
    assert path.read_bytes() == old
    assert os.listdir(tmp_path) == ["a.trace"]


def test_file_appears_only_at_close_and_abort_discards(tmp_path: Path) -> None:
    path = tmp_path / "a.trace"
    writer = TraceWriter(path, HEADER)
    writer.write_record(encode(RECORDS[0]))
    assert not path.exists()
    writer.close()
    writer.close()  # idempotent
    assert read_trace(path).records == RECORDS[:1]
    with pytest.raises(ValueError, match="already closed"):
        writer.write_record(encode(RECORDS[0]))

    aborted = TraceWriter(tmp_path / "b.trace", HEADER)
    aborted.write_record(encode(RECORDS[0]))
    aborted.abort()
    assert os.listdir(tmp_path) == ["a.trace"]


def test_unencodable_header_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        TraceWriter(tmp_path / "a.trace", {"bad": object()})
    assert os.listdir(tmp_path) == []


def test_second_provenance_is_refused(tmp_path: Path) -> None:
    with TraceWriter(tmp_path / "a.trace", HEADER) as writer:
        writer.write_provenance(PROVENANCE)
        with pytest.raises(ValueError, match="at most one provenance"):
            writer.write_provenance(PROVENANCE)


# -- errors ----------------------------------------------------------------------------------


def test_bad_magic() -> None:
    error = read_error(b"PK\x03\x04" + build()[4:])
    assert "not a tracediff trace (bad magic)" in str(error)
    assert error.offset == 0


def test_other_version() -> None:
    data = bytearray(build())
    data[8:10] = struct.pack(">H", 3)
    error = read_error(bytes(data))
    assert "trace format version 3; this tracediff reads version 2" in str(error)


def test_version_1_names_the_upgrade() -> None:
    data = bytearray(build())
    data[8:10] = struct.pack(">H", 1)
    error = read_error(bytes(data))
    assert "trace format version 1; this tracediff reads version 2" in str(error)
    assert "tracediff upgrade" in str(error)


def test_stored_payloads_are_one_deflate_stream_and_smaller() -> None:
    """Each frame is the next piece of one raw deflate stream: the payloads come back
    exactly, and records that repeat each other cost far less than their size."""
    records = [{"t": "plan", "rows": list(range(200)), "i": i} for i in range(20)]
    data = build(records)
    assert read_trace_bytes(data).records == records
    raw = sum(len(encode(r)) for r in records)
    assert len(data) < raw / 4


def test_a_frame_that_is_not_the_stream_s_next_piece_is_corrupt() -> None:
    header = encode(HEADER)
    bad = b"\xff\xff\xff\xff"  # an invalid deflate block type
    forged = struct.pack(">cII", b"R", len(bad), zlib.crc32(bad)) + bad
    error = read_error(PREAMBLE + frame(b"H", header) + forged + end_frame(header, []))
    assert "not the next piece of the trace's deflate stream" in str(error)
    assert error.record == 1


def test_a_decompression_bomb_stops_at_the_frame_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import tracediff.trace.reader as reader_module

    monkeypatch.setattr(reader_module, "MAX_FRAME_BYTES", 1000)
    header = encode(HEADER)
    bomb = zlib.compressobj(9, zlib.DEFLATED, -15)
    data = bomb.compress(b"\x00" * 100_000) + bomb.flush(zlib.Z_SYNC_FLUSH)
    assert len(data) < 1000
    forged = struct.pack(">cII", b"R", len(data), zlib.crc32(data)) + data
    error = read_error(PREAMBLE + frame(b"H", header) + forged + end_frame(header, []))
    assert "inflates past the 1000-byte limit" in str(error)


def read_trace_bytes(data: bytes) -> Trace:
    return TraceReader.from_bytes(data).read()


def test_reserved_field_must_be_zero() -> None:
    data = bytearray(build())
    data[11] = 1
    assert "reserved preamble field is 1" in str(read_error(bytes(data)))


@pytest.mark.parametrize("size", [0, 3, 8, 11])
def test_short_preamble(size: int) -> None:
    error = read_error(build()[:size])
    assert "truncated" in str(error) and error.offset == 0


def test_only_a_preamble() -> None:
    error = read_error(PREAMBLE)
    assert "truncated: no end frame" in str(error)
    assert (error.offset, error.record) == (12, 0)


def test_unknown_kind() -> None:
    data = bytearray(build())
    at = offsets(build())[2]
    data[at] = ord("X")
    error = read_error(bytes(data))
    assert "unknown frame kind b'X'" in str(error)
    assert (error.offset, error.record) == (at, 2)
    assert f"t.trace at byte {at}, record 2:" in str(error)


def test_length_past_end_of_file() -> None:
    data = build()
    last = offsets(data)[-1]
    cut = data[: last + 12]
    error = read_error(cut)
    payload_length = struct.unpack(">I", data[last + 1 : last + 5])[0]
    assert f"truncated: frame needs {9 + payload_length} bytes, 12 left" in str(error)
    assert (error.offset, error.record) == (last, 7)


def test_truncated_inside_a_frame_header() -> None:
    data = build()
    at = offsets(data)[3]
    error = read_error(data[: at + 4])
    assert "truncated: frame needs at least 9 bytes, 4 left" in str(error)
    assert (error.offset, error.record) == (at, 3)


def test_truncated_on_a_frame_boundary_has_no_end() -> None:
    data = build()
    end = offsets(data)[-1]
    error = read_error(data[:end])
    assert "truncated: no end frame" in str(error)
    assert (error.offset, error.record) == (end, 7)


@pytest.mark.parametrize("length", [2**32 - 1, MAX_FRAME_BYTES + 1])
def test_huge_length_prefix(length: int) -> None:
    data = bytearray(build())
    at = offsets(build())[1]
    data[at + 1 : at + 5] = struct.pack(">I", length)
    error = read_error(bytes(data))
    assert "exceeds the 268435456-byte limit" in str(error)
    assert (error.offset, error.record) == (at, 1)


def test_length_within_limit_but_past_the_file() -> None:
    data = bytearray(build())
    at = offsets(build())[1]
    data[at + 1 : at + 5] = struct.pack(">I", MAX_FRAME_BYTES)
    error = read_error(bytes(data))
    assert f"truncated: frame needs {MAX_FRAME_BYTES + 9} bytes" in str(error)


def test_checksum_mismatch() -> None:
    data = bytearray(build())
    at = offsets(build())[3]
    data[at + 9 + 2] ^= 0x10
    error = read_error(bytes(data))
    assert "corrupt: checksum mismatch" in str(error)
    assert (error.offset, error.record) == (at, 3)


def test_checksum_is_checked_while_streaming_records() -> None:
    data = bytearray(build())
    at = offsets(build())[4]
    data[at + 9] ^= 0x01
    reader = TraceReader.from_bytes(bytes(data))
    seen = []
    with pytest.raises(TraceFormatError, match="checksum mismatch"):
        for index, _, _ in reader.records():
            seen.append(index)
    assert seen == [1, 2, 3]


def test_header_must_come_first() -> None:
    record = encode(RECORDS[0])
    error = read_error(PREAMBLE + frame(b"R", record) + frame(b"H", encode(HEADER)))
    assert "first frame is kind b'R'" in str(error)
    assert (error.offset, error.record) == (12, 0)


def test_duplicate_header() -> None:
    header = encode(HEADER)
    data = PREAMBLE + frame(b"H", header) + frame(b"H", header) + end_frame(header, [])
    error = read_error(data)
    assert "a second header frame" in str(error)
    assert (error.offset, error.record) == (12 + 9 + len(stored(header)), 1)


def test_duplicate_provenance() -> None:
    header, provenance = encode(HEADER), encode(PROVENANCE)
    second = 12 + 9 + len(stored(header)) + 9 + len(stored(provenance))
    data = (
        PREAMBLE
        + frame(b"H", header)
        + frame(b"P", provenance)
        + frame(b"P", provenance)
        + end_frame(header, [])
    )
    error = read_error(data)
    assert "a second provenance frame" in str(error)
    assert (error.offset, error.record) == (second, 2)


@pytest.mark.parametrize("extra", [b"\x00", frame(b"R", b"\x80")])
def test_bytes_after_the_end_frame(extra: bytes) -> None:
    data = build()
    error = read_error(data + extra)
    assert f"{len(extra)} bytes after the end frame" in str(error)
    assert (error.offset, error.record) == (len(data), 8)


def test_end_frame_count_mismatch() -> None:
    header, records = encode(HEADER), [encode(r) for r in RECORDS]
    digest = BodyDigest()
    digest.add_header(header)
    for record in records:
        digest.add_record(record)
    body = PREAMBLE + frame(b"H", header) + b"".join(frame(b"R", r) for r in records)
    end = frame(b"E", encode({"records": 4, "digest": digest.hexdigest()}))
    error = read_error(body + end)
    assert "end frame counts 4 records, the file holds 5" in str(error)
    assert (error.offset, error.record) == (len(body), 6)


def test_end_frame_digest_mismatch() -> None:
    header, records = encode(HEADER), [encode(r) for r in RECORDS]
    body = PREAMBLE + frame(b"H", header) + b"".join(frame(b"R", r) for r in records)
    end = frame(b"E", encode({"records": 5, "digest": "0" * 64}))
    error = read_error(body + end)
    assert "body digest mismatch" in str(error)
    assert (error.offset, error.record) == (len(body), 6)


def test_dropped_record_is_caught_by_the_end_frame() -> None:
    header, records = encode(HEADER), [encode(r) for r in RECORDS]
    data = (
        PREAMBLE
        + frame(b"H", header)
        + b"".join(frame(b"R", r) for r in records)
        + end_frame(header, records)
    )
    starts = offsets(data)
    cut = data[: starts[2]] + data[starts[3] :]
    assert "end frame counts 5 records, the file holds 4" in str(read_error(cut))


def test_dropped_compressed_record_is_refused_as_corrupt() -> None:
    """Dropping a frame the writer compressed also breaks the deflate stream the later
    frames continue: whatever they inflate to, the file is refused as corrupt."""
    data = build()
    starts = offsets(data)
    error = read_error(data[: starts[2]] + data[starts[3] :])
    assert "corrupt" in str(error) and error.record is not None and error.record >= 2


@pytest.mark.parametrize("end", [{"records": 0}, {"records": True, "digest": ""}, [0, ""]])
def test_malformed_end_frame(end: Any) -> None:
    header = encode(HEADER)
    error = read_error(PREAMBLE + frame(b"H", header) + frame(b"E", encode(end)))
    assert "end frame" in str(error)
    assert (error.offset, error.record) == (12 + 9 + len(stored(header)), 1)


def test_header_must_be_a_map() -> None:
    header = encode([1, 2])
    with pytest.raises(TraceFormatError, match="header frame holds a msgpack list"):
        TraceReader.from_bytes(PREAMBLE + frame(b"H", header) + end_frame(header, []))


def test_record_must_be_a_map() -> None:
    header, records = encode(HEADER), [encode(RECORDS[0]), encode("plan")]
    data = (
        PREAMBLE
        + frame(b"H", header)
        + b"".join(frame(b"R", r) for r in records)
        + end_frame(header, records)
    )
    at = offsets(data)[2]
    error = read_error(data)
    assert "record frame holds a msgpack str, expected a map" in str(error)
    assert (error.offset, error.record) == (at, 2)
    # framing alone is fine: byte comparison does not decode
    assert [i for i, _, _ in TraceReader.from_bytes(data).records()] == [1, 2]


def test_undecodable_record_names_its_frame() -> None:
    header, records = encode(HEADER), [b"\x82\xa1a"]
    data = PREAMBLE + frame(b"H", header) + frame(b"R", records[0]) + end_frame(header, records)
    error = read_error(data)
    assert "cannot decode msgpack payload" in str(error)
    assert (error.offset, error.record) == (12 + 9 + len(stored(header)), 1)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="does not exist") as info:
        read_trace(tmp_path / "nope.trace")
    assert info.value.path == str(tmp_path / "nope.trace")


def test_directory_is_not_readable(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="cannot be read"):
        TraceReader(tmp_path)


# -- codec -----------------------------------------------------------------------------------


def test_floats_always_pack_as_float64() -> None:
    assert encode(1.0) == b"\xcb" + struct.pack(">d", 1.0)
    assert encode(0.5) == b"\xcb" + struct.pack(">d", 0.5)
    assert encode(-0.0) == b"\xcb\x80" + bytes(7)


@pytest.mark.parametrize(
    ("value", "packed"),
    [
        (0, b"\x00"),
        (127, b"\x7f"),
        (128, b"\xcc\x80"),
        (-1, b"\xff"),
        (-33, b"\xd0\xdf"),
        (65535, b"\xcd\xff\xff"),
        (65536, b"\xce\x00\x01\x00\x00"),
        (2**63, b"\xcf\x80" + bytes(7)),
        (True, b"\xc3"),
        (None, b"\xc0"),
    ],
)
def test_ints_pack_in_their_smallest_form(value: Any, packed: bytes) -> None:
    assert encode(value) == packed


def test_containers_strings_and_bytes() -> None:
    assert encode((1, 2)) == encode([1, 2]) == b"\x92\x01\x02"
    assert encode({"b": 1, "a": 2}) == b"\x82\xa1b\x01\xa1a\x02"  # insertion order kept
    assert encode(b"\x00") == b"\xc4\x01\x00"
    assert encode("é") == b"\xa2\xc3\xa9"


def test_encoder_recovers_after_a_failure() -> None:
    with pytest.raises(TypeError):
        encode({"a": object()})
    assert encode(1) == b"\x01"


def nested(depth: int) -> bytes:
    return b"\x91" * depth + b"\xc0"


def test_decode_depth_limit() -> None:
    assert decode(nested(MAX_DEPTH)) is not None
    for depth in (MAX_DEPTH + 1, 1000, 1025, 100_000):
        with pytest.raises(TraceFormatError, match="nested"):
            decode(nested(depth), path="p", offset=5, record=2)


def test_decode_depth_limit_counts_maps() -> None:
    payload = b"\x81\xa1k" * (MAX_DEPTH + 1) + b"\xc0"
    with pytest.raises(TraceFormatError, match="deeper than 64"):
        decode(payload)


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\xc1",
        b"\x01\x02",
        b"\xdf\xff\xff\xff\xff",
        b"\xdd\xff\xff\xff\xff",
        b"\xdb\xff\xff\xff\xff",
        b"\xc6\xff\xff\xff\xff",
        b"\xd4\x05\x00",
        b"\xd6\xff\x00\x00\x00\x00",
        b"\xc7\x00\x05",
        b"\x81\x01\x02",
        b"\x81\x90\x02",
        b"\xa1\xff",
    ],
)
def test_decode_rejects_hostile_payloads(payload: bytes) -> None:
    with pytest.raises(TraceFormatError) as info:
        decode(payload, path="p.trace", offset=40, record=3)
    assert str(info.value).startswith("p.trace at byte 40, record 3: corrupt:")


# -- lockstep digests: shared while the bodies agree -------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from([b"a", b"b", b"cc", b""]), min_size=0, max_size=6),
        min_size=1,
        max_size=4,
    ),
    st.lists(st.booleans(), min_size=4, max_size=4),
)
def test_lockstep_digests_equal_one_digest_per_body(
    tails: list[list[bytes]], shared: list[bool]
) -> None:
    """Bodies that agree for a while and then differ, or end early (a shorter body has no
    record at an index), digest exactly as each body alone: sharing never leaks a record."""
    common = [b"x", b"y"]
    bodies = [
        [b"header", *(common if keep else []), *tail]
        for tail, keep in zip(tails, shared, strict=False)
    ]
    lockstep = LockstepDigests(len(bodies))
    for index in range(max(len(body) for body in bodies)):
        step = [body[index] if index < len(body) else None for body in bodies]
        lockstep.feed(step, header=index == 0)
    for position, body in enumerate(bodies):
        alone = BodyDigest()
        alone.add_header(body[0])
        for payload in body[1:]:
            alone.add_record(payload)
        assert lockstep.hexdigest(position) == alone.hexdigest()
