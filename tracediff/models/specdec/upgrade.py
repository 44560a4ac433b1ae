"""``tracediff upgrade``: convert a version 1 trace into the current format, losslessly.

Version 1 stored each plan record's wide tables as lists of rows and every frame payload
uncompressed; version 2 stores them as typed columns in a deflate stream
(``docs/trace-format.md``). The decisions are the same values, so a conversion keeps every
one: each row becomes the same values in its column's type, and the converted trace is
checked exactly as the driver checks a fresh one before anything is written. A value a
column cannot hold (a float where an integer belongs, a number out of its type's range)
refuses the whole file, naming the record and field, and writes nothing.

The compared body changes with the encoding, so the converted trace has a new digest: golden
manifests and reports that name v1 digests must be regenerated rather than upgraded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tracediff.errors import TraceFormatError
from tracediff.models.specdec.sched.record import COLUMNS, TYPE_NAMES, packed_record
from tracediff.models.specdec.schema import SCHEMA_VERSION, TRACE_FORMAT, TraceChecker
from tracediff.trace.codec import FORMAT_VERSION, MAGIC, PREAMBLE, PREVIOUS_VERSION, encode
from tracediff.trace.columns import ColumnError
from tracediff.trace.reader import TraceReader
from tracediff.trace.writer import TraceWriter


@dataclass(frozen=True)
class Upgrade:
    """What one conversion did: the file, the versions, the records and both digests."""

    source: str
    target: str
    from_version: int
    records: int
    old_digest: str
    new_digest: str
    old_bytes: int
    new_bytes: int

    @property
    def converted(self) -> bool:
        return self.from_version != FORMAT_VERSION


def file_version(path: str) -> int:
    """The framing version a trace file's preamble declares (TraceFormatError if it has
    none)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(PREAMBLE.size)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot be read: {exc.strerror or exc}") from None
    if len(head) < PREAMBLE.size or head[: len(MAGIC)] != MAGIC:
        raise TraceFormatError(path, "not a tracediff trace (bad magic or truncated)", offset=0)
    version: int = PREAMBLE.unpack(head)[1]
    return version


def upgrade_trace(source: str, target: str | None = None) -> Upgrade:
    """Convert ``source`` (a version 1 trace) into ``target`` (default: in place, atomically).

    A trace already in the current version is left untouched (``converted`` is False).
    Raises :class:`TraceFormatError` for a file that is neither, or whose content does not
    convert; nothing is written then.
    """
    target = source if target is None else target
    version = file_version(source)
    if version == FORMAT_VERSION:
        digest = TraceReader(source).verify()
        size = os.path.getsize(source)
        return Upgrade(source, source, version, 0, digest, digest, size, size)
    if version != PREVIOUS_VERSION:
        raise TraceFormatError(
            source,
            f"trace format version {version}; tracediff upgrade converts version "
            f"{PREVIOUS_VERSION} into {FORMAT_VERSION}",
            offset=len(MAGIC),
        )
    old_bytes = os.path.getsize(source)
    reader = TraceReader(source, version=PREVIOUS_VERSION)
    header = _header(reader)
    checker = TraceChecker(header, source)
    old_digest = reader.verify()  # the whole file checks out before anything is written
    records = 0
    with TraceWriter(target, header) as writer:
        for index, offset, payload in reader.records():
            record = _converted(reader, index, offset, payload)
            checker.check(record, offset=offset, index=index)
            writer.write_record(encode(record))
            records += 1
        provenance = reader.provenance or {}
        writer.write_provenance(
            {**provenance, "upgraded_from": {"version": version, "digest": old_digest}}
        )
    new_digest = TraceReader(target).verify()
    return Upgrade(
        source,
        target,
        version,
        records,
        old_digest,
        new_digest,
        old_bytes,
        os.path.getsize(target),
    )


def _header(reader: TraceReader) -> dict[str, Any]:
    """The version 1 header as a version 2 header: the same scenario, the same row kinds,
    and the column types; a header that is not this tracediff's version 1 is refused."""
    header = reader.header

    def fail(message: str) -> TraceFormatError:
        return TraceFormatError(reader.name, f"header: {message}", record=0)

    if header.get("format") != TRACE_FORMAT:
        raise fail(f"format is {header.get('format')!r:.40}, expected {TRACE_FORMAT!r}")
    if header.get("version") != 1:
        raise fail(
            f"record schema version {header.get('version')!r:.20}; tracediff upgrade converts "
            "version 1"
        )
    declared = header.get("columns")
    wanted = {name: list(cols) for name, cols in COLUMNS.items()}
    if not isinstance(declared, dict) or {k: declared.get(k) for k in wanted} != wanted:
        raise fail(
            "the trace declares other record columns than version 1 of this tracediff; "
            "re-record it instead"
        )
    upgraded = dict(header)
    upgraded["version"] = SCHEMA_VERSION
    upgraded["columns"] = wanted
    upgraded["types"] = {name: list(types) for name, types in TYPE_NAMES.items()}
    return upgraded


def _converted(reader: TraceReader, index: int, offset: int, payload: bytes) -> dict[str, Any]:
    from tracediff.trace.codec import decode

    record = decode(payload, path=reader.name, offset=offset, record=index)
    if not isinstance(record, dict):
        raise TraceFormatError(
            reader.name,
            f"corrupt: record holds a msgpack {type(record).__name__}, expected a map",
            offset=offset,
            record=index,
        )
    if record.get("t") != "plan":
        return record
    try:
        return packed_record(record)
    except ColumnError as exc:
        raise TraceFormatError(
            reader.name, f"{exc}; the record does not convert", offset=offset, record=index
        ) from None
