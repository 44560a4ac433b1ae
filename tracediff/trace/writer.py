"""Write trace files: a streaming, atomic file writer and an in-memory twin.

:class:`BodyDigest` is the single definition of the compared-body digest; the writer, the
reader and callers that compare without files all feed it, so they cannot disagree.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import types
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, BinaryIO

from tracediff.atomic import atomic_writer
from tracediff.trace.codec import (
    BODY_LENGTH,
    FORMAT_VERSION,
    FRAME_HEADER,
    KIND_END,
    KIND_HEADER,
    KIND_PROVENANCE,
    KIND_RECORD,
    MAGIC,
    MAX_FRAME_BYTES,
    PREAMBLE,
    encode,
)

PREAMBLE_BYTES = PREAMBLE.pack(MAGIC, FORMAT_VERSION, 0)
_HASH_PIECE = 2047  # hashlib releases the GIL for updates of 2,048 bytes and more


class BodyDigest:
    """Incremental sha256 of the compared body: the header, then every record, in order.

    Each payload is fed as its u32 big-endian length followed by its bytes, so moving a
    byte from one record to the next changes the digest.
    """

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self._has_header = False
        self._records = 0

    def add_header(self, payload: bytes) -> None:
        """Feed the header payload; must come first, exactly once."""
        if self._has_header:
            raise ValueError("BodyDigest already has a header")
        self._has_header = True
        self._add(payload)

    def add_record(self, payload: bytes) -> None:
        """Feed one record payload (after the header)."""
        if not self._has_header:
            raise ValueError("BodyDigest needs the header before any record")
        self._records += 1
        data = BODY_LENGTH.pack(len(payload)) + payload
        if len(data) <= _HASH_PIECE:  # most records: one update, no call of _add
            self._hash.update(data)
        else:
            self._add(payload)

    def _add(self, payload: bytes) -> None:
        # One update of length and payload together (a second call costs more than copying),
        # in pieces below hashlib's 2 KiB threshold for releasing the GIL: a release per
        # record lets any other thread of the process (a progress display, a pipe reader)
        # take the interpreter for its whole switch interval before the hash may go on.
        data = BODY_LENGTH.pack(len(payload)) + payload
        update = self._hash.update
        if len(data) <= _HASH_PIECE:
            update(data)
            return
        view = memoryview(data)
        for start in range(0, len(data), _HASH_PIECE):
            update(view[start : start + _HASH_PIECE])

    def copy(self) -> BodyDigest:
        """An independent digest in the same state (fed the same payloads so far)."""
        twin = BodyDigest.__new__(BodyDigest)
        twin._hash = self._hash.copy()
        twin._has_header = self._has_header
        twin._records = self._records
        return twin

    @property
    def records(self) -> int:
        """How many records were fed."""
        return self._records

    def hexdigest(self) -> str:
        """The digest of everything fed so far (feeding more afterwards is allowed)."""
        return self._hash.hexdigest()


class LockstepDigests:
    """The body digests of implementations driven side by side, one record index at a time.

    While their bodies are byte-identical they have the same digest, so they share one
    :class:`BodyDigest` and each record is hashed once, not once per implementation. Each
    index is fed as one step, every implementation's payload together (None: it has no
    record there, its body ended or it failed): an implementation whose payload differs from
    the first one's gets its own copy of the shared state as it was before the step and goes
    on alone.
    """

    def __init__(self, count: int) -> None:
        self._digests = [BodyDigest()] * count
        self._sharing = count - 1  # how many others still share position 0's digest

    def feed(self, payloads: Sequence[bytes | None], *, header: bool = False) -> None:
        """One record index: ``payloads[i]`` is implementation i's record (or None)."""
        digests = self._digests
        shared = digests[0]
        first = payloads[0]
        if self._sharing:
            for position in range(1, len(payloads)):
                if digests[position] is shared and payloads[position] != first:
                    digests[position] = shared.copy()  # the state before this record
                    self._sharing -= 1
        for position, payload in enumerate(payloads):
            if payload is None:
                continue
            digest = digests[position]
            if position and digest is shared:
                continue  # the same bytes into the same state: hashed once, at position 0
            if header:
                digest.add_header(payload)
            else:
                digest.add_record(payload)

    def hexdigest(self, position: int) -> str:
        return self._digests[position].hexdigest()


def _frame_header(kind: bytes, stored: bytes) -> bytes:
    return FRAME_HEADER.pack(kind, len(stored), zlib.crc32(stored))


