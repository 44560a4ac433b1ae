"""The resume journal: finished scenario results, one durable JSON line each.

``tracediff run --resume DIR`` appends every finished result to ``DIR/journal.jsonl`` as it
arrives (one ``write`` per line, then ``fsync``), so a run stopped by Ctrl-C, SIGTERM, a
crash or a power cut keeps everything it finished, and the next run with the same ``DIR``
skips those scenarios and reports them in its summary.

File format (JSON lines, UTF-8)::

    {"format": "tracediff-journal", "version": 1, "tracediff": "0.1.0",
     "impls": ["reference", "optimized"], "targets": [...], "profiles": ["quick"]}
    {"key": {"profile": "quick", "seed": 7, "digest": "<sha256 of the scenario>"},
     "result": {...}}
    ...

The first line says which run the journal belongs to; a run with other implementations,
another profile or another tracediff version is refused (:class:`JournalError`, exit 2),
never mixed in: its results would not mean the same thing. Each later line is keyed by
(profile, seed, scenario digest); a line whose digest no longer matches the scenario (the
profile file was edited) is not reused, and the run says so.

Damage: a crash can tear only the last line (it is the only one being written). A last line
that does not parse is dropped with a note and the file cut back to the last whole line
before anything is appended. Damage anywhere else is not a crash's, and is refused.

One run at a time: the journal is locked (``flock``) while a run holds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from tracediff import __version__
from tracediff.atomic import fsync_directory
from tracediff.errors import JournalError, OutputError
from tracediff.model import Scenario
from tracediff.outcomes import Status
from tracediff.running.fingerprint import changed
from tracediff.trace import encode

JOURNAL_FILE = "journal.jsonl"
FORMAT = "tracediff-journal"
VERSION = 1

Key = tuple[str, int, str]


class JournalHeader(TypedDict):
    """A journal's first line: which run it belongs to (:meth:`RunIdentity.header`)."""

    format: str
    version: int
    tracediff: str
    impls: list[str]
    targets: list[str]
    profiles: list[str]
    fingerprint: dict[str, str]


class EntryKey(TypedDict):
    """What a journal entry is the result of: a scenario, by profile, seed and digest."""

    profile: str
    seed: int
    digest: str


class JournalEntry(TypedDict):
    """One later line of a journal: a key and its scenario result (``result_to_dict``)."""

    key: EntryKey
    result: Any


