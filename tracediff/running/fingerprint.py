"""Fingerprints of the code that produced a result, so stored results are never reused for
other code.

A ``--resume`` journal and a campaign store keep results across runs. A result means
something only for the code that produced it: reusing it after the implementation was
edited reports the old code's verdict (a fixed bug still "found", or worse, a new bug
hidden behind an old "identical"). So each stored run records, apart from names:

* each implementation's code: for ``package.module:attr`` the files of its top-level
  package (or the lone module file); for ``exec:COMMAND`` the command and the contents of
  its executable and of any argument that names a file (a script), and what its server's
  hello said of its environment (tracediff and package versions: an interpreter's venv
  differs in nothing else a file names) when this process has started it, as the check
  before every run does;
* tracediff's own code (its version and its files: the simulated engine and the driver
  decide as much as the implementation does);
* the options that change an outcome (passed in by the caller).

Hashing reads files only; nothing is imported or run here. A fingerprint is a mapping of
part name to sha256 so that a refusal can say *what* changed.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tracediff import __version__
from tracediff.project.impls import EXEC_PREFIX, ImplSpec

MAX_FILES = 20_000  # a package larger than this is hashed by its first files in name order
_SUFFIXES = (".py", ".pyi", ".so", ".pyd", ".json", ".toml")
_OWN = Path(__file__).resolve().parents[1]


def _hash_files(paths: Iterable[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            data = f"unreadable: {exc.strerror}".encode()
        name = os.fspath(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        digest.update(name.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(data).digest())
    return digest.hexdigest()


def _tree(directory: Path) -> list[Path]:
    files: list[Path] = []
    for current, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        files.extend(Path(current) / n for n in sorted(names) if n.endswith(_SUFFIXES))
        if len(files) >= MAX_FILES:
            break
    return sorted(files)[:MAX_FILES]


def module_code(module_name: str) -> str:
    """sha256 over the files of ``module_name``'s top-level package (or its lone file)."""
    top = module_name.split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return hashlib.sha256(f"unfindable module {top}".encode()).hexdigest()
    locations = list(spec.submodule_search_locations or ())
    if locations:
        files: list[Path] = []
        for location in sorted(locations):
            files.extend(_tree(Path(location)))
        root = Path(sorted(locations)[0]).parent
        return _hash_files(files, root)
    if spec.origin and os.path.isfile(spec.origin):
        origin = Path(spec.origin)
        return _hash_files([origin], origin.parent)
    return hashlib.sha256(f"built-in module {top}".encode()).hexdigest()


def exec_files(command: str) -> tuple[Path | None, list[Path]]:
    """The files an ``exec:`` command runs: its executable (None when not found) and the
    files its arguments name (a script), resolved."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return None, []
    if not argv:
        return None, []
    found = shutil.which(argv[0])
    program = Path(found).resolve() if found else None
    return program, [Path(a).resolve() for a in argv[1:] if os.path.isfile(a)]


def exec_code(command: str) -> str:
    """sha256 over an ``exec:`` command, its executable and the files its arguments name."""
    digest = hashlib.sha256(command.encode("utf-8", "surrogateescape"))
    program, scripts = exec_files(command)
    paths = ([program] if program is not None else []) + scripts
    if paths:
        digest.update(_hash_files(paths, Path("/")).encode())
    pipes = sys.modules.get("tracediff.process.pipes")  # not loaded: nothing was started
    served = pipes.served_environment(shlex.split(command)) if pipes is not None else None
    if served is not None:
        digest.update(repr(sorted(served.items())).encode())
    return digest.hexdigest()


def impl_code(spec: ImplSpec) -> str:
    if spec.target.startswith(EXEC_PREFIX):
        return exec_code(spec.target[len(EXEC_PREFIX) :])
    return module_code(spec.target.partition(":")[0])


@functools.cache
def tracediff_code() -> str:
    """sha256 of tracediff's version and its own files (computed once per process)."""
    return _hash_files(_tree(_OWN), _OWN.parent) + f"-{__version__}"


def fingerprint(specs: Sequence[ImplSpec], options: Mapping[str, Any]) -> dict[str, str]:
    """The parts a stored result depends on: ``impl NAME``, ``tracediff``, ``options``."""
    parts = {f"impl {spec.name}": impl_code(spec) for spec in specs}
    parts["tracediff"] = tracediff_code()
    canonical = repr(sorted((str(k), repr(v)) for k, v in options.items()))
    parts["options"] = hashlib.sha256(canonical.encode()).hexdigest()
    return parts


def changed(stored: Mapping[str, Any], current: Mapping[str, str]) -> list[str]:
    """What differs between two fingerprints, in words (empty: the same code)."""
    words = []
    keys = [k for k in sorted(set(stored) | set(current)) if stored.get(k) != current.get(k)]
    workloads = [k for k in keys if k.startswith("workload ")]
    for key in keys:
        if key.startswith("impl "):
            words.append(f"the code of {key[5:]}")
        elif key == "tracediff":
            words.append("tracediff itself")
        elif key.startswith("workload "):
            words.append(f"the content of the workload {key[9:]}")
        elif not workloads:  # a profile's options hold its workloads' hashes too
            words.append("the options that change an outcome")
    return words
