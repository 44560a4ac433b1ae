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
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracediff.errors import NESTING, ProfileError, ScenarioError, UsageError
from tracediff.models.specdec.scenario.fields import FieldError, fields_of
from tracediff.models.specdec.scenario.model import (
    ALLOCATIONS,
    MAX_REQUESTS,
    MAX_TOKENS,
    Scenario,
    SchedulerParams,
)
from tracediff.project.seeds import MAX_SEEDS
from tracediff.project.seeds import parse_seeds as parse_seeds  # also read from here
from tracediff.workload import WorkloadSet, over

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
    # Exact floats: the seeds (a seed-set string, "" for none) whose scenarios make float
    # comparisons meet with equality: every estimate exactly 1.0, an engine whose cost is
    # the prior's, and probe rate, credit cap and refresh tolerance exact binary fractions
    # (docs/scheduler.md, "Regimes"). A seed set, not a probability, so that adding the
    # regime to a profile leaves every existing seed's scenario as it was.
    exact_floats_seeds: str = ""
    exact_probe_rates: tuple[float, ...] = (0.0, 0.125, 0.25, 0.5)
    exact_credit_caps: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0)
    exact_tolerances: tuple[float, ...] = (0.0, 0.25, 0.5)


@dataclass(frozen=True)
class Profile:
    name: str
    description: str = ""
    seeds: tuple[int, ...] = ()
    matrix: Matrix = field(default_factory=Matrix)
    generator: Generator = field(default_factory=Generator)
    params: dict[str, Any] = field(default_factory=dict)  # SchedulerParams overrides
    path: str = ""
    # [workload]: requests from request traces' windows instead of the generator's
    workload: WorkloadSet | None = None

    def __hash__(self) -> int:
        return hash((self.name, self.path))


def profile_dirs() -> list[Path]:
    """Where profile names are looked up, in order: $TRACEDIFF_PROFILES, the project's
    configured ``profiles`` directory ([tool.tracediff]), then the built-in profiles. Never
    the current directory: a name means the same profile from any subdirectory."""
    from tracediff.project.config import load_config
    from tracediff.resources import builtin_dir

    dirs = []
    env = os.environ.get(PROFILE_DIR_ENV)
    if env:
        if not Path(env).is_dir():  # as for the configured directory: never passed over
            what = "is not a directory" if Path(env).exists() else "does not exist"
            raise UsageError(
                f"${PROFILE_DIR_ENV}={env[:200]!r} {what}; point it at a directory of "
                "profile .toml files, or unset it"
            )
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
    if not name.strip():
        choices = ", ".join(available_profiles()) or "none found"
        raise UsageError(f"the profile name is empty; choose one of: {choices} (or a .toml path)")
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
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: {exc}") from None
    except RecursionError:
        raise ProfileError(f"{path}: not a profile: {NESTING}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc}") from None
    return parse_profile(data, str(path), text)


# What each generator value may be, beyond its type (the dataclass annotations give those):
# an inclusive (low, high) range by key, None for no bound. Every ``p_*`` key is a
# probability; every pair (``tuple[X, X]``) is a [low, high] range with low <= high; every
# other number must be at least 0. A key added to Generator is checked by those rules alone.
GENERATOR_LIMITS: dict[str, tuple[float | None, float | None]] = {
    "max_new": (1, MAX_TOKENS),
    "prompt_len": (1, MAX_TOKENS),
    "accept_base": (0.0, 1.0),
    "accept_decay": (0.0, 1.0),
}
PROBABILITY_PREFIX = "p_"
# What each matrix list may hold: an inclusive range, or the allowed values.
MATRIX_LIMITS: dict[str, tuple[int, int] | tuple[str, ...]] = {
    "requests": (1, 64),
    "queue_depth": (0, 2),
    "allocation": ALLOCATIONS,
    "graphs": GRAPHS,
}
# [params] keys the matrix cell decides.
CELL_PARAMS = frozenset({"allocation", "ragged", "queue_depth", "eager_shapes"})
PROFILE_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,99}")


