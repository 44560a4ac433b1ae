"""The golden manifest: its format, reading and writing, and where its files live."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from tracediff.errors import NESTING, TraceFormatError
from tracediff.filenames import component, inside
from tracediff.model import Scenario
from tracediff.project import ENVIRONMENT

# CI detection lives with the project's settings; golden and shrink both ask it where a CI
# run's output goes.
from tracediff.project import artifacts_dir as artifacts_dir
from tracediff.project import in_ci as in_ci
from tracediff.project.impls import ImplSpec

FORMAT = "tracediff-golden"
VERSION = 1
DEFAULT_DIR = "golden"
ARTIFACTS_ENV = ENVIRONMENT["artifacts"]
PENDING = ".new"
TRACES_PER_PROFILE = 6
TRACE_MAX_BYTES = 160_000  # only small scenarios keep a full trace (the whole set ~2 MB)
SCENARIO_HASH_CHARS = 16
EXPLAIN_AT_MOST = 20  # mismatching seeds re-run against the reference to explain them

OK, MISMATCH, MISSING = "ok", "mismatch", "missing"
# kinds of a seed's mismatch
DIGEST, FAILED, NOT_IN_MANIFEST, NOT_IN_PROFILE = "digest", "failed", "not-in-manifest", "gone"

ExplainFn = Callable[[Scenario, Any, Sequence[ImplSpec]], str]


class EntryDocument(TypedDict):
    """One scenario of a golden manifest, as JSON (the keys in this order)."""

    seed: int
    digest: str
    plans: int
    records: int
    bytes: int
    scenario: str


class ManifestDocument(TypedDict):
    """A golden manifest, as JSON (the keys in this order; see :meth:`Manifest.dumps`)."""

    format: str
    version: int
    profile: str
    impl: str
    tracediff: str
    traces: list[int]
    scenarios: list[EntryDocument]


@dataclass(frozen=True)
class Entry:
    seed: int
    digest: str
    plans: int
    records: int
    bytes: int
    scenario: str = ""  # sha256 (16 hex) of the trace header: which scenario was digested

    def to_dict(self) -> EntryDocument:
        return {
            "seed": self.seed,
            "digest": self.digest,
            "plans": self.plans,
            "records": self.records,
            "bytes": self.bytes,
            "scenario": self.scenario,
        }


@dataclass(frozen=True)
class Manifest:
    profile: str
    impl: str
    tracediff: str
    scenarios: tuple[Entry, ...]
    traces: tuple[int, ...] = ()

    def entry(self, seed: int) -> Entry | None:
        return self.by_seed.get(seed)

    @property
    def by_seed(self) -> dict[int, Entry]:
        return {e.seed: e for e in self.scenarios}

    def to_dict(self) -> ManifestDocument:
        return {
            "format": FORMAT,
            "version": VERSION,
            "profile": self.profile,
            "impl": self.impl,
            "tracediff": self.tracediff,
            "traces": list(self.traces),
            "scenarios": [e.to_dict() for e in self.scenarios],
        }

    def dumps(self) -> str:
        """The manifest as JSON text: header keys first, then one scenario per line."""
        data = self.to_dict()
        header: list[tuple[str, object]] = [
            ("format", data["format"]),
            ("version", data["version"]),
            ("profile", data["profile"]),
            ("impl", data["impl"]),
            ("tracediff", data["tracediff"]),
            ("traces", data["traces"]),
        ]
        lines = ["{"]
        for key, value in header:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)},")
        lines.append(' "scenarios": [')
        rows = [f"  {json.dumps(row)}" for row in data["scenarios"]]
        lines.append(",\n".join(rows))
        lines.append(" ]")
        lines.append("}")
        return "\n".join(line for line in lines if line) + "\n"

    def same_content(self, other: Manifest) -> bool:
        """Equal apart from the tracediff version that wrote it."""
        return (self.profile, self.impl, self.scenarios, self.traces) == (
            other.profile,
            other.impl,
            other.scenarios,
            other.traces,
        )


def parse_manifest(data: Any, path: str) -> Manifest:
    """A manifest from decoded JSON; TraceFormatError naming the file when it is wrong."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise TraceFormatError(path, f'not a golden manifest (no "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise TraceFormatError(
            path,
            f"golden manifest version {data.get('version')!r}; this tracediff reads version "
            f"{VERSION} (regenerate it with tracediff golden update)",
        )
    try:
        entries = tuple(
            Entry(
                seed=_count(row["seed"], "seed", MAX_SEED),
                digest=_hex(row["digest"], "digest", (DIGEST_CHARS,)),
                plans=_count(row["plans"], "plans"),
                records=_count(row["records"], "records"),
                bytes=_count(row["bytes"], "bytes"),
                scenario=_hex(row.get("scenario", ""), "scenario", (0, SCENARIO_HASH_CHARS)),
            )
            for row in data["scenarios"]
        )
        manifest = Manifest(
            profile=str(data["profile"]),
            impl=str(data["impl"]),
            tracediff=str(data.get("tracediff", "")),
            scenarios=entries,
            traces=tuple(_count(s, "traces", MAX_SEED) for s in data.get("traces", ())),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        # a row that is no object, a count of inf or "x": the file's fault, named
        raise TraceFormatError(path, f"malformed golden manifest: {exc!r:.200}") from None
    if len({e.seed for e in entries}) != len(entries):
        raise TraceFormatError(path, "malformed golden manifest: a seed appears twice")
    return manifest


MAX_SEED = 2**53 - 1
DIGEST_CHARS = 64  # a sha256 in hex


def _count(value: Any, field: str, limit: int = 2**63 - 1) -> int:
    """A manifest's integer: an int (not a bool, a float or a string of digits), 0..limit;
    a malformed one is the file's fault (exit 2), never a mismatch."""
    if type(value) is not int or not 0 <= value <= limit:
        raise ValueError(f"{field} {str(value)[:40]!r} is not an integer from 0 to {limit}")
    return value


def _hex(value: Any, field: str, lengths: tuple[int, ...]) -> str:
    if not isinstance(value, str) or len(value) not in lengths or value.strip("0123456789abcdef"):
        raise ValueError(
            f"{field} {str(value)[:70]!r} is not {' or '.join(map(str, lengths))} hex digits"
        )
    return value


def read_manifest(path: str | Path) -> Manifest:
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFormatError(name, "does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFormatError(name, f"cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(name, f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise TraceFormatError(name, f"not a golden manifest: {NESTING}") from None
    return parse_manifest(data, name)


def manifest_path(golden_dir: str | Path, profile: str) -> Path:
    return inside(golden_dir, f"{component(profile)}.json", what="golden manifest")


def trace_path(golden_dir: str | Path, profile: str, seed: int) -> Path:
    return inside(golden_dir, "traces", f"{component(profile, seed)}.trace", what="golden trace")


def pending_file(path: Path) -> Path:
    return path.with_name(path.name + PENDING)
