"""Project configuration: the ``[tool.tracediff]`` table of a ``pyproject.toml``.

Found as pytest, ruff and mypy find theirs: the nearest ``pyproject.toml`` with a
``[tool.tracediff]`` table, walking up from the current directory. Paths in it are relative
to that file, never to the current directory, so a command behaves the same from any
subdirectory of the project. Precedence, for every setting: the command-line flag, then its
environment variable where it has one, then this table, then the built-in default.

Keys (all optional)::

    [tool.tracediff]
    impls = ["reference", "mypkg.sched:FastScheduler"]  # the first is the baseline
    profile = "quick"               # default --profile
    profiles = "tracediff/profiles" # more profile .toml files (searched before the built-ins)
    regressions = "tracediff/regressions"  # the regression corpus (shrink --save adds to it)
    golden = "tracediff/golden"     # golden manifests and traces
    artifacts = "artifacts"         # where findings' traces and reports are kept
    timeout = 60.0                  # per-scenario time limit, seconds
    jobs = 4                        # worker processes
    git_build = "make build"        # run once in each revision a git: implementation names

    [tool.tracediff.envs]           # interpreters by name: --impl 'optimized@old'
    old = ".venv-old/bin/python"

A configured directory that does not exist is a :class:`ConfigError` (exit 2) where it is
read, naming the file and the key.
"""

from __future__ import annotations

import functools
import json
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracediff.errors import NESTING, ConfigError

FILE = "pyproject.toml"
TABLE = "tool.tracediff"
PATH_KEYS = ("profiles", "regressions", "golden", "artifacts")
KEYS = ("model", "impls", "profile", *PATH_KEYS, "timeout", "jobs", "git_build", "envs")


@dataclass(frozen=True)
class Config:
    """The settings of one ``[tool.tracediff]`` table (empty when none was found)."""

    path: Path | None = None  # the pyproject.toml they came from
    model: str | None = None  # the decision model (tracediff.model), by registry name
    impls: tuple[str, ...] = ()
    profile: str | None = None
    profiles: Path | None = None
    regressions: Path | None = None
    golden: Path | None = None
    artifacts: Path | None = None
    timeout: float | None = None
    jobs: int | None = None
    git_build: str | None = None  # a shell command run in each cached revision (git: impls)
    envs: tuple[tuple[str, Path], ...] = ()  # interpreter name -> python (NAME@ENV impls)

    def where(self, key: str) -> str:
        """How a message names a key: ``/p/pyproject.toml [tool.tracediff] golden``."""
        return f"{self.path} [{TABLE}] {key}"

    def existing_dir(self, key: str) -> Path | None:
        """The configured directory ``key``, or None when not configured; ConfigError when
        it is configured but missing."""
        value: Path | None = getattr(self, key)
        if value is None:
            return None
        if not value.is_dir():
            what = "is not a directory" if value.exists() else "does not exist"
            raise ConfigError(f"{self.where(key)} = {value}: {what}; create it or fix the setting")
        return value


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest ``pyproject.toml`` holding a ``[tool.tracediff]`` table, from ``start``
    (default: the current directory) up to the filesystem root; None when there is none."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / FILE
        if candidate.is_file() and _table(candidate) is not None:
            return candidate
    return None


def load_config(start: Path | None = None) -> Config:
    """The configuration in effect from ``start`` (default: the current directory)."""
    if os.environ.get("TRACEDIFF_NO_CONFIG"):
        return Config()
    path = find_pyproject(start)
    if path is None:
        return Config()
    table = _table(path)
    assert table is not None
    return parse_config(table, path)