def journal_path(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / JOURNAL_FILE


def scenario_digest(scenario: Scenario) -> str:
    """sha256 of the scenario's canonical encoding: changes whenever its content does."""
    return hashlib.sha256(encode(scenario.to_dict())).hexdigest()


@dataclass(frozen=True)
class RunIdentity:
    """What must match for a journal's results to be reused."""

    impls: tuple[str, ...]
    targets: tuple[str, ...]
    profiles: tuple[str, ...]
    version: str = __version__
    # tracediff.running.fingerprint: the code of each implementation and of tracediff, the options;
    # compared apart from the rest so that a refusal can say what changed.
    fingerprint: tuple[tuple[str, str], ...] = ()

    def header(self) -> JournalHeader:
        return {
            "format": FORMAT,
            "version": VERSION,
            "tracediff": self.version,
            "impls": list(self.impls),
            "targets": list(self.targets),
            "profiles": list(self.profiles),
            "fingerprint": dict(self.fingerprint),
        }

    def describe(self) -> str:
        profiles = ", ".join(self.profiles) or "no profile"
        return f"{' vs '.join(self.impls)} over {profiles} (tracediff {self.version})"


class Journal:
    """An open, locked journal: :meth:`lookup` finished results, :meth:`append` new ones."""

    def __init__(self, path: Path, fd: int, entries: dict[Key, Any], notes: list[str]) -> None:
        self.path = path
        self._fd = fd
        self._entries = entries
        self._by_scenario = {(profile, seed) for profile, seed, _ in entries}
        self.notes = notes
        self.stale = 0

    @classmethod
    def open(cls, directory: str | os.PathLike[str], identity: RunIdentity) -> Journal:
        """Open (or create) ``DIR/journal.jsonl`` for a run; raises JournalError when it
        belongs to another run, is in use, or is damaged before its last line."""
        path = journal_path(directory)
        # never through a symbolic link: the journal is written inside DIR, nowhere else
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, 0o666)
        except OSError as exc:
            if path.is_symlink():
                raise JournalError(
                    f"--resume {directory}: {path} is a symbolic link; tracediff writes its "
                    "journal only inside the --resume directory: remove the link"
                ) from None
            raise JournalError(
                f"--resume {directory}: cannot open {path}: {exc.strerror}"
            ) from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise JournalError(
                    f"--resume {directory}: {path} is not a regular file; remove it or use "
                    "another --resume directory"
                )
            _lock(fd, path)
            entries, notes, good_size = _load(path, fd, identity)
            if good_size is not None:
                os.ftruncate(fd, good_size)
                os.fsync(fd)
            if os.fstat(fd).st_size == 0:
                _append(fd, identity.header(), path)
                fsync_directory(path.parent)
        except BaseException:
            os.close(fd)
            raise
        if entries:
            notes.append(f"resuming from {path}: {len(entries)} finished scenarios on record")
        return cls(path, fd, entries, notes)

    def lookup(self, scenario: Scenario, digest: str | None = None) -> Any | None:
        """The stored result of this exact scenario, or None (counting stale entries)."""
        digest = digest or scenario_digest(scenario)
        found = self._entries.get((scenario.profile, scenario.seed, digest))
        if found is None and (scenario.profile, scenario.seed) in self._by_scenario:
            self.stale += 1
        return found

    def append(self, scenario: Scenario, result: Any, digest: str | None = None) -> None:
        """Store one finished result durably (written and fsynced before returning)."""
        key: EntryKey = {
            "profile": scenario.profile,
            "seed": scenario.seed,
            "digest": digest or scenario_digest(scenario),
        }
        entry: JournalEntry = {"key": key, "result": result}
        _append(self._fd, entry, self.path)

    def close(self) -> None:
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # also releases the lock
            self._fd = -1

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _lock(fd: int, path: Path) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock, documented
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise JournalError(
            f"{path} is in use by another tracediff run; wait for it or use another --resume "
            "directory"
        ) from None


