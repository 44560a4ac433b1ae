"""Loading a profile by name, for every command: the model's own profile, and the workload
that ``--workload FILE`` put over it.

The project's profile files reach every model: a model that reads them (its optional
``profile_from_toml(data, path)``) gets ``NAME.toml`` from ``$TRACEDIFF_PROFILES``, then
from the configured ``[tool.tracediff] profiles`` directory, before its built-in profiles;
a ``.toml`` path is read as given. The project's own model (the configured one, else the
default) finds its files in those directories, another model chosen for one command in their
subdirectory named after it, as its corpus and golden digests are kept.

A command names its profile by a string (it travels to worker processes, names golden
manifests, is written in journals). ``--workload FILE`` makes that string
``PROFILE@/abs/FILE`` (:func:`tracediff.workload.compose`); this is the one place it is
taken apart: the model loads ``PROFILE`` and puts the workload over it
(``DecisionModel.with_workload``), so every command takes a workload without knowing it.
"""

from __future__ import annotations

import os
import shlex
import tomllib
from pathlib import Path
from typing import Any

from tracediff import workload
from tracediff.errors import ProfileError
from tracediff.model import DEFAULT_MODEL, DecisionModel, claim

PROFILES_ENV = "TRACEDIFF_PROFILES"
MAX_PROFILE_BYTES = 1 << 20  # a profile is a few lines; a larger file is not one


def load_profile(model: DecisionModel, name: str) -> Any:
    """The profile ``name`` of ``model``, with its ``--workload`` file when it names one;
    claimed as ``model``'s (:func:`tracediff.model.claim`), wherever its class is defined."""
    base, path = workload.split(name)
    profile = claim(model, _model_profile(model, base))
    if path is None:
        return profile
    return claim(model, model.with_workload(profile, workload.load(workload.for_file(path))))


def profile_options(name: str) -> str:
    """The command-line options that name profile ``name`` again (for the commands a
    message tells the user to run): ``--profile P``, and ``--workload FILE`` with it when
    ``name`` carries one."""
    base, path = workload.split(name)
    options = f"--profile {shlex.quote(base)}"
    return options if path is None else f"{options} --workload {shlex.quote(path)}"


def _model_profile(model: DecisionModel, name: str) -> Any:
    reader = getattr(model, "profile_from_toml", None)
    if callable(reader):
        found = profile_file(model, name)
        if found is not None:
            return reader(_read_toml(found), str(found))
    return model.load_profile(name)


def profile_dirs(model: DecisionModel) -> list[Path]:
    """The directories ``model``'s profile files are looked up in, in order (existing ones)."""
    from tracediff.project.config import load_config

    config = load_config()
    guest = model.name != (config.model or DEFAULT_MODEL)
    found: list[Path] = []
    env = os.environ.get(PROFILES_ENV, "").strip()
    configured = config.existing_dir("profiles")
    for directory in (Path(env) if env else None, configured):
        if directory is None:
            continue
        directory = directory / model.name if guest else directory
        if directory.is_dir():
            found.append(directory)
    return found


def profile_file(model: DecisionModel, name: str) -> Path | None:
    """The profile file ``name`` names for ``model``: a ``.toml`` path as given, else
    ``NAME.toml`` in :func:`profile_dirs`; None when it names none (a built-in profile)."""
    if name.endswith(".toml") or os.sep in name:
        path = Path(name)
        if not path.is_file():
            raise ProfileError(f"profile file {name} does not exist (or is not a file)")
        return path
    for directory in profile_dirs(model):
        candidate = directory / f"{name}.toml"
        if candidate.is_file():
            return candidate
    return None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as stream:
            raw = stream.read(MAX_PROFILE_BYTES + 1)
        if len(raw) > MAX_PROFILE_BYTES:
            raise ProfileError(f"{path}: over {MAX_PROFILE_BYTES:,} bytes: not a profile")
        return tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ProfileError(f"{path}: nested too deeply to be a profile") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read the profile: {exc}") from None
