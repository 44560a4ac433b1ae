"""Read trace files back, validating every byte, and compare their bodies.

The reader streams: frames are read one at a time from a buffered file, so memory is bounded
by the largest frame (itself bounded by ``MAX_FRAME_BYTES``), not by the file. Every way a
file can be wrong surfaces as :class:`TraceFormatError` with the path, the byte offset of the
frame at fault and its frame index; no other exception type escapes.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import zlib
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, BinaryIO

from tracediff.errors import TraceFormatError
from tracediff.trace.codec import (
    FORMAT_VERSION,
    FRAME_HEADER,
    KIND_HEADER,
    KIND_PROVENANCE,
    KIND_RECORD,
    KINDS,
    MAGIC,
    MAX_FRAME_BYTES,
    PREAMBLE,
    decode,
)
from tracediff.trace.writer import BodyDigest

TracePath = str | os.PathLike[str]

# Big enough that small frames cost one syscall per many frames, small enough not to matter.
_READ_BUFFER = 256 * 1024


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame as stored: ``kind`` (b"H", b"R", b"P" or b"E"), its ordinal ``index`` in
    the file (header 0), the byte ``offset`` where the frame starts, and the raw ``payload``."""

    kind: bytes
    index: int
    offset: int
    payload: bytes


@dataclass(frozen=True)
class Trace:
    """A whole trace, decoded: what :func:`read_trace` returns."""

    header: dict[str, Any]
    records: list[dict[str, Any]]
    provenance: dict[str, Any] | None
    digest: str