class FrameDeflater:
    """Every frame payload as the next piece of one deflate stream, flushed to a byte
    boundary at each frame (``Z_SYNC_FLUSH``): a frame's stored bytes inflate to exactly its
    payload, and later frames reuse the earlier ones as their dictionary, which is where the
    size goes (a plan record repeats most of the one before it). Level 1: a file is written
    once per run at most, read many times, and higher levels shrink it by a few percent more
    for twice the time."""

    LEVEL = 1

    def __init__(self) -> None:
        # raw deflate (no zlib header or trailer): the frames carry their own CRCs
        self._deflate = zlib.compressobj(self.LEVEL, zlib.DEFLATED, -15)

    def __call__(self, payload: bytes) -> bytes:
        if len(payload) > MAX_FRAME_BYTES:
            # the reader would refuse it, so refuse to write it
            raise ValueError(
                f"trace frame of {len(payload)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit"
            )
        return self._deflate.compress(payload) + self._deflate.flush(zlib.Z_SYNC_FLUSH)


def _end_payload(digest: BodyDigest) -> bytes:
    return encode({"records": digest.records, "digest": digest.hexdigest()})


class _FrameSink:
    """The frame sequence shared by the file writer and :func:`trace_bytes`."""

    def __init__(self, out: BinaryIO, header_payload: bytes) -> None:
        self._out = out
        self._store = FrameDeflater()
        self._digest = BodyDigest()
        self._provenance: bytes | None = None
        out.write(PREAMBLE_BYTES)
        self._write(KIND_HEADER, header_payload)
        self._digest.add_header(header_payload)

    def _write(self, kind: bytes, payload: bytes) -> None:
        stored = self._store(payload)
        self._out.write(_frame_header(kind, stored))
        self._out.write(stored)

    def record(self, payload: bytes) -> None:
        self._write(KIND_RECORD, payload)
        self._digest.add_record(payload)

    def provenance(self, payload: bytes) -> None:
        if self._provenance is not None:
            raise ValueError("a trace holds at most one provenance frame")
        # Kept until the end so that every record's frame ordinal equals its index in the
        # compared body (header 0, records 1..), whatever order the caller used.
        self._provenance = payload

    def finish(self) -> None:
        if self._provenance is not None:
            self._write(KIND_PROVENANCE, self._provenance)
        self._write(KIND_END, _end_payload(self._digest))

    @property
    def digest(self) -> BodyDigest:
        return self._digest


class TraceWriter:
    """Stream a trace to ``path``; the file appears only when :meth:`close` succeeds.

    Use it as a context manager: on a clean exit it closes (end frame, rename over
    ``path``); on an exception nothing is written and an existing ``path`` is kept.
    Without ``with``, call :meth:`close` or :meth:`abort` yourself.
    """

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any]) -> None:
        self._path = os.fspath(path)
        self._stack = contextlib.ExitStack()
        handle = self._stack.enter_context(atomic_writer(self._path))
        self._closed = False
        try:
            self._sink = _FrameSink(handle, encode(header))
        except BaseException as exc:
            self._abort_with(type(exc), exc, exc.__traceback__)
            raise

    @property
    def path(self) -> str:
        """The target path."""
        return self._path

    @property
    def records(self) -> int:
        """How many records were written."""
        return self._sink.digest.records

    @property
    def digest(self) -> str:
        """Hex sha256 of the compared body so far; final once closed."""
        return self._sink.digest.hexdigest()

    def write_record(self, payload: bytes) -> None:
        """Append one record; ``payload`` is an already-encoded msgpack map."""
        self._check_open()
        self._sink.record(payload)

    def write_provenance(self, provenance: dict[str, Any]) -> None:
        """Attach provenance (at most once); it is written just before the end frame."""
        self._check_open()
        self._sink.provenance(encode(provenance))

    def close(self) -> None:
        """Write the end frame and move the file into place; a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self._sink.finish()
        except BaseException as exc:
            self._abort_with(type(exc), exc, exc.__traceback__)
            raise
        self._stack.close()

    def abort(self) -> None:
        """Discard everything written; ``path`` keeps whatever it held before."""
        if self._closed:
            return
        self._closed = True
        error = _Aborted()
        self._abort_with(type(error), error, None)

    def _abort_with(
        self,
        exc_type: type[BaseException],
        exc: BaseException,
        tb: types.TracebackType | None,
    ) -> None:
        self._closed = True
        # atomic_writer removes its temporary file when an exception passes through it
        self._stack.__exit__(exc_type, exc, tb)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"TraceWriter for {self._path} is already closed")

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: types.TracebackType | None,
    ) -> None:
        if self._closed:
            return
        if exc_type is None or exc is None:
            self.close()
        else:
            self._abort_with(exc_type, exc, tb)


class _Aborted(Exception):
    """Thrown into the atomic writer to make it discard the temporary file."""


def trace_bytes(
    header_payload: bytes,
    record_payloads: Iterable[bytes],
    provenance: dict[str, Any] | None = None,
) -> bytes:
    """A whole trace file in memory, byte for byte what :class:`TraceWriter` would write."""
    out = io.BytesIO()
    sink = _FrameSink(out, header_payload)
    for payload in record_payloads:
        sink.record(payload)
    if provenance is not None:
        sink.provenance(encode(provenance))
    sink.finish()
    return out.getvalue()
