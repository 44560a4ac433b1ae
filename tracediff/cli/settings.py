"""Settings every command resolves the same way: flag, then environment, then the project's
``[tool.tracediff]`` table (tracediff.config), then the built-in default.

A directory given on the command line (or in its environment variable) or configured in the
table, but missing, is an error (exit 2) wherever the command reads it; one it only writes
into is created when needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import click

from tracediff.config import Config, load_config
from tracediff.errors import UsageError
from tracediff.resources import builtin_dir

DEFAULT_IMPLS = ("reference", "optimized")
DEFAULT_PROFILE = "quick"
# Where commands that add to a corpus or write golden files write without any configuration.
WRITE_DEFAULTS = {"regressions": "scenarios/regressions", "golden": "golden"}


def project() -> Config:
    """The project configuration, loaded once per command."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return load_config()
    root = ctx.find_root()
    root.ensure_object(dict)
    config = root.obj.get("config")
    if config is None:
        config = load_config()
        root.obj["config"] = config
    assert isinstance(config, Config)
    return config


def impls(values: Sequence[str]) -> tuple[str, ...]:
    """``--impl`` values, else the configured ones, else reference and optimized."""
    return tuple(values) or project().impls or DEFAULT_IMPLS


def profile(value: str | None) -> str:
    if value is not None and not value.strip():
        raise UsageError(
            "--profile: the profile name is empty; name a profile (e.g. quick) or a .toml file"
        )
    return value or project().profile or DEFAULT_PROFILE


def timeout(value: float | None) -> float | None:
    return value if value is not None else project().timeout


def jobs(value: int | None) -> int | None:
    return value if value is not None else project().jobs


def read_dir(given: str | None, key: str, flag: str) -> Path | None:
    """A directory the command reads (``regressions`` or ``golden``): the flag's, the
    configured one, else the built-in one (None if there is none). Missing -> exit 2."""
    if given is not None:
        path = Path(given)
        if not path.is_dir():
            what = "is not a directory" if path.exists() else "does not exist"
            raise UsageError(f"{flag} {given} {what}; pass an existing directory")
        return path
    configured = project().existing_dir(key)
    if configured is not None:
        return configured
    return builtin_dir(key)


def write_dir(given: str | None, key: str) -> Path:
    """A directory the command writes into: the flag's, the configured one, else
    ``./scenarios/regressions`` or ``./golden`` (created when written)."""
    if given is not None:
        return Path(given)
    configured: Path | None = getattr(project(), key)
    return configured if configured is not None else Path(WRITE_DEFAULTS[key])


def artifacts(given: str | None, default: str | None = "artifacts") -> str | None:
    """Where findings are kept: the flag, $TRACEDIFF_ARTIFACTS, the configured directory,
    else ``default``."""
    import os

    if given is not None:
        return given
    env = os.environ.get("TRACEDIFF_ARTIFACTS")
    if env:
        return env
    configured = project().artifacts
    if configured is not None:
        return str(configured)
    return default