class TraceReader:
    """A validating, streaming reader of one trace file (or of trace bytes in memory).

    The constructor checks the preamble and decodes the header, so a file of the wrong kind
    or version fails at once. Everything else is checked while iterating: a caller that stops
    early has only validated what it read.
    """

    def __init__(self, path: TracePath, *, version: int = FORMAT_VERSION) -> None:
        self._setup(os.fspath(path), None, version)

    @classmethod
    def from_bytes(
        cls, data: bytes, name: str = "<memory>", *, version: int = FORMAT_VERSION
    ) -> TraceReader:
        """A reader over a trace held in memory; ``name`` stands for the path in errors.
        ``version`` is the framing version to read (only ``tracediff upgrade`` reads 1)."""
        reader = cls.__new__(cls)
        reader._setup(name, bytes(data), version)
        return reader

    def _setup(self, name: str, data: bytes | None, version: int = FORMAT_VERSION) -> None:
        self._version = version
        self._name = name
        self._data = data
        self._provenance: dict[str, Any] | None = None
        self._provenance_read = False
        with contextlib.closing(self._frames(BodyDigest())) as frames:
            first = next(frames)
        self._header = self._decode_map(first, "header")
        self._header_payload = first.payload

    @property
    def name(self) -> str:
        """The path (or the in-memory name) used in error messages."""
        return self._name

    @property
    def header(self) -> dict[str, Any]:
        """The decoded header map."""
        return self._header

    @property
    def header_payload(self) -> bytes:
        """The header frame's payload, as stored (body index 0)."""
        return self._header_payload

    @property
    def provenance(self) -> dict[str, Any] | None:
        """The decoded provenance map, or None; reads (and validates) the whole file once."""
        if not self._provenance_read:
            for frame in self.frames():
                if frame.kind == KIND_PROVENANCE:
                    self._provenance = self._decode_map(frame, "provenance")
            self._provenance_read = True
        return self._provenance

    def frames(self) -> Iterator[Frame]:
        """Every frame in file order, validated as it is reached."""
        return self._frames(BodyDigest())

    def records(self) -> Iterator[tuple[int, int, bytes]]:
        """``(index, offset, payload)`` for each record; ``index`` is the record's place in
        the compared body (header 0, first record 1), as :func:`first_difference` counts."""
        body_index = 0
        for frame in self.frames():
            if frame.kind == KIND_RECORD:
                body_index += 1
                yield body_index, frame.offset, frame.payload

    def decoded_records(self) -> Iterator[dict[str, Any]]:
        """Each record decoded to a dict (a record that is not a msgpack map is an error)."""
        for frame in self.frames():
            if frame.kind == KIND_RECORD:
                yield self._decode_map(frame, "record")

    def verify(self) -> str:
        """Validate the whole file (framing, checksums, end frame) and return its digest."""
        digest = BodyDigest()
        for _ in self._frames(digest):
            pass
        return digest.hexdigest()

    def read(self) -> Trace:
        """Decode and validate everything into a :class:`Trace`."""
        digest = BodyDigest()
        records: list[dict[str, Any]] = []
        provenance: dict[str, Any] | None = None
        for frame in self._frames(digest):
            if frame.kind == KIND_RECORD:
                records.append(self._decode_map(frame, "record"))
            elif frame.kind == KIND_PROVENANCE:
                provenance = self._decode_map(frame, "provenance")
        return Trace(
            header=self._header, records=records, provenance=provenance, digest=digest.hexdigest()
        )

    # -- internals -------------------------------------------------------------------------

    def _error(self, message: str, frame_offset: int, index: int) -> TraceFormatError:
        return TraceFormatError(self._name, message, offset=frame_offset, record=index)

    def _decode_map(self, frame: Frame, what: str) -> dict[str, Any]:
        value = decode(frame.payload, path=self._name, offset=frame.offset, record=frame.index)
        if not isinstance(value, dict):
            raise self._error(
                f"corrupt: {what} frame holds a msgpack {type(value).__name__}, expected a map",
                frame.offset,
                frame.index,
            )
        return value

    @contextlib.contextmanager
    def _open(self) -> Iterator[tuple[BinaryIO, int]]:
        if self._data is not None:
            yield io.BytesIO(self._data), len(self._data)
            return
        try:
            if stat.S_ISFIFO(os.stat(self._name).st_mode):
                # opening a pipe waits for a writer: refuse it before that
                raise TraceFormatError(
                    self._name, "cannot be read: it is a pipe; save the trace to a file first"
                )
            handle = open(self._name, "rb", buffering=_READ_BUFFER)
        except FileNotFoundError:
            raise TraceFormatError(
                self._name, "cannot be read: the file does not exist; check the path"
            ) from None
        except IsADirectoryError:
            raise TraceFormatError(
                self._name, "cannot be read: it is a directory, not a trace file"
            ) from None
        except OSError as exc:
            raise TraceFormatError(self._name, f"cannot be read: {exc.strerror or exc}") from None
        with handle:
            try:
                status = os.fstat(handle.fileno())
            except OSError as exc:
                raise TraceFormatError(
                    self._name, f"cannot be read: {exc.strerror or exc}"
                ) from None
            if not stat.S_ISREG(status.st_mode):
                self._refuse_special(handle)
            yield handle, status.st_size

    def _refuse_special(self, handle: BinaryIO) -> None:
        """A device or socket has no size to check frames against: say what it holds."""
        head = self._read_some(handle, len(MAGIC))
        if head != MAGIC:
            raise TraceFormatError(self._name, "not a tracediff trace (bad magic)", offset=0)
        raise TraceFormatError(
            self._name, "is not a regular file (a device?); save the trace to a file first"
        )

    def _read_some(self, handle: BinaryIO, count: int) -> bytes:
        try:
            return handle.read(count)
        except OSError as exc:
            raise TraceFormatError(self._name, f"cannot be read: {exc.strerror or exc}") from None

    def _read(self, handle: BinaryIO, count: int, frame_offset: int, index: int) -> bytes:
        try:
            data = handle.read(count)
        except OSError as exc:
            raise self._error(
                f"cannot be read: {exc.strerror or exc}", frame_offset, index
            ) from None
        if len(data) != count:
            # the size was checked up front, so the file shrank while being read
            raise self._error(
                f"truncated: frame needs {count} more bytes, {len(data)} left",
                frame_offset,
                index,
            )
        return data

    def _frames(self, digest: BodyDigest) -> Generator[Frame, None, None]:
        with self._open() as (handle, size):
            yield from self._scan(handle, size, digest)

    def _check_preamble(self, handle: BinaryIO, size: int) -> None:
        head = self._read(handle, min(size, PREAMBLE.size), 0, 0)
        if head[: len(MAGIC)] != MAGIC[: len(head)]:
            raise TraceFormatError(self._name, "not a tracediff trace (bad magic)", offset=0)
        if len(head) < PREAMBLE.size:
            what = "empty file" if not head else f"preamble needs {PREAMBLE.size} bytes"
            raise TraceFormatError(self._name, f"truncated: {what}, {len(head)} present", offset=0)
        _, version, reserved = PREAMBLE.unpack(head)
        if version != self._version:
            hint = (
                "convert it with `tracediff upgrade FILE`"
                if version == 1 and self._version == FORMAT_VERSION
                else "read it with the tracediff that wrote it, or re-record it"
            )
            raise TraceFormatError(
                self._name,
                f"trace format version {version}; this tracediff reads version "
                f"{self._version} ({hint})",
                offset=len(MAGIC),
            )
        if reserved != 0:
            raise TraceFormatError(
                self._name,
                f"corrupt: reserved preamble field is {reserved}, expected 0",
                offset=len(MAGIC) + 2,
            )

    def _scan(
        self, handle: BinaryIO, size: int, digest: BodyDigest
    ) -> Generator[Frame, None, None]:
        self._check_preamble(handle, size)
        position = PREAMBLE.size
        index = 0
        seen_provenance = False
        # Version 2 stores every payload as the next piece of one deflate stream (version 1
        # stored them as they are); the frame's length and CRC are those of the stored bytes.
        inflater = zlib.decompressobj(-15) if self._version >= 2 else None
        while True:
            offset = position
            left = size - position
            if left == 0:
                raise self._error("truncated: no end frame", offset, index)
            if left < FRAME_HEADER.size:
                raise self._error(
                    f"truncated: frame needs at least {FRAME_HEADER.size} bytes, {left} left",
                    offset,
                    index,
                )
            kind, length, crc = FRAME_HEADER.unpack(
                self._read(handle, FRAME_HEADER.size, offset, index)
            )
            if kind not in KINDS:
                raise self._error(f"corrupt: unknown frame kind {kind!r}", offset, index)
            # Both length checks come before the read, so a hostile length allocates nothing.
            if length > MAX_FRAME_BYTES:
                raise self._error(
                    f"corrupt: frame length {length} exceeds the {MAX_FRAME_BYTES}-byte limit",
                    offset,
                    index,
                )
            needed = FRAME_HEADER.size + length
            if needed > left:
                raise self._error(
                    f"truncated: frame needs {needed} bytes, {left} left", offset, index
                )
            stored = self._read(handle, length, offset, index)
            position += needed
            if zlib.crc32(stored) != crc:
                raise self._error("corrupt: checksum mismatch", offset, index)
            payload = self._inflate(inflater, stored, offset, index) if inflater else stored
            frame = Frame(kind, index, offset, payload)

            if index == 0:
                if kind != KIND_HEADER:
                    raise self._error(
                        f"corrupt: first frame is kind {kind!r}, expected the header b'H'",
                        offset,
                        index,
                    )
                self._decode_map(frame, "header")
                digest.add_header(payload)
            elif kind == KIND_HEADER:
                raise self._error("corrupt: a second header frame", offset, index)
            elif kind == KIND_RECORD:
                digest.add_record(payload)
            elif kind == KIND_PROVENANCE:
                if seen_provenance:
                    raise self._error("corrupt: a second provenance frame", offset, index)
                seen_provenance = True
                self._decode_map(frame, "provenance")
            else:
                self._check_end(frame, digest)
                if position != size:
                    raise self._error(
                        f"corrupt: {size - position} bytes after the end frame",
                        position,
                        index + 1,
                    )
                yield frame
                return
            yield frame
            index += 1

    def _inflate(self, inflater: Any, stored: bytes, offset: int, index: int) -> bytes:
        """A stored frame's payload. Bounded: a frame that would inflate past the frame
        limit (a decompression bomb) is refused after at most that many bytes."""
        try:
            payload: bytes = inflater.decompress(stored, MAX_FRAME_BYTES)
        except zlib.error as exc:
            raise self._error(
                f"corrupt: frame payload is not the next piece of the trace's deflate stream "
                f"({exc})",
                offset,
                index,
            ) from None
        if inflater.unconsumed_tail:
            raise self._error(
                f"corrupt: frame inflates past the {MAX_FRAME_BYTES}-byte limit", offset, index
            )
        return payload

    def _check_end(self, frame: Frame, digest: BodyDigest) -> None:
        end = self._decode_map(frame, "end")
        count = end.get("records")
        claimed = end.get("digest")
        if type(count) is not int or not isinstance(claimed, str):
            raise self._error(
                "corrupt: end frame lacks an integer 'records' and a string 'digest'",
                frame.offset,
                frame.index,
            )
        if count != digest.records:
            raise self._error(
                f"corrupt: end frame counts {count} records, the file holds {digest.records}",
                frame.offset,
                frame.index,
            )
        computed = digest.hexdigest()
        if claimed != computed:
            raise self._error(
                f"corrupt: body digest mismatch (end frame says {claimed[:64]!r}, "
                f"content gives {computed!r})",
                frame.offset,
                frame.index,
            )


def read_trace(path: TracePath) -> Trace:
    """Read, validate and decode a whole trace file."""
    return TraceReader(path).read()


def _body(reader: TraceReader) -> Generator[bytes, None, None]:
    for frame in reader.frames():
        if frame.kind in (KIND_HEADER, KIND_RECORD):
            yield frame.payload


def first_difference(a: TracePath | TraceReader, b: TracePath | TraceReader) -> int | None:
    """Index of the first compared frame whose payload bytes differ (header 0, records
    1..), or None when the compared bodies are identical; provenance is ignored.

    A body that ends early differs at its end (the index of its missing frame). Payloads are
    compared as bytes, never decoded, and the files are validated only up to the answer.
    """
    reader_a = a if isinstance(a, TraceReader) else TraceReader(a)
    reader_b = b if isinstance(b, TraceReader) else TraceReader(b)
    with (
        contextlib.closing(_body(reader_a)) as body_a,
        contextlib.closing(_body(reader_b)) as body_b,
    ):
        for index, (payload_a, payload_b) in enumerate(zip_longest(body_a, body_b)):
            if payload_a != payload_b:
                return index
    return None