class _Where:
    """Names a key of a profile file in messages: ``file:line [table] key``, the line found
    by a scan of the text (tomllib keeps no positions), or just the file."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def __call__(self, table: str | None, key: str | None = None) -> str:
        line = self._line(table, key)
        at = f"{self.path}:{line}" if line else self.path
        return at + (f" [{table}]" if table else "") + (f" {key}" if key else "")

    def _line(self, table: str | None, key: str | None) -> int | None:
        current = None
        for number, raw in enumerate(self.lines, start=1):
            text = raw.strip()
            header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]", text)
            if header:
                current = header.group(1).strip("\"' ")
                if key is None and current == table:
                    return number
                continue
            if (
                key is not None
                and current == table
                and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", text)
            ):
                return number
        return None


def parse_profile(data: dict[str, Any], path: str = "<memory>", text: str = "") -> Profile:
    """A profile from parsed TOML; every value checked for type and range (ProfileError
    naming the file, line and key)."""
    where = _Where(path, text)
    known = {"name", "description", "seeds", "matrix", "generator", "params", "workload"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{path}: unknown keys {unknown}; allowed: {sorted(known)}")
    name = _profile_name(data, path, where)
    description = data.get("description", "")
    if not isinstance(description, str):
        raise ProfileError(f"{where(None, 'description')}: must be a string")
    seeds = _profile_seeds(data.get("seeds", 0), where)
    matrix = _build(Matrix, data.get("matrix", {}), "matrix", where)
    generator = _build(Generator, data.get("generator", {}), "generator", where)
    _check_matrix(matrix, where)
    _check_generator(generator, data.get("generator", {}), where)
    params = _check_params(data.get("params", {}), name, where)
    workloads = None
    if "workload" in data:
        from tracediff import workload

        spec = workload.parse_table(
            data["workload"],
            Path(path).parent,
            lambda key: where("workload", key),
            max_window=MAX_REQUESTS,
        )
        workloads = workload.load(spec)
    return Profile(name, description, seeds, matrix, generator, params, path, workloads)


def with_workload(profile: Profile, workloads: WorkloadSet) -> Profile:
    """``profile`` over ``workloads`` (``--workload FILE``): the same seeds, matrix cells and
    draws, the requests from the windows; named ``PROFILE+FILE-TAG`` (golden manifests, saved
    scenarios; WorkloadSet.profile_name)."""
    window = workloads.spec.window
    if window > MAX_REQUESTS:
        raise UsageError(
            f"--workload: windows of {window} requests; a specdec scenario holds at most "
            f"{MAX_REQUESTS}"
        )
    return over(profile, workloads)


def _profile_name(data: dict[str, Any], path: str, where: _Where) -> str:
    from tracediff.filenames import component

    if "name" not in data:
        # the file's stem, made a plain name: it names golden manifests and saved scenarios
        return component(Path(path).stem)
    name = data["name"]
    if not isinstance(name, str) or not PROFILE_NAME.fullmatch(name):
        raise ProfileError(
            f"{where(None, 'name')}: {name!r} is not a plain name (letters, digits and . _ + -, "
            "not starting with a dot, at most 100 characters): it names files such as golden "
            "manifests"
        )
    return name


def _profile_seeds(spec: Any, where: _Where) -> tuple[int, ...]:
    if type(spec) is int:
        if not 0 <= spec <= MAX_SEEDS:
            raise ProfileError(
                f"{where(None, 'seeds')}: {spec} must be a seed count from 0 to {MAX_SEEDS:,} "
                '(or a seed-set string such as "0..99")'
            )
        return tuple(range(spec))
    if isinstance(spec, str):
        try:
            return parse_seeds(spec)
        except UsageError as exc:
            raise ProfileError(f"{where(None, 'seeds')}: {exc}") from None
    raise ProfileError(
        f"{where(None, 'seeds')}: must be a seed count or a seed-set string such as "
        f'"0..99,120", got {type(spec).__name__} {spec!r:.40}'
    )


def _build(cls: Any, table: Any, name: str, where: _Where) -> Any:
    if not isinstance(table, dict):
        raise ProfileError(f"{where(name)}: must be a table ([{name}]), got {table!r:.40}")
    return cls(**_fields(cls, table, name, where))


def _fields(cls: Any, table: dict[str, Any], name: str, where: _Where) -> dict[str, Any]:
    """``table``'s values checked against ``cls``'s field types; ProfileError naming the key."""
    try:
        return fields_of(cls, table, name, partial=True)
    except FieldError as exc:
        message = str(exc)
        match = re.match(rf"{re.escape(name)}\.([A-Za-z0-9_]+)", message)
        key = match.group(1) if match else None
        text = message[len(name) + 1 :] if message.startswith(f"{name}.") else message
        if message.startswith(f"{name} has unknown keys"):
            key = next(
                (str(k) for k in table if k not in {f.name for f in dataclasses.fields(cls)}), None
            )
            text = message[len(name) + 5 :]
        raise ProfileError(f"{where(name, key)}: {text}") from None


def _check_matrix(matrix: Matrix, where: _Where) -> None:
    for key, limits in MATRIX_LIMITS.items():
        values = getattr(matrix, key)
        if not values:
            raise ProfileError(f"{where('matrix', key)}: must not be empty")
        for value in values:
            if isinstance(limits[0], int) and not isinstance(limits[0], bool):
                low, high = limits
                if not low <= value <= high:
                    raise ProfileError(
                        f"{where('matrix', key)}: {value!r} is outside {low}..{high}"
                    )
            elif value not in limits:
                raise ProfileError(f"{where('matrix', key)}: {value!r} is not one of {limits}")


def _check_generator(generator: Generator, given: dict[str, Any], where: _Where) -> None:
    hints = typing.get_type_hints(Generator)
    if generator.exact_floats_seeds:
        try:
            parse_seeds(generator.exact_floats_seeds)
        except UsageError as exc:
            raise ProfileError(f"{where('generator', 'exact_floats_seeds')}: {exc}") from None
    for key in ("exact_probe_rates", "exact_credit_caps", "exact_tolerances"):
        if key in given and not getattr(generator, key):
            raise ProfileError(f"{where('generator', key)}: must not be empty")
    for key in given:
        value = getattr(generator, key)
        hint = hints[key]
        pair = typing.get_origin(hint) is tuple and len(typing.get_args(hint)) == 2
        pair = pair and typing.get_args(hint)[1] is not Ellipsis
        numbers = value if pair else (value,)
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in numbers):
            continue
        low, high = GENERATOR_LIMITS.get(
            key, (0.0, 1.0) if key.startswith(PROBABILITY_PREFIX) else (0, None)
        )
        for number in numbers:
            if (low is not None and number < low) or (high is not None and number > high):
                if key.startswith(PROBABILITY_PREFIX) or key in ("accept_base", "accept_decay"):
                    bounds = f"from {low} to {high}"
                elif low is not None and number < low:
                    bounds = f"at least {low}"
                else:
                    bounds = f"at most {high:,}"
                raise ProfileError(f"{where('generator', key)}: {number!r} must be {bounds}")
        if pair and value[0] > value[1]:
            raise ProfileError(
                f"{where('generator', key)}: [{value[0]!r}, {value[1]!r}] is a range [low, high] "
                "with low above high"
            )


def _check_params(given: Any, name: str, where: _Where) -> dict[str, Any]:
    if not isinstance(given, dict):
        raise ProfileError(f"{where('params')}: must be a table ([params]), got {given!r:.40}")
    cell = sorted(set(given) & CELL_PARAMS)
    if cell:
        allowed = sorted({f.name for f in dataclasses.fields(SchedulerParams)} - CELL_PARAMS)
        raise ProfileError(
            f"{where('params', cell[0])}: the matrix cell sets {cell}; allowed: {allowed}"
        )
    checked = _fields(SchedulerParams, given, "params", where)
    negative = [k for k, v in checked.items() if isinstance(v, int | float) and v < 0]
    if negative:
        raise ProfileError(f"{where('params', negative[0])}: must not be negative")
    try:
        Scenario(name, 0, SchedulerParams(**checked)).validate()
    except ScenarioError as exc:
        problems = str(exc).split(" is invalid: ", 1)[-1]
        raise ProfileError(f"{where('params')}: {problems}") from None
    # lists as TOML gave them: generate() applies them over the defaults
    return {k: list(v) if isinstance(v, tuple) else v for k, v in checked.items()}
