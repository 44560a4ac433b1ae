"""The CLI's view of the project context (tracediff.project), resolved once per command.

Every command takes its implementations, profile, limits, regression corpus, golden
directory and artifacts directory from here, so what one command writes is what the others
read: flag, then environment, then the project's ``[tool.tracediff]`` table, then the
default under the project's root.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import overload

import click

from tracediff.errors import UsageError
from tracediff.project import DEFAULT_PROFILE, DataSource, Location, Project, resolve

WORKLOAD_META = "tracediff.workload"  # set by --workload (tracediff.cli.params)

# A command that compares passes this as its default: it takes the project's implementations
# (the configured ones, else the model's defaults); only its length is read.
DEFAULT_IMPLS = ("<baseline>", "<candidate>")

__all__ = ["DEFAULT_IMPLS", "DEFAULT_PROFILE", "project"]


def project() -> Project:
    """The project context, resolved once per command invocation."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return resolve()
    root = ctx.find_root()
    root.ensure_object(dict)
    found = root.obj.get("project")
    if found is None:
        found = resolve()
        root.obj["project"] = found
    assert isinstance(found, Project)
    return found


def impls(values: Sequence[str]) -> tuple[str, ...]:
    """``--impl`` values, else the configured ones, else reference and optimized."""
    return tuple(values) or project().impls


def candidates(values: Sequence[str]) -> tuple[tuple[str, ...], str]:
    """What a one-implementation command (golden check/update) runs, and why: the given
    ``--impl``, else the configured candidates (never the baseline), else the reference."""
    if values:
        return tuple(values), "--impl"
    current = project()
    if current.impls_configured:
        return current.candidates, f"the configured candidate ({current.impls_origin})"
    return ("reference",), "the default"


def workload() -> str | None:
    """The file ``--workload`` named, if it did."""
    ctx = click.get_current_context(silent=True)
    given = ctx.meta.get(WORKLOAD_META) if ctx is not None else None
    return None if given is None else str(given)


def profile(value: str | None) -> str:
    """The profile a command runs: ``--profile``, else the configured one, else quick; with
    ``--workload FILE``, that profile over FILE's windows (tracediff.workload.compose)."""
    if value is not None and not value.strip():
        raise UsageError(
            "--profile: the profile name is empty; name a profile (e.g. quick) or a .toml file"
        )
    name = value or project().profile or DEFAULT_PROFILE
    given = workload()
    from tracediff.workload import compose, split

    if given is None or split(name)[1] is not None:  # resolved once already
        return name
    return compose(name, given)


def timeout(value: float | None) -> float | None:
    return value if value is not None else project().timeout


def jobs(value: int | None) -> int | None:
    return value if value is not None else project().jobs


def corpus(given: str | None, targets: Sequence[str]) -> DataSource:
    """The regression corpus to replay (``--regressions`` or the project's)."""
    return project().with_("regressions", given).corpus(tuple(targets))


def golden_source(given: str | None) -> DataSource:
    """The golden manifests to check against (``--golden-dir`` or the project's)."""
    return project().with_("golden", given).golden_source()


def write_dir(given: str | None, kind: str) -> Path:
    """Where a command writes ``kind`` ("regressions" or "golden"): the same place every
    reader reads it from."""
    location: Location = getattr(project().with_(kind, given), kind)
    return location.path


@overload
def artifacts(given: str | None) -> str: ...


@overload
def artifacts(given: str | None, default: None) -> str | None: ...


def artifacts(given: str | None, default: str | None = "root") -> str | None:
    """Where findings are kept: the flag, $TRACEDIFF_ARTIFACTS, the configured directory,
    else ``artifacts`` under the project's root (with ``default=None``: None, for commands
    that keep files only when asked)."""
    location = project().with_("artifacts", given).artifacts
    if default is None and not location.named:
        return None
    return str(location.path)
