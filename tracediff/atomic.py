"""Atomic file writes: a file users keep is either the old one or the new one, never half.

Write to a temporary file in the same directory (so ``os.replace`` stays on one file system
and is atomic), flush and fsync it, rename it over the target, then fsync the directory so
that the rename itself survives a power cut. A process killed mid-write (even by SIGKILL)
leaves the target untouched; at worst a ``.NAME.*.tmp`` file stays behind in the directory,
which nothing reads and anyone may delete.

The new file gets the old file's permission bits when it replaces one, else the usual
``0o666`` minus the umask (``mkstemp`` alone would leave every kept file at ``0o600``).

Targets that are not regular files (:func:`resolve_target`):

- a symlink is followed: its target is replaced atomically and the link stays a link (a
  rename over the link itself would silently turn it into a file);
- a character device or a FIFO (``/dev/null``, ``/dev/full``, a named pipe) and a file
  descriptor path (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) are written through,
  with no temporary file and no rename, as a shell's ``>`` would: renaming over a device node
  would replace the device with a file. Such a write is not atomic, and cannot be;
- anything else (a directory, a socket, a block device) is refused with exit code 2.

:func:`check_target` and :func:`ensure_directory` are the checks a command runs *before*
long work, so that an output that cannot be written fails at once with exit code 2 rather
than at the end of a run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

from tracediff.errors import OutputError

TEMP_SUFFIX = ".tmp"


REGULAR, STREAM, DESCRIPTOR = "regular", "stream", "descriptor"
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def resolve_target(path: str | os.PathLike[str], what: str = "") -> tuple[str, Path, int]:
    """How ``path`` is written: ``(kind, file, fd)``. ``kind`` is REGULAR (atomically, at
    ``file``: the path, or a symlink's target), STREAM (written through: a character device
    or a FIFO) or DESCRIPTOR (written through to this process's file descriptor ``fd``).
    Anything else is an :class:`OutputError` (exit 2) naming ``what`` and the path."""
    text = os.fspath(path)
    label = f"{what} {text}" if what else text
    number = _STD_PATHS.get(text)
    match = _FD_PATH.match(text)
    if number is None and match is not None:
        number = int(match.group(1))
    if number is not None:
        return DESCRIPTOR, Path(text), number
    target = Path(text)
    if target.is_symlink():
        # followed (links of links too); a dangling link names the file to create
        target = Path(os.path.realpath(target))
    try:
        mode = target.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return REGULAR, target, -1  # to be created; check_target says what is missing
    except OSError as exc:
        raise OutputError(f"{label}: cannot be written: {_reason(exc)}") from None
    if stat.S_ISREG(mode):
        return REGULAR, target, -1
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return STREAM, target, -1
    if stat.S_ISDIR(mode):
        raise OutputError(f"{label}: is a directory; give a file name")
    kind = "a socket" if stat.S_ISSOCK(mode) else "a block device" if stat.S_ISBLK(mode) else ""
    raise OutputError(
        f"{label}: is {kind or 'not a regular file'}, which tracediff does not write to; give "
        "a file name (or a character device, a FIFO, /dev/stdout)"
    )


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Yield a binary file; on clean exit it replaces ``path`` atomically, else vanishes.

    A failure to write (a full disk, a quota, an I/O error) is an :class:`OutputError`
    naming ``path``: the operating system's own message names no file. A symlink is
    followed, a device, FIFO or descriptor path written through (module docstring).
    """
    kind, target, number = resolve_target(path)
    if kind != REGULAR:
        with _written_through(Path(path), target if kind == STREAM else None, number) as handle:
            yield handle
        return
    directory = target.parent
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=directory
        )
    except OSError as exc:
        raise OutputError(f"{target}: cannot be written: {_reason(exc)}") from None
    try:
        handle = os.fdopen(fd, "wb")
        try:
            try:
                yield handle
            except OSError as exc:
                # writes to the handle fail without a file name; other files' errors keep theirs
                if exc.filename is not None:
                    raise
                raise OutputError(f"{target}: cannot be written: {_reason(exc)}") from None
            try:
                handle.flush()
                os.fchmod(handle.fileno(), _final_mode(target))
                os.fsync(handle.fileno())
                handle.close()
            except OSError as exc:
                raise OutputError(f"{target}: cannot be written: {_reason(exc)}") from None
        finally:
            if not handle.closed:
                # after a failure: the buffer cannot be written either (a full disk), and
                # the error that says so, naming the file, is the one already raised
                with contextlib.suppress(OSError):
                    handle.close()
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_directory(directory)


