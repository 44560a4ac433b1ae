"""Implementations served from elsewhere: another interpreter, another revision.

``--impl 'NAME@PYTHON'`` runs the implementation NAME in the interpreter PYTHON (a path,
or a name of the project's ``[tool.tracediff.envs]`` table), served there by
``PYTHON -m tracediff serve --model M NAME``; ``--impl 'git:REV:TARGET'`` runs TARGET as it
is at revision REV of the repository the command runs in, served by this interpreter with
that revision's files first on the import path. Each becomes an ``exec:`` command (what a
worker starts, what a fingerprint hashes) that tracediff started itself, so its server must
run this tracediff version: a mismatch is refused before a run starts (exit 2), naming
both versions.

A revision is extracted once (``git archive``, so neither the working tree nor the
repository's worktree list changes) into ``.tracediff/cache/git/<sha>`` beside the
project's ``pyproject.toml`` (or at the repository's top), whose ``.tracediff/.gitignore``
keeps it out of ``git status``; ``[tool.tracediff] git_build`` runs there once after.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

from tracediff.errors import ImplementationError

EXEC_PREFIX = "exec:"
GIT_PREFIX = "git:"
CACHE = Path(".tracediff") / "cache" / "git"
_DONE = ".tracediff-complete"  # written last: a revision without it is extracted again


def _serve_argv(python: str, model: str, impl: str) -> list[str]:
    return [python, "-m", "tracediff", "serve", "--model", model, impl]


def interpreter_target(text: str, impl: str, where: str, model: str) -> str:
    """The ``exec:`` target of ``IMPL@WHERE`` (``text``): WHERE is a python path (with a
    ``/``) or a name in ``[tool.tracediff.envs]``."""
    from tracediff.project.config import load_config

    if os.sep in where or where.startswith((".", "~")):
        python = Path(where).expanduser()
        origin = "the path"
    else:
        config = load_config()
        envs = dict(config.envs)
        if where not in envs:
            known = ", ".join(sorted(envs)) or "none configured"
            raise ImplementationError(
                f"implementation {text!r}: no interpreter named {where!r} ({known}); give a "
                f"python path (NAME@/path/to/venv/bin/python) or add {where} = "
                '"path/to/bin/python" to [tool.tracediff.envs]'
            )
        python, origin = envs[where], config.where(f"envs.{where}")
    if not python.is_absolute():
        python = Path.cwd() / python  # workers and servers may run elsewhere
    if not (python.is_file() and os.access(python, os.X_OK)):
        raise ImplementationError(
            f"implementation {text!r}: {python} ({origin}) is not an executable python; "
            "give the interpreter of the environment, e.g. /path/to/venv/bin/python"
        )
    return EXEC_PREFIX + shlex.join(_serve_argv(os.fspath(python), model, impl))


def _git(args: list[str], cwd: Path, what: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ImplementationError(f"{what}: cannot run git: {exc}") from None
    if done.returncode != 0:
        reason = done.stderr.strip() or "no such revision (git log names them)"
        raise ImplementationError(f"{what}: git {' '.join(args)}: {reason}")
    return done.stdout.strip()


def git_target(text: str, model: str) -> str:
    """The ``exec:`` target of ``git:REV:TARGET`` (``text``), its revision extracted (and
    built) into the cache first."""
    rest = text[len(GIT_PREFIX) :]
    rev, _, target = rest.partition(":")
    if not rev or not target:
        raise ImplementationError(
            f"implementation {text!r}: expected git:REV:TARGET, e.g. 'git:HEAD~1:mypkg.sched:Fast'"
            " or 'git:v1.2:optimized'"
        )
    from tracediff.project.config import load_config

    what = f"implementation {text!r}"
    top = Path(_git(["rev-parse", "--show-toplevel"], Path.cwd(), what))
    sha = _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], top, what)
    config = load_config()
    root = config.path.parent if config.path is not None else top
    where = _extracted(root, top, sha, config.git_build, what)
    path = [os.fspath(where), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    argv = [
        "env",
        # not the current directory first, as ``python -m`` puts it (3.11+): the working
        # tree's module would shadow the revision's
        "PYTHONSAFEPATH=1",
        f"PYTHONPATH={os.pathsep.join(path)}",
        *_serve_argv(os.fspath(_python()), model, target),
    ]
    return EXEC_PREFIX + shlex.join(argv)


def _python() -> Path:
    import sys

    return Path(sys.executable)


def _extracted(root: Path, top: Path, sha: str, build: str | None, what: str) -> Path:
    """The directory holding revision ``sha`` (built), extracting it on first use."""
    cache = root / CACHE
    where = cache / sha
    if (where / _DONE).is_file():
        return where
    cache.mkdir(parents=True, exist_ok=True)
    ignore = root / ".tracediff" / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# tracediff's cache: never committed\n*\n", encoding="utf-8")
    # extracted beside, then renamed: a revision is whole or absent, never half there
    work = Path(tempfile.mkdtemp(prefix=f"{sha[:12]}.", dir=cache))
    try:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", sha],
            cwd=top,
            capture_output=True,
            check=False,
            timeout=300,
        )
        if archive.returncode != 0:
            raise ImplementationError(
                f"{what}: git archive {sha}: {archive.stderr.decode(errors='replace').strip()}"
            )
        untar = subprocess.run(
            ["tar", "-x", "-C", os.fspath(work)],
            input=archive.stdout,
            capture_output=True,
            check=False,
            timeout=300,
        )
        if untar.returncode != 0:
            raise ImplementationError(f"{what}: cannot extract revision {sha}")
        if build:
            done = subprocess.run(
                build,
                shell=True,
                cwd=work,
                capture_output=True,
                text=True,
                check=False,
                timeout=3600,
            )
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip()[-2000:]
                raise ImplementationError(
                    f"{what}: git_build {build!r} failed in revision {sha[:12]} (status "
                    f"{done.returncode}); fix the build or [tool.tracediff] git_build:\n{tail}"
                )
        (work / _DONE).write_text(sha + "\n", encoding="utf-8")
        if where.exists():
            shutil.rmtree(where)  # an extraction that never completed
        work.rename(where)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return where
