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
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tracediff.errors import WorkloadError
from tracediff.workload.formats import KNOWN, Format, detect
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
        """Requests ``start .. start+length-1`` (fewer at the end of the file).

        The file must still be the one opened: its content is its identity (a scenario
        records its sha256), so a file rewritten since, even to the same size, is refused
        (WorkloadError, exit 2) rather than read as other requests under the old hash."""
        offset, line = self.index[start // INDEX_EVERY]
        skip = start % INDEX_EVERY
        found: list[TraceRequest] = []
        try:
            stream = _open_regular(self.path)
        except WorkloadError as exc:
            raise _changed(self.path, exc.message) from None
        with stream:
            seen = self._same(stream)
            stream.seek(0)
            fmt = _head(self.path, stream)[0]
            stream.seek(offset)
            for number, _offset, text in _lines(self.path, stream, line):
                if skip:
                    skip -= 1
                    continue
                found.append(_parse(self.path, fmt, text, number))
                if len(found) == length:
                    break
            if _stat_key(stream) != seen:
                raise _changed(self.path, "while it was read")
        return tuple(found)

    def _same(self, stream: BinaryIO) -> tuple[int, ...]:
        """The open file's stat key once its content is known to hash to ``sha256``: hashed
        again only when the key (inode, size, change times) differs from the last one that
        did, so each window of an unchanged file costs a stat, not a read of the file."""
        key = _stat_key(stream)
        if _VERIFIED.get((self.path, self.sha256)) == key:
            return key
        if key[2] != self.size:
            raise _changed(self.path, "its size differs")
        digest = hashlib.sha256()
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
        if digest.hexdigest() != self.sha256:
            raise _changed(self.path, "its content's sha256 differs")
        if _stat_key(stream) != key:
            raise _changed(self.path, "while it was hashed")
        if time.time_ns() - key[4] > _SETTLED_NS:
            # a change within the file system's timestamp granularity of the last one would
            # leave the key as it was: a file changed that recently is hashed every time
            _VERIFIED[(self.path, self.sha256)] = key
        return key


def _changed(path: str, why: str) -> WorkloadError:
    return WorkloadError(
        path, None, f"changed since it was opened ({why}); a workload is its content, and "
        "scenarios already made record the old one: run again on a file left as it is"
    )  # fmt: skip


_SETTLED_NS = 2_000_000_000
# (path, sha256) -> the stat key of the file last hashed to it, in this process
_VERIFIED: dict[tuple[str, str], tuple[int, ...]] = {}


def _stat_key(stream: BinaryIO) -> tuple[int, ...]:
    st = os.fstat(stream.fileno())
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def open_workload(path: str | os.PathLike[str]) -> Workload:
    """Open, check, hash and index a request trace; WorkloadError naming file:line."""
    from tracediff.filenames import component

    shown = os.fspath(path)
    stream = _open_regular(shown)
    digest = hashlib.sha256()
    index: list[tuple[int, int]] = []
    count = 0
    last = -1
    with stream:
        fmt, start, first, head = _head(shown, stream)
        stream.seek(start)
        digest.update(head)
        for number, offset, text in _lines(shown, stream, first, digest):
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


def _open_regular(path: str) -> BinaryIO:
    """``path`` opened for reading; WorkloadError unless it is a regular file. Opened
    without blocking, so a named pipe (FIFO) is refused rather than waited on for a writer
    that never comes; a device or socket has no end or no identity to hash."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise WorkloadError(path, None, f"cannot read the workload: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a directory" if stat.S_ISDIR(mode) else _SPECIAL.get(stat.S_IFMT(mode), "")
            raise WorkloadError(
                path, None, f"is {what or 'not a regular file'}, not a workload file; "
                "save the requests to a file first"
            )  # fmt: skip
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


_SPECIAL = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _head(path: str, stream: BinaryIO) -> tuple[Format, int, int, bytes]:
    """The format, told by the file's first line that is not blank (blank lines before it,
    and a UTF-8 byte order mark, are no part of it), and where the requests start: (format,
    byte offset, line number, the bytes before that offset). A format without a header
    starts at the beginning (its first line is a request)."""
    stream.seek(0)
    head = bytearray()
    number = 1
    while True:
        raw = stream.readline(MAX_LINE)
        text = _text(path, raw, number).removeprefix("\ufeff" if number == 1 else "")
        head += raw
        if text.strip() or not raw:
            break
        number += 1
    if not text.strip():
        raise WorkloadError(
            path, number, f"no request: the file is empty or blank; expected {KNOWN}"
        )
    found = detect(text)
    if isinstance(found, str):
        raise WorkloadError(path, number, found)
    if found.header:
        return found, len(head), number + 1, bytes(head)
    return found, 0, 1, b""


def _text(path: str, raw: bytes, number: int) -> str:
    if len(raw) >= MAX_LINE and not raw.endswith(b"\n"):
        raise WorkloadError(
            path, number, f"a line of over {MAX_LINE:,} bytes; no request is so long"
        )
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise WorkloadError(
            path, number, f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None
    if "\r" in text:  # no request holds one; lines that end in CR alone read as one line
        raise WorkloadError(
            path, number, "a carriage return inside a line: lines must end in LF or CRLF "
            "(convert CR-only line ends, e.g. tr '\\r' '\\n' < FILE)"
        )  # fmt: skip
    return text


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
        if offset == 0:  # a UTF-8 byte order mark is no part of the first line
            text = text.removeprefix("\ufeff")
        if text.strip():
            yield number, offset, text
        offset += len(raw)
        number += 1


def _parse(path: str, fmt: Format, text: str, number: int) -> TraceRequest:
    try:
        return fmt.parse(text, number)
    except ValueError as exc:
        raise WorkloadError(path, number, f"damaged {fmt.name} request: {exc}") from None
