"""Profiles: named seed sets with the generator parameters that make them reproducible.

A profile is a TOML file: a built-in one (``quick``, ``default``, ``stress``), one in the
project's configured ``profiles`` directory, or any path. It names its seeds, a matrix of
cells that seeds walk through, and generator parameters, so a scenario is fully determined
by (profile, seed). See docs/profiles.md for the keys.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracediff.errors import ProfileError, UsageError
from tracediff.scenario.model import ALLOCATIONS, SchedulerParams

PROFILE_DIR_ENV = "TRACEDIFF_PROFILES"
GRAPHS = ("rect", "mixed")


@dataclass(frozen=True)
class Matrix:
    """The cells seeds walk through: seed s -> cell s mod (cells), queue depth cycling."""

    requests: tuple[int, ...] = (1, 8, 32, 64)
    allocation: tuple[str, ...] = ALLOCATIONS
    graphs: tuple[str, ...] = GRAPHS
    queue_depth: tuple[int, ...] = (0, 1, 2)

    @property
    def cells(self) -> int:
        return len(self.requests) * len(self.allocation) * len(self.graphs)

    def cell(self, seed: int) -> tuple[int, str, str, int]:
        index = seed % self.cells
        graphs = self.graphs[index % len(self.graphs)]
        index //= len(self.graphs)
        allocation = self.allocation[index % len(self.allocation)]
        index //= len(self.allocation)
        requests = self.requests[index % len(self.requests)]
        queue_depth = self.queue_depth[(seed // self.cells) % len(self.queue_depth)]
        return requests, allocation, graphs, queue_depth


@dataclass(frozen=True)
class Generator:
    """Per-request draws; ranges are inclusive [low, high]."""

    max_new: tuple[int, int] = (24, 160)
    # Fewer tokens per request as the request count grows, so that long scenarios at 64
    # requests do not dominate a profile's time: max_new is scaled by
    # (1 + max_new_decay * log2(requests)) ** -1.
    max_new_decay: float = 0.0
    prompt_len: tuple[int, int] = (32, 1536)
    arrival_window_us: int = 300_000
    p_copy: float = 0.3
    p_grammar: float = 0.15
    p_host_stop: float = 0.15
    p_fixed: float = 0.1
    p_stop: float = 0.3
    p_eager: float = 0.25
    p_burst: float = 0.15  # chance a request arrives at the same µs as the one before it
    accept_base: tuple[float, float] = (0.45, 0.95)
    accept_decay: tuple[float, float] = (0.7, 1.0)
    # Swarm toggles, each drawn per seed: regimes that make every clause of the rules decide
    # (docs/scheduler.md, "Rule coverage"). Exact acceptance: prior alpha 1.0 and a share of
    # requests whose drafts are always accepted, so expected tokens are whole numbers and
    # candidates of different shapes tie exactly. Quantised: durations on a coarse clock.
    # Tight budget: a verification budget below the lane count. Few slots: fewer batch
    # slots than requests, so requests wait for a slot.
    p_exact: float = 0.3
    p_perfect: float = 0.5  # exact regime: chance a request's drafts are always accepted
    p_quantised: float = 0.35
    quanta_us: tuple[int, ...] = (1000, 2000, 4000)
    p_linear: float = 0.25  # the prior's cost is proportional to the padded tokens
    p_tight_budget: float = 0.25
    tight_budgets: tuple[int, ...] = (12, 16, 24, 32, 48)
    p_few_slots: float = 0.2
    few_slots: tuple[int, ...] = (4, 8, 12)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    seeds: tuple[int, ...] = ()
    matrix: Matrix = field(default_factory=Matrix)
    generator: Generator = field(default_factory=Generator)
    params: dict[str, Any] = field(default_factory=dict)  # SchedulerParams overrides
    path: str = ""

    def __hash__(self) -> int:
        return hash((self.name, self.path))


def profile_dirs() -> list[Path]:
    """Where profile names are looked up, in order: $TRACEDIFF_PROFILES, the project's
    configured ``profiles`` directory ([tool.tracediff]), then the built-in profiles. Never
    the current directory: a name means the same profile from any subdirectory."""
    from tracediff.config import load_config
    from tracediff.resources import builtin_dir

    dirs = []
    env = os.environ.get(PROFILE_DIR_ENV)
    if env:
        dirs.append(Path(env))
    configured = load_config().existing_dir("profiles")
    if configured is not None:
        dirs.append(configured)
    builtin = builtin_dir("profiles")
    if builtin is not None:
        dirs.append(builtin)
    return dirs


def available_profiles() -> list[str]:
    names: set[str] = set()
    for directory in profile_dirs():
        if directory.is_dir():
            names.update(p.stem for p in directory.glob("*.toml"))
    return sorted(names)


def find_profile(name: str) -> Path:
    if name.endswith(".toml") or os.sep in name:
        path = Path(name)
        if not path.is_file():
            raise ProfileError(f"profile file {name} does not exist")
        return path
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UsageError(f"profile name {name!r} is not a plain name or a .toml path")
    for directory in profile_dirs():
        candidate = directory / f"{name}.toml"
        if candidate.is_file():
            return candidate
    choices = ", ".join(available_profiles()) or "none found"
    raise UsageError(f"unknown profile {name!r}; choose one of: {choices} (or a .toml path)")


def load_profile(name: str) -> Profile:
    path = find_profile(name)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc}") from None
    return parse_profile(data, str(path))


def parse_profile(data: dict[str, Any], path: str = "<memory>") -> Profile:
    known = {"name", "description", "seeds", "matrix", "generator", "params"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{path}: unknown keys {unknown}; allowed: {sorted(known)}")
    try:
        name = str(data.get("name") or Path(path).stem)
        seeds_spec = data.get("seeds", 0)
        if isinstance(seeds_spec, int):
            seeds = tuple(range(seeds_spec))
        else:
            seeds = parse_seeds(str(seeds_spec))
        matrix = _build(Matrix, data.get("matrix", {}), f"{path} [matrix]")
        generator = _build(Generator, data.get("generator", {}), f"{path} [generator]")
        params = dict(data.get("params", {}))
    except UsageError as exc:
        raise ProfileError(f"{path}: {exc}") from None
    allowed = {f.name for f in dataclasses.fields(SchedulerParams)} - {
        "allocation",
        "ragged",
        "queue_depth",
        "eager_shapes",
    }
    bad = sorted(set(params) - allowed)
    if bad:
        raise ProfileError(f"{path} [params]: unknown keys {bad}; allowed: {sorted(allowed)}")
    for value in matrix.allocation:
        if value not in ALLOCATIONS:
            raise ProfileError(f"{path} [matrix]: allocation {value!r} not in {ALLOCATIONS}")
    for value in matrix.graphs:
        if value not in GRAPHS:
            raise ProfileError(f"{path} [matrix]: graphs {value!r} not in {GRAPHS}")
    if any(not 1 <= n <= 64 for n in matrix.requests) or not matrix.requests:
        raise ProfileError(f"{path} [matrix]: requests must be 1..64")
    if any(q not in (0, 1, 2) for q in matrix.queue_depth) or not matrix.queue_depth:
        raise ProfileError(f"{path} [matrix]: queue_depth must be 0, 1 or 2")
    return Profile(name, str(data.get("description", "")), seeds, matrix, generator, params, path)


def _build(cls: Any, table: Any, where: str) -> Any:
    if not isinstance(table, dict):
        raise ProfileError(f"{where}: expected a table")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise ProfileError(f"{where}: unknown keys {unknown}; allowed: {sorted(fields)}")
    values: dict[str, Any] = {}
    defaults = cls()
    for key, value in table.items():
        default = getattr(defaults, key)
        if isinstance(default, tuple):
            if not isinstance(value, list):
                raise ProfileError(f"{where}: {key} must be a list")
            values[key] = tuple(value)
        elif isinstance(default, float) and isinstance(value, int | float):
            values[key] = float(value)
        elif type(default) is not type(value):
            raise ProfileError(f"{where}: {key} must be {type(default).__name__}, got {value!r}")
        else:
            values[key] = value
    return cls(**values)


_SEED_PART = re.compile(r"^\s*(\d+)\s*(?:(?:\.\.|-)\s*(\d+)\s*)?$")


def parse_seeds(text: str) -> tuple[int, ...]:
    """Seeds from "0..1055", "3,7,9", "0..9,20..29": ascending, without duplicates."""
    seeds: set[int] = set()
    for part in text.split(","):
        match = _SEED_PART.match(part)
        if not match:
            raise UsageError(
                f"bad seed set {text!r} at {part!r}: use N, A..B (inclusive) or a comma list"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise UsageError(f"bad seed range {part.strip()!r}: {high} < {low}")
        if high - low > 10_000_000:
            raise UsageError(f"seed range {part.strip()!r} is too large (over 10 million)")
        seeds.update(range(low, high + 1))
    return tuple(sorted(seeds))
