"""Atomic file writes: a file users keep is either the old one or the new one, never half.

Write to a temporary file in the same directory (so ``os.replace`` stays on one file system
and is atomic), flush and fsync it, rename it over the target, then fsync the directory so
that the rename itself survives a power cut. A process killed mid-write (even by SIGKILL)
leaves the target untouched; at worst a ``.NAME.*.tmp`` file stays behind in the directory,
which nothing reads and anyone may delete.

The new file gets the old file's permission bits when it replaces one, else the usual
``0o666`` minus the umask (``mkstemp`` alone would leave every kept file at ``0o600``).

:func:`check_target` and :func:`ensure_directory` are the checks a command runs *before*
long work, so that an output that cannot be written fails at once with exit code 2 rather
than at the end of a run.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from tracediff.errors import OutputError

TEMP_SUFFIX = ".tmp"


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Yield a binary file; on clean exit it replaces ``path`` atomically, else vanishes.

    A failure to write (a full disk, a quota, an I/O error) is an :class:`OutputError`
    naming ``path``: the operating system's own message names no file.
    """
    target = Path(path)
    directory = target.parent
    try:
        fd, tmp_name = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=TEMP_SUFFIX, dir=directory
        )
    except OSError as exc:
        raise OutputError(f"{target}: cannot be written: {_reason(exc)}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
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
            except OSError as exc:
                raise OutputError(f"{target}: cannot be written: {_reason(exc)}") from None
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    fsync_directory(directory)


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
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{what} {path}: is a directory; give a file name")
    parent = target.parent
    if not parent.exists():
        raise OutputError(f"{what} {path}: directory {parent} does not exist; create it first")
    if not parent.is_dir():
        raise OutputError(f"{what} {path}: {parent} is not a directory")
    _probe(parent, what, str(path))


def ensure_directory(path: str | os.PathLike[str], what: str) -> None:
    """Create directory ``path`` (and its parents) if needed and check that it accepts files;
    raise :class:`OutputError` naming ``what`` otherwise."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise OutputError(f"{what} {path}: is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
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
