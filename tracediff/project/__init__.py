"""The project context: where a command runs, resolved once, read by every command.

A user's workflow crosses commands: ``shrink --save`` adds a repro that ``gate`` must
replay, ``golden update`` + ``accept`` write manifests that ``gate`` and ``golden check``
must read, ``run`` keeps findings where the configuration says. That only holds when every
command resolves the same settings the same way, so they are resolved here, in one place,
and the CLI, the pytest plugin and the API all take them from a :class:`Project`.

Resolution, for every setting: the command-line flag, then its environment variable where
it has one (``TRACEDIFF_REGRESSIONS``, ``TRACEDIFF_ARTIFACTS``), then the ``[tool.tracediff]``
table (:mod:`tracediff.project.config`), then the default. Defaults are relative to the project's
*root*: the directory of the configuring ``pyproject.toml``, else the current directory.

Project data (the regression corpus and the golden manifests) has one location, where it
is both written and read. A location that was named (flag, environment, configuration) but
does not exist is an error where it is read. Only when the default location holds nothing
does a reader fall back to tracediff's built-in data, and then it says so
(:attr:`DataSource.label`):

* the built-in regression corpus holds scenarios on which tracediff's own optimized
  scheduler once diverged; it is replayed only when every implementation compared is a
  built-in one, never for a user's implementation in place of the user's own corpus;
* the built-in golden manifests are the built-in reference's digests of the built-in
  profiles, so any implementation that claims to decide as the reference can be checked
  against them.

The configuration's directory is put on the import path (as pytest's ``pythonpath`` does),
so an implementation configured as ``mypkg.sched:Fast`` imports from any subdirectory.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tracediff import model as models
from tracediff.errors import ConfigError, UsageError
from tracediff.filenames import component
from tracediff.model import DecisionModel
from tracediff.project.config import Config, load_config
from tracediff.resources import holds_data

DEFAULT_PROFILE = "quick"
MODEL_ENV = "TRACEDIFF_MODEL"  # set by ``tracediff --model``, inherited by worker processes
# Where project data lives when nothing names it, relative to the project's root.
DEFAULT_DIRS = {
    "regressions": "scenarios/regressions",
    "golden": "golden",
    "artifacts": "artifacts",
}
ENVIRONMENT = {"regressions": "TRACEDIFF_REGRESSIONS", "artifacts": "TRACEDIFF_ARTIFACTS"}
FLAGS = {"regressions": "--regressions", "golden": "--golden-dir", "artifacts": "--artifacts"}
BUILTIN_PACKAGE = "tracediff."  # targets of the built-in implementations start so


@dataclass(frozen=True)
class Location:
    """Where one kind of project data lives, and who said so."""

    kind: str  # "regressions", "golden" or "artifacts"
    path: Path
    origin: str  # "--flag X", "$VAR", "pyproject.toml [tool.tracediff] key", or "default"

    @property
    def named(self) -> bool:
        """Named by the user (flag, environment, configuration), not a default."""
        return self.origin != "default"


@dataclass(frozen=True)
class DataSource:
    """What a reader reads: the project's directory, the built-in data, or nothing."""

    kind: str
    path: Path | None  # None: nothing to read
    builtin: bool
    label: str  # for summaries: which corpus or manifests were used, and why

    @property
    def present(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class Project:
    """Every setting a command takes from the project, resolved (immutable; :meth:`with_`
    makes a copy with a flag's value applied)."""

    config: Config
    root: Path
    model: str  # the decision model's registry name
    model_origin: str  # "--model", "$TRACEDIFF_MODEL", the configuration, or "default"
    impls: tuple[str, ...]  # the configured implementations, else the model's defaults
    impls_configured: bool
    profile: str
    timeout: float | None
    jobs: int | None
    regressions: Location
    golden: Location
    artifacts: Location

    # -- the model and its implementations -------------------------------------------------
    def decision_model(self) -> DecisionModel:
        """The model every scenario of this project is generated and driven by."""
        return models.get(self.model)

    @property
    def candidates(self) -> tuple[str, ...]:
        """The implementations under test: every configured one after the baseline (one
        alone is itself the candidate)."""
        return self.impls[1:] if len(self.impls) > 1 else self.impls

    @property
    def impls_origin(self) -> str:
        if self.impls_configured:
            return f"{self.config.where('impls')}"
        return "the default"

    # -- data ---------------------------------------------------------------------------------
    def with_(self, kind: str, given: str | os.PathLike[str] | None) -> Project:
        """A copy with ``kind``'s location taken from its command-line flag (None: as is)."""
        if given is None:
            return self
        location = Location(kind, Path(given), f"{FLAGS[kind]} {os.fspath(given)}")
        if kind == "regressions":
            return dataclasses.replace(self, regressions=location)
        if kind == "golden":
            return dataclasses.replace(self, golden=location)
        return dataclasses.replace(self, artifacts=location)

    def corpus(self, targets: tuple[str, ...] = ()) -> DataSource:
        """The regression corpus to replay for implementations with these targets."""
        location = self.regressions
        if _readable(location):
            return DataSource("regressions", location.path, False, _label(location, self.root))
        builtin = self.decision_model().data_dir("regressions")
        if builtin is not None and targets and all(_is_builtin(t) for t in targets):
            return DataSource(
                "regressions",
                builtin,
                True,
                f"the built-in corpus {builtin} (tracediff's own past findings; "
                f"{_shown(location.path, self.root)} has none)",
            )
        return DataSource(
            "regressions",
            None,
            False,
            f"none: {_shown(location.path, self.root)} does not exist "
            "(tracediff shrink --save and fuzz --save add to it)",
        )

    def golden_source(self) -> DataSource:
        """The golden manifests to check against."""
        location = self.golden
        if _readable(location):
            return DataSource("golden", location.path, False, _label(location, self.root))
        builtin = self.decision_model().data_dir("golden")
        if builtin is None:
            return DataSource(
                "golden",
                None,
                False,
                f"none: {_shown(location.path, self.root)} does not exist "
                "(tracediff golden update, then accept)",
            )
        return DataSource(
            "golden",
            builtin,
            True,
            f"the built-in manifests {builtin} (the reference's digests; "
            f"{_shown(location.path, self.root)} has none)",
        )

    def relative(self, path: str | os.PathLike[str]) -> str:
        """``path`` as a command run from the project's root names it."""
        return _shown(Path(path), self.root)


def in_ci() -> bool:
    """Whether CI=true (or 1/yes) is set: then nothing under golden/ or the corpus may be
    written in place; pending files go to the artifacts directory instead."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def artifacts_dir(explicit: str | None = None) -> Path:
    """Where CI output goes: ``explicit``, else $TRACEDIFF_ARTIFACTS, else ./artifacts."""
    return Path(explicit or os.environ.get(ENVIRONMENT["artifacts"]) or DEFAULT_DIRS["artifacts"])


def resolve(start: Path | None = None) -> Project:
    """The project in effect from ``start`` (default: the current directory)."""
    config = load_config(start)
    root = config.path.parent if config.path is not None else (start or Path.cwd()).resolve()
    if config.path is not None:
        _on_import_path(root)
    model, model_origin = _model_name(config)
    # The project's data is its own model's (the configured one, else the default); another
    # model chosen for a command keeps its corpus and manifests in a subdirectory named after
    # it, so two models' scenarios or digests never mix in one directory.
    guest = model if model != (config.model or models.DEFAULT_MODEL) else None
    return Project(
        config=config,
        root=root,
        model=model,
        model_origin=model_origin,
        # the configured implementations are the project's model's, not a guest model's
        impls=(None if guest else config.impls) or models.get(model).default_impls,
        impls_configured=bool(config.impls) and guest is None,
        profile=config.profile or DEFAULT_PROFILE,
        timeout=config.timeout,
        jobs=config.jobs,
        regressions=_locate("regressions", config, root, guest),
        golden=_locate("golden", config, root, guest),
        artifacts=_locate("artifacts", config, root),
    )


def _model_name(config: Config) -> tuple[str, str]:
    if os.environ.get(MODEL_ENV, "").strip():
        return os.environ[MODEL_ENV].strip(), f"${MODEL_ENV}"
    if config.model:
        return config.model, config.where("model")
    return models.DEFAULT_MODEL, "default"


def _configured_model_name() -> str | None:
    return load_config().model


models.set_configured_model(_configured_model_name)


def current_model() -> DecisionModel:
    """The model in effect here: ``--model`` / $TRACEDIFF_MODEL, else the configuration's,
    else the default; what a name like ``reference`` or ``quick`` is looked up in."""
    name, _origin = _model_name(load_config())
    return models.get(name)


def _locate(kind: str, config: Config, root: Path, guest: str | None = None) -> Location:
    env = ENVIRONMENT.get(kind)
    if env and os.environ.get(env):
        found = Location(kind, Path(os.environ[env]), f"${env}")
    else:
        configured: Path | None = getattr(config, kind)
        if configured is not None:
            found = Location(kind, configured, config.where(kind))
        else:
            found = Location(kind, root / DEFAULT_DIRS[kind], "default")
    if guest is None:
        return found
    # read like a default: a model with no data there yet has none, which is no error. The
    # name is an entry point's, which any installed distribution chooses: one plain component
    # of it, so that no name ("../x") reaches outside the directory
    return Location(kind, found.path / component(guest), "default")


def _readable(location: Location) -> bool:
    """Whether a reader uses this location; a named one that is missing is an error."""
    path = location.path
    if path.is_dir():
        return location.named or holds_data(path, location.kind)
    if location.named:
        what = "is not a directory" if path.exists() else "does not exist"
        message = f"{location.origin}: {path} {what}; create it or fix the setting"
        if location.origin.startswith("--"):
            raise UsageError(message)
        raise ConfigError(message)
    return False


def _label(location: Location, root: Path) -> str:
    where = _shown(location.path, root)
    return where if location.origin == "default" else f"{where} ({location.origin})"


def _shown(path: Path, root: Path) -> str:
    """Relative to the root when inside it (what a user types there), else as given."""
    try:
        return os.fspath(path.resolve().relative_to(root))
    except ValueError:
        return os.fspath(path)


def _is_builtin(target: str) -> bool:
    return target.startswith(BUILTIN_PACKAGE)


def _on_import_path(root: Path) -> None:
    # Appended, not prepended: a directory of the project never shadows an installed
    # package (the import system's usual order); workers inherit sys.path at start.
    text = os.fspath(root)
    if text not in sys.path:
        sys.path.append(text)