def parse_config(table: dict[str, Any], path: Path) -> Config:
    """A Config from a decoded ``[tool.tracediff]`` table; ConfigError naming the key."""
    where = f"{path} [{TABLE}]"
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; allowed: {list(KEYS)}")
    values: dict[str, Any] = {}
    model = table.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ConfigError(f"{where} model: expected a model name (tracediff models lists them)")
    values["model"] = model
    impls = table.get("impls", [])
    if not isinstance(impls, list) or not all(isinstance(i, str) and i for i in impls):
        raise ConfigError(f"{where} impls: expected a list of implementation names")
    values["impls"] = tuple(impls)
    profile = table.get("profile")
    if profile is not None and (not isinstance(profile, str) or not profile):
        raise ConfigError(f"{where} profile: expected a profile name")
    if profile is not None and "@/" in profile:  # how --workload joins a file to a profile
        raise ConfigError(
            f"{where} profile: {profile[:100]!r} may not hold '@/'; name a profile (or its "
            "file), and give a workload with --workload FILE or a profile's [workload] table"
        )
    values["profile"] = profile
    for key in PATH_KEYS:
        value = table.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where} {key}: expected a path (a string)")
        if "\0" in value:
            raise ConfigError(f"{where} {key}: {value!r} holds a NUL character; fix the path")
        try:
            values[key] = (path.parent / value).resolve()
        except (OSError, RuntimeError) as exc:  # a symbolic link loop (RuntimeError in 3.11)
            raise ConfigError(
                f"{where} {key} = {value!r}: cannot be resolved ({exc}); fix the path"
            ) from None
    timeout = table.get("timeout")
    if timeout is not None:
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not (math.isfinite(timeout) and timeout > 0)
        ):
            raise ConfigError(f"{where} timeout: expected a positive number of seconds")
        values["timeout"] = float(timeout)
    jobs = table.get("jobs")
    if jobs is not None:
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ConfigError(f"{where} jobs: expected a whole number of at least 1")
        values["jobs"] = jobs
    git_build = table.get("git_build")
    if git_build is not None and (not isinstance(git_build, str) or not git_build.strip()):
        raise ConfigError(f"{where} git_build: expected a shell command (a string)")
    values["git_build"] = git_build
    envs = table.get("envs", {})
    if not isinstance(envs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in envs.items()
    ):
        raise ConfigError(
            f"{where} envs: expected a table of names and python paths, e.g. "
            'old = ".venv-old/bin/python"'
        )
    # relative to the file, as every path here is; not resolved: a venv's python is a link
    values["envs"] = tuple(sorted((k, path.parent / v) for k, v in envs.items()))
    return Config(path=path, **values)


def _table(path: Path) -> dict[str, Any] | None:
    try:
        data = _parsed(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not readable TOML: {NESTING}; fix the file") from None
    tool = data.get("tool")
    if not isinstance(tool, dict) or "tracediff" not in tool:
        return None
    table = tool["tracediff"]
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [{TABLE}] must be a table")
    return table


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> dict[str, Any]:
    """A pyproject.toml's text decoded: a command reads its configuration several times
    (each setting it resolves), and parsing is most of that cost. Keyed by the text, so
    an edited file is parsed again however soon. Read-only: callers only look."""
    return tomllib.loads(text)


STARTER = """
[tool.tracediff]
# Written by `tracediff init`. Paths are relative to this file.
{model}# Implementations to compare (built-in name or module:attr); the first is the baseline.
impls = {impls}
profile = "quick"              # the seed-set profile run and gate use by default
artifacts = "artifacts"        # findings' traces and reports are kept here
timeout = 60.0                 # per-scenario time limit in seconds; over it is a finding
# profiles = "tracediff/profiles"        # your own profile .toml files
# regressions = "tracediff/regressions"  # the regression corpus; shrink --save adds to it
# golden = "tracediff/golden"            # golden digests (tracediff golden update)
"""


def starter_text(
    existing: str,
    *,
    model: str | None = None,
    impls: tuple[str, ...] = ("reference", "optimized"),
) -> str:
    """``existing`` pyproject.toml text with the starter table appended; ConfigError when
    it already has a ``[tool.tracediff]`` table (init never overwrites one). ``model``: the
    decision model in effect when it is not the default one, written so that every later
    command of the project uses it without ``--model``; ``impls``: that model's defaults."""
    try:
        data = tomllib.loads(existing)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{FILE}: not valid TOML ({exc}); fix it first") from None
    except RecursionError:
        raise ConfigError(f"{FILE}: not readable TOML: {NESTING}; fix it first") from None
    tool = data.get("tool")
    if isinstance(tool, dict) and "tracediff" in tool:
        raise ConfigError(
            f"{FILE} already has a [{TABLE}] table; edit it (init never overwrites one)"
        )
    text = existing
    if text and not text.endswith("\n"):
        text += "\n"
    # json.dumps writes a TOML basic string (and an array of them) for any text
    line = f"model = {json.dumps(model)}  # the decision model (tracediff models)\n"
    table = STARTER.format(model=line if model else "", impls=json.dumps(list(impls)))
    return (text + table).lstrip("\n")