def _append(fd: int, value: JournalHeader | JournalEntry, path: Path) -> None:
    data = (json.dumps(value, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError as exc:
        # a full disk mid-run: name the file (a torn line is dropped on --resume)
        raise OutputError(f"{path}: cannot append to the journal: {exc.strerror or exc}") from None


def _load(
    path: Path, fd: int, identity: RunIdentity
) -> tuple[dict[Key, Any], list[str], int | None]:
    """Entries, notes, and the size to cut the file back to (None: keep it as it is)."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0) if size else b""
    lines = data.split(b"\n")
    complete = lines[:-1]  # what ends in a newline; lines[-1] is b"" or a torn tail
    tail = lines[-1]
    notes: list[str] = []
    good_size: int | None = None
    parsed: list[Any] = []
    offset = 0
    for number, raw in enumerate(complete, start=1):
        try:
            parsed.append(json.loads(raw))
        except (ValueError, RecursionError):  # RecursionError: nesting no journal has
            if number == len(complete) and not tail:
                tail, good_size = raw, offset  # an unparsable last line: torn, as below
                break
            raise JournalError(
                f"{path} line {number} is damaged (not JSON); it is not a crash's torn last "
                "line, so the journal cannot be trusted: delete it to start fresh"
            ) from None
        offset += len(raw) + 1
    if tail:
        good_size = offset
        notes.append(
            f"{path}: ignored a torn last line ({len(tail)} bytes, from a crash mid-write); "
            "its scenario runs again"
        )
    if not parsed:
        if good_size is None and size:
            good_size = 0
        return {}, notes, good_size
    header = parsed[0]
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise JournalError(f"{path} is not a tracediff journal; use another --resume directory")
    if header.get("version") != VERSION:
        raise JournalError(
            f"{path} is journal version {header.get('version')!r}, this tracediff reads "
            f"{VERSION}; use another --resume directory"
        )
    stored = RunIdentity(
        impls=tuple(header.get("impls", ())),
        targets=tuple(header.get("targets", ())),
        profiles=tuple(header.get("profiles", ())),
        version=str(header.get("tracediff")),
    )
    if stored != dataclasses.replace(identity, fingerprint=()):
        raise JournalError(
            f"--resume {path.parent}: the journal is of a run of {stored.describe()}, this run "
            f"is {identity.describe()}; use another --resume directory, or --fresh to start "
            "a new journal there"
        )
    recorded = header.get("fingerprint")
    if not isinstance(recorded, dict):
        recorded = {}
    what = changed(recorded, dict(identity.fingerprint))
    if what:
        raise JournalError(
            f"--resume {path.parent}: {', '.join(what)} changed since its results were "
            "journaled, so they are not this code's; rerun with --fresh to start a new "
            "journal (the old one is kept as journal.jsonl.old)"
        )
    entries: dict[Key, Any] = {}
    for number, line in enumerate(parsed[1:], start=2):
        problem = _entry_problem(line)
        if problem:
            raise JournalError(
                f"{path} line {number} is not a journal entry ({problem}); delete the journal "
                "to start fresh"
            )
        key = line["key"]
        entries[(key["profile"], key["seed"], key["digest"])] = line["result"]
    return entries, notes, good_size


MAX_SEED = 2**53 - 1  # what the profiles' seed sets allow
MAX_DIGEST = 128  # characters; a sha256 in hex has 64 (one that differs is a stale entry)


def _entry_problem(line: Any) -> str:
    """What is wrong with one journal line (a key and a result), or "" when nothing is: the
    journal is trusted no more than any other file (an entry of unknown status, a seed that
    is not an integer, would otherwise be reported as a result)."""
    if not isinstance(line, dict) or set(line) != {"key", "result"}:
        return "expected an object of 'key' and 'result'"
    key, result = line["key"], line["result"]
    if not isinstance(key, dict) or set(key) != {"profile", "seed", "digest"}:
        return "its key is not {profile, seed, digest}"
    seed = key["seed"]
    if type(seed) is not int or not 0 <= seed <= MAX_SEED:
        return f"seed {str(seed)[:40]!r} is not an integer from 0 to {MAX_SEED}"
    if not isinstance(key["profile"], str) or not key["profile"]:
        return "its profile is not a name"
    if not isinstance(key["digest"], str) or len(key["digest"]) > MAX_DIGEST:
        return "its digest is not a scenario digest"
    if not isinstance(result, dict):
        return "its result is not an object"
    status = result.get("status")
    if status not in tuple(Status):
        return f"status {str(status)[:40]!r} is none of {', '.join(Status)}"
    if (result.get("profile"), result.get("seed")) != (key["profile"], seed):
        return "its result is of another scenario than its key"
    return ""


def identity_for(
    impl_names: Sequence[str],
    targets: Sequence[str],
    scenarios: Sequence[Scenario],
    fingerprint: dict[str, str] | None = None,
) -> RunIdentity:
    return RunIdentity(
        impls=tuple(impl_names),
        targets=tuple(targets),
        profiles=tuple(sorted({s.profile for s in scenarios})),
        fingerprint=tuple(sorted((fingerprint or {}).items())),
    )


def start_fresh(directory: str | os.PathLike[str]) -> Path | None:
    """``--fresh``: move an existing journal aside (to ``journal.jsonl.old``) so the run
    starts a new one; returns where it went, or None when there was none."""
    path = journal_path(directory)
    if not path.is_file() or path.is_symlink():
        return None
    old = path.with_name(JOURNAL_FILE + ".old")
    try:
        os.replace(path, old)
    except OSError as exc:
        raise JournalError(f"--fresh: cannot move {path} aside: {exc.strerror}") from None
    return old
