"""One request-trace file, opened once: checked line by line, hashed and indexed, so that
a window of it is read later without reading the file again.

Opening streams the file a line at a time (a trace of millions of lines is never held in
memory): it detects the format from the first line, parses and checks every request
(one error naming ``file:line`` for the first damaged one), hashes the bytes (SHA-256,
what a trace header records) and keeps the byte offset of every 64th request. Reading a
window seeks to the nearest indexed request and parses only the window's lines.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tracediff.errors import WorkloadError
from tracediff.workload.formats import Format, detect
from tracediff.workload.request import TraceRequest

INDEX_EVERY = 64  # requests between two indexed offsets: a window read skips fewer lines
MAX_LINE = 1 << 20  # bytes; no request line of any format comes near a megabyte


@dataclass(frozen=True)
class Workload:
    """An opened request trace: what a scenario records of it and where its requests are."""

    path: str  # absolute, so worker processes read the same file from any directory
    name: str  # the file's stem as a plain name (profile names, trace headers)
    sha256: str  # of the file's bytes
    format: str
    size: int  # bytes: a file that changed after it was opened is refused
    count: int  # requests
    index: tuple[tuple[int, int], ...]  # (byte offset, line number) of every 64th request

    def read(self, start: int, length: int) -> tuple[TraceRequest, ...]:
        """Requests ``start .. start+length-1`` (fewer at the end of the file)."""
        if os.path.getsize(self.path) != self.size:
            raise WorkloadError(
                self.path, None, "changed since it was opened (its size differs); run again"
            )
        offset, line = self.index[start // INDEX_EVERY]
        skip = start % INDEX_EVERY
        found: list[TraceRequest] = []
        with open(self.path, "rb") as stream:
            fmt = _format(self.path, stream.readline(MAX_LINE))
            stream.seek(offset)
            for number, _offset, text in _lines(self.path, stream, line):
                if skip:
                    skip -= 1
                    continue
                found.append(_parse(self.path, fmt, text, number))
                if len(found) == length:
                    break
        return tuple(found)


def open_workload(path: str | os.PathLike[str]) -> Workload:
    """Open, check, hash and index a request trace; WorkloadError naming file:line."""
    from tracediff.filenames import component

    shown = os.fspath(path)
    try:
        stream = open(shown, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise WorkloadError(shown, None, f"cannot read the workload: {exc.strerror}") from None
    digest = hashlib.sha256()
    index: list[tuple[int, int]] = []
    count = 0
    last = -1
    with stream:
        first = stream.readline(MAX_LINE)
        fmt = _format(shown, first)
        stream.seek(len(first) if fmt.header else 0)
        digest.update(first if fmt.header else b"")
        for number, offset, text in _lines(shown, stream, 2 if fmt.header else 1, digest):
            if count % INDEX_EVERY == 0:
                index.append((offset, number))
            request = _parse(shown, fmt, text, number)
            if request.arrival_us < last:
                raise WorkloadError(
                    shown, number, f"{fmt.name} request arrives before the one above it "
                    f"({request.arrival_us} us < {last} us); a workload is in arrival order"
                )  # fmt: skip
            last = request.arrival_us
            count += 1
        size = stream.tell()
    if count == 0:
        raise WorkloadError(shown, None, f"a {fmt.name} workload without any request")
    return Workload(
        path=str(Path(shown).resolve()),
        name=component(Path(shown).stem),
        sha256=digest.hexdigest(),
        format=fmt.name,
        size=size,
        count=count,
        index=tuple(index),
    )


def _format(path: str, first: bytes) -> Format:
    found = detect(_text(path, first, 1))
    if isinstance(found, str):
        raise WorkloadError(path, 1, found)
    return found


def _text(path: str, raw: bytes, number: int) -> str:
    if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
        raise WorkloadError(
            path, number, f"a line of over {MAX_LINE:,} bytes; no request is so long"
        )
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise WorkloadError(
            path, number, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def _lines(
    path: str, stream: BinaryIO, number: int, digest: Any = None
) -> Iterator[tuple[int, int, str]]:
    """(line number, byte offset, text) of every non-blank line from the stream's position,
    the first numbered ``number``; ``digest`` takes every byte read."""
    offset = stream.tell()
    while True:
        raw = stream.readline(MAX_LINE)
        if not raw:
            return
        if digest is not None:
            digest.update(raw)
        text = _text(path, raw, number)
        if text.strip():
            yield number, offset, text
        offset += len(raw)
        number += 1


def _parse(path: str, fmt: Format, text: str, number: int) -> TraceRequest:
    try:
        return fmt.parse(text, number)
    except ValueError as exc:
        raise WorkloadError(path, number, f"damaged {fmt.name} request: {exc}") from None
