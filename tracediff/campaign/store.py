"""The campaign's results store: one SQLite file, ``<DIR>/campaign.sqlite``.

Why SQLite: a campaign of a million scenarios writes a million small rows as they arrive,
must survive being killed at any moment, and must answer "which seeds are done" when it is
resumed; a JSON file would be rewritten whole, JSON lines would need their own index and
recovery. SQLite (in the standard library) gives transactions, an index on the seed and
aggregate queries, in one file a user can also open with ``sqlite3``.

Schema, version 1:

- ``meta(key, value)``: ``format`` (tracediff-campaign), ``version``, ``identity`` (the
  implementations and the profile, as JSON: a campaign directory holds one campaign);
- ``results(seed PRIMARY KEY, status, worker, seconds, plans, impls, signature, outcome)``:
  one row per finished scenario. ``impls`` is JSON ``[[name, plans, records, digest,
  seconds, plan_seconds], ...]``; ``seconds`` is the worker's wall time on it, harness
  included; ``signature`` and ``outcome`` (the explained finding as in a JSON report) are
  set for findings only.

A seed is inserted once (``INSERT OR IGNORE``): a scenario reported twice (a Dask task run
again after its worker was lost just as it finished) is counted once. Rows are committed in
batches; a campaign killed between two commits loses at most the batch in flight, which a
resumed campaign runs again.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracediff.errors import OutputError, TraceFormatError, UsageError
from tracediff.outcomes import Status

FORMAT = "tracediff-campaign"
VERSION = 1
STORE_FILE = "campaign.sqlite"
COMMIT_EVERY = 256  # rows
COMMIT_AFTER_S = 1.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    seed INTEGER PRIMARY KEY,
    status TEXT NOT NULL,
    worker TEXT NOT NULL,
    seconds REAL NOT NULL,
    plans INTEGER NOT NULL,
    impls TEXT NOT NULL,
    signature TEXT,
    outcome TEXT
);
"""


def damaged(path: Path, reason: object) -> TraceFormatError:
    """The error (exit 2) of a store whose pages or rows are not what tracediff wrote."""
    return TraceFormatError(
        str(path),
        f"the campaign store is damaged ({reason}); give another --out (or delete it to "
        "start fresh)",
    )