@contextlib.contextmanager
def _written_through(shown: Path, device: Path | None, number: int) -> Iterator[BinaryIO]:
    """A device, FIFO (``device``) or file descriptor (``number``), written in place: no
    temporary file, no rename, no fsync (which devices and pipes refuse)."""
    try:
        if device is not None:
            # not blocking: opening a FIFO that no process reads would wait for one forever
            fd = os.open(device, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            os.set_blocking(fd, True)
        else:
            fd = os.dup(number)
    except OSError as exc:
        if exc.errno == errno.ENXIO and device is not None:
            raise OutputError(
                f"{shown}: is a named pipe (FIFO) that no process reads; start its reader "
                "first (e.g. cat), or give a file name"
            ) from None
        raise OutputError(f"{shown}: cannot be written: {_reason(exc)}") from None
    # unbuffered: an error (ENOSPC from /dev/full) is raised by the write that meets it,
    # not again by the close
    with os.fdopen(fd, "wb", buffering=0) as handle:
        try:
            yield cast(BinaryIO, handle)
        except OSError as exc:
            if exc.filename is not None:
                raise
            raise OutputError(f"{shown}: cannot be written: {_reason(exc)}") from None


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with atomic_writer(path) as handle:
        handle.write(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make a rename or a new file in ``directory`` durable (best effort: some file systems
    and platforms cannot open a directory for fsync, and lose nothing by skipping it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_target(path: str | os.PathLike[str], what: str) -> None:
    """Raise :class:`OutputError` unless ``path`` can be (re)placed atomically.

    ``what`` names the flag or argument in the message (``"--json"``). The directory must
    exist and accept a new file (checked by creating and removing one), and ``path`` must
    not be a directory itself.
    """
    kind, target, _fd = resolve_target(path, what)
    if kind != REGULAR:
        return  # written through when the time comes; nothing to create in advance
    if target.is_dir():
        raise OutputError(f"{what} {path}: is a directory; give a file name")
    parent = target.parent
    if not parent.exists():
        raise OutputError(f"{what} {path}: directory {parent} does not exist; create it first")
    if not parent.is_dir():
        raise OutputError(f"{what} {path}: {parent} is not a directory")
    _probe(parent, what, str(path))


def ensure_directory(path: str | os.PathLike[str], what: str) -> None:
    """Create directory ``path`` if needed and check that it accepts files; raise
    :class:`OutputError` naming ``what`` otherwise. Only the last component is created: a
    typo in a parent (``/dta/runs/x``) must not grow a tree somewhere unexpected."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a directory")
    parent = directory.parent
    if not directory.exists() and not parent.is_dir():
        raise OutputError(
            f"{what} {path}: directory {parent} does not exist; create it first (tracediff "
            "creates only the last directory of the path)"
        )
    try:
        directory.mkdir(exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{what} {path}: cannot create the directory: {_reason(exc)}") from None
    _probe(directory, what, str(path))


def _probe(directory: Path, what: str, shown: str) -> None:
    try:
        fd, name = tempfile.mkstemp(prefix=".tracediff-probe.", suffix=TEMP_SUFFIX, dir=directory)
    except OSError as exc:
        raise OutputError(f"{what} {shown}: cannot write in {directory}: {_reason(exc)}") from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _final_mode(target: Path) -> int:
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    # Linux reports it without changing it; elsewhere set-and-restore is the only way.
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
