"""The trace file format: canonical msgpack records in checksummed, versioned frames.

A trace is what one implementation decided for one scenario. Two traces are equal when their
*compared bodies* are equal byte for byte, so the encoding is canonical (see
:func:`~tracediff.trace.codec.encode`) and nothing machine- or run-specific is in the body.

Format, version 2
=================

All integers are unsigned big-endian.

Preamble, 12 bytes::

    magic     8 bytes   b"TDTRACE\\n"
    version   u16       2
    reserved  u16       0

Then a sequence of frames::

    kind      1 byte    b"H", b"R", b"P" or b"E"
    length    u32       stored length, at most MAX_FRAME_BYTES (256 MiB)
    crc       u32       zlib.crc32 of the stored bytes
    stored    length bytes: the payload (one msgpack object), compressed

Every payload, in file order, is the next piece of one raw deflate stream (RFC 1951, no
zlib header), flushed to a byte boundary after each frame (``Z_SYNC_FLUSH``): a frame's
stored bytes inflate to exactly its payload given the frames before it, to at most
MAX_FRAME_BYTES. Version 1 stored payloads uncompressed (``tracediff upgrade`` converts).

Frame kinds:

``H`` header
    Exactly one, the first frame. A msgpack map; its content is the caller's (by
    convention ``{"format": "tracediff-trace", "version": 2, "scenario": {...}, ...}``).
``R`` record
    Zero or more. One msgpack map per record (e.g. ``{"t": "plan", ...}``).
``P`` provenance
    At most one, anywhere after the header: a map naming the implementation, versions,
    host and wall time. It is *not* part of the compared body. The writer puts it just
    before the end frame, so there each record's frame ordinal equals its body index.
``E`` end
    Exactly one, the last frame, followed by no byte at all:
    ``{"records": <number of R frames>, "digest": <hex sha256 of the compared body>}``.
    A file without it is truncated.

Compared body digest: sha256 over, for the ``H`` frame and then every ``R`` frame in order,
the (uncompressed) payload length as u32 followed by the payload. Frame kinds, CRCs,
stored bytes, provenance and the end frame are not part of it.

Indices: a frame's *index* is its ordinal in the file (header 0) and is what errors call the
record; a *body index* counts only compared frames (header 0, records 1..), which is what
:meth:`TraceReader.records` and :func:`first_difference` report.

Compatibility: a reader refuses any other version with a message that says so; a change to
the framing or to the digest definition bumps the version. Schema changes inside the
payloads are the header's business, not the framing's: :mod:`tracediff.models.specdec.schema` checks
what the header and the records hold (``checked_records``), for every command that reads a
trace.
"""

from __future__ import annotations

from tracediff.trace.codec import FORMAT_VERSION, MAX_FRAME_BYTES, decode, encode
from tracediff.trace.reader import Frame, Trace, TraceReader, first_difference, read_trace
from tracediff.trace.writer import BodyDigest, LockstepDigests, TraceWriter, trace_bytes

__all__ = [
    "FORMAT_VERSION",
    "MAX_FRAME_BYTES",
    "BodyDigest",
    "LockstepDigests",
    "Frame",
    "Trace",
    "TraceReader",
    "TraceWriter",
    "decode",
    "encode",
    "first_difference",
    "read_trace",
    "trace_bytes",
]