def unwritable(path: Path, exc: sqlite3.DatabaseError) -> OutputError | None:
    """The error (exit 2) of a store that cannot be written (a full disk or quota, a file
    size limit, an I/O error), else None: its results committed so far are kept."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None or (code & 0xFF) not in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
        return None
    why = "no space left (the disk, a quota or a file size limit)"
    if code & 0xFF == sqlite3.SQLITE_IOERR:
        why = f"an I/O error ({exc})"
    return OutputError(
        f"{path}: cannot be written: {why}; the results committed so far are kept: free "
        "space and rerun the same command to resume (or give another --out)"
    )


def store_error(path: Path, exc: sqlite3.DatabaseError) -> OutputError | TraceFormatError:
    """What a DatabaseError of the store at ``path`` means: it cannot be written, or its
    content is not what tracediff wrote (both exit 2)."""
    return unwritable(path, exc) or damaged(path, exc)


STATUSES = tuple(Status)  # the one vocabulary of scenario outcomes


def _row(path: Path, fields: tuple[Any, ...]) -> Row:
    """One stored row, checked: a store is a file like any other (hand-edited, damaged)."""
    try:
        seed, status, worker, seconds, plans, impls, signature, outcome = fields
        bad = (
            type(seed) is not int
            or status not in STATUSES
            or not isinstance(worker, str)
            or type(seconds) not in (int, float)
            or type(plans) is not int
            or not (signature is None or isinstance(signature, str))
        )
        if bad:
            raise ValueError("a value of the wrong kind")
        stats = json.loads(impls)
        kept = None if outcome is None else json.loads(outcome)
        if not (kept is None or isinstance(kept, dict)):
            raise ValueError("an outcome that is not an object")
        row_impls = tuple(tuple(i) for i in stats)
    except (ValueError, TypeError, RecursionError) as exc:
        seed = fields[0] if fields else "?"
        raise damaged(path, f"the row of seed {str(seed)[:30]}: {exc}") from None
    return Row(seed, status, worker, seconds, plans, row_impls, signature, kept)


@dataclass(frozen=True)
class Row:
    """One finished scenario as the store holds it."""

    seed: int
    status: str
    worker: str
    seconds: float
    plans: int
    impls: tuple[tuple[str, int, int, str, float, float], ...]
    signature: str | None = None
    outcome: dict[str, Any] | None = None


@dataclass
class Totals:
    """What the rows add up to (the campaign summary's numbers)."""

    statuses: dict[str, int] = field(default_factory=dict)
    plans: int = 0
    impl_plans: dict[str, int] = field(default_factory=dict)
    impl_seconds: dict[str, float] = field(default_factory=dict)
    impl_plan_seconds: dict[str, float] = field(default_factory=dict)
    workers: dict[str, list[float]] = field(default_factory=dict)  # name: [scenarios, s]
    signatures: dict[str, list[int]] = field(default_factory=dict)  # sig: [count, seed]

    @property
    def scenarios(self) -> int:
        return sum(self.statuses.values())

    @property
    def findings(self) -> int:
        return self.scenarios - self.statuses.get("identical", 0)

    def add(self, row: Row) -> None:
        self.statuses[row.status] = self.statuses.get(row.status, 0) + 1
        self.plans += row.plans
        for name, plans, _records, _digest, seconds, plan_seconds in row.impls:
            self.impl_plans[name] = self.impl_plans.get(name, 0) + plans
            self.impl_seconds[name] = self.impl_seconds.get(name, 0.0) + seconds
            self.impl_plan_seconds[name] = self.impl_plan_seconds.get(name, 0.0) + plan_seconds
        held = self.workers.setdefault(row.worker, [0.0, 0.0])
        held[0] += 1
        held[1] += row.seconds
        if row.signature is not None:
            count_seed = self.signatures.setdefault(row.signature, [0, row.seed])
            count_seed[0] += 1
            count_seed[1] = min(count_seed[1], row.seed)


class CampaignStore:
    """Open with :meth:`open`; :meth:`add` rows, :meth:`close` (or use ``with``)."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._db = connection
        self._pending = 0
        self._last_commit = time.monotonic()

    @classmethod
    def open(cls, directory: str | Path, identity: dict[str, Any] | None = None) -> CampaignStore:
        """Open (or, with ``identity``, create) the store of a campaign directory.

        With ``identity``, a store of another campaign (other implementations or profile) is
        refused; without, the store must exist (``campaign report``)."""
        root = Path(directory)
        path = root / STORE_FILE
        if path.is_symlink() or (path.exists() and not path.is_file()):
            # the store is written only inside the campaign directory, never through a link
            raise UsageError(
                f"{path}: is a symbolic link or not a regular file; tracediff keeps a "
                "campaign's store only inside its directory: remove it or give another --out"
            )
        if identity is None and not path.is_file():
            raise UsageError(f"{root}: no campaign here ({STORE_FILE} does not exist)")
        if identity is not None:
            if not root.exists() and not root.parent.is_dir():
                raise OutputError(
                    f"--out {root}: directory {root.parent} does not exist; create it first "
                    "(tracediff creates only the last directory of the path)"
                )
            try:
                root.mkdir(exist_ok=True)
            except OSError as exc:
                raise OutputError(f"--out {root}: cannot create it: {exc.strerror}") from None
        existed = path.is_file() and path.stat().st_size > 0
        try:
            db = sqlite3.connect(str(path))
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
            if existed and not {"meta", "results"} <= tables:
                db.close()
                missing = sorted({"meta", "results"} - tables)
                raise TraceFormatError(
                    str(path),
                    f"not a campaign store: it has no {' or '.join(missing)} table; give "
                    "another --out (or delete it to start fresh)",
                )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise store_error(path, exc) from None
        store = cls(path, db)
        try:
            store._check(identity)
        except sqlite3.DatabaseError as exc:
            store._db.close()
            raise store_error(path, exc) from None
        return store

    def _check(self, identity: dict[str, Any] | None) -> None:
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        if not meta:
            if identity is None:
                raise TraceFormatError(str(self.path), "an empty campaign store")
            rows = [("format", FORMAT), ("version", str(VERSION))]
            rows.append(("identity", json.dumps(identity, sort_keys=True)))
            self._db.executemany("INSERT INTO meta VALUES (?, ?)", rows)
            self._db.commit()
            return
        if meta.get("format") != FORMAT or meta.get("version") != str(VERSION):
            raise TraceFormatError(
                str(self.path),
                f"not a {FORMAT} store of version {VERSION} (format {meta.get('format')!r}, "
                f"version {meta.get('version')!r})",
            )
        if identity is None:
            return
        stored = json.loads(meta["identity"])
        stored_code = stored.pop("fingerprint", {}) if isinstance(stored, dict) else {}
        current = {k: v for k, v in identity.items() if k != "fingerprint"}
        if stored != current:
            raise UsageError(
                f"{self.path.parent} holds another campaign ({meta['identity']}); give "
                "another --out, or the same implementations and profile to resume it"
            )
        from tracediff.running.fingerprint import changed

        what = changed(
            stored_code if isinstance(stored_code, dict) else {}, identity.get("fingerprint", {})
        )
        if what:
            raise UsageError(
                f"{self.path.parent}: {', '.join(what)} changed since this campaign's results "
                "were stored, so they are not this code's; give another --out to start a new "
                "campaign"
            )

    @property
    def identity(self) -> dict[str, Any]:
        (value,) = self._db.execute("SELECT value FROM meta WHERE key = 'identity'").fetchone()
        data: dict[str, Any] = json.loads(value)
        return data

    def done(self) -> set[int]:
        """The seeds already in the store."""
        try:
            seeds = {seed for (seed,) in self._db.execute("SELECT seed FROM results")}
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, exc) from None
        if any(type(seed) is not int for seed in seeds):
            raise damaged(self.path, "a seed that is not an integer")
        return seeds

    def add(self, row: Row) -> bool:
        """Insert a row; False when its seed was already there (nothing counted twice)."""
        cursor = self.execute(
            "INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.seed,
                row.status,
                row.worker,
                row.seconds,
                row.plans,
                json.dumps(row.impls),
                row.signature,
                None if row.outcome is None else json.dumps(row.outcome),
            ),
        )
        self.tick()
        return cursor.rowcount == 1

    def tick(self) -> None:
        """One more row written: commit every COMMIT_EVERY rows or COMMIT_AFTER_S seconds."""
        self._pending += 1
        now = time.monotonic()
        if self._pending >= COMMIT_EVERY or now - self._last_commit >= COMMIT_AFTER_S:
            self.commit()

    def execute(self, sql: str, parameters: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        """A statement on the store's connection (for tables of other campaign kinds)."""
        try:
            return self._db.execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise self._unwritable(exc) from None

    def executescript(self, sql: str) -> None:
        try:
            self._db.executescript(sql)
        except sqlite3.DatabaseError as exc:
            raise self._unwritable(exc) from None

    def commit(self) -> None:
        try:
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise self._unwritable(exc) from None
        self._pending = 0
        self._last_commit = time.monotonic()

    def _unwritable(self, exc: sqlite3.DatabaseError) -> Exception:
        """A write's failure: OutputError (exit 2, naming the store) when it cannot be
        written, else the error itself (a damaged store is reported where it is read)."""
        return unwritable(self.path, exc) or exc

    def rows(self, *, findings_only: bool = False) -> Iterator[Row]:
        """Every row in seed order (streamed: a million rows are not held at once)."""
        query = "SELECT * FROM results"
        if findings_only:
            query += " WHERE status != 'identical'"
        try:
            cursor = self._db.execute(query + " ORDER BY seed")
            for fields in cursor:
                yield _row(self.path, fields)
        except sqlite3.DatabaseError as exc:
            raise damaged(self.path, exc) from None

    def totals(self) -> Totals:
        totals = Totals()
        for row in self.rows():
            totals.add(row)
        return totals

    def close(self) -> None:
        try:
            self.commit()
        finally:
            self._db.close()

    def __enter__(self) -> CampaignStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
