"""Who failed: the one rule that tells a model's own code from tracediff's.

An exception that reaches the command line without being a finding or a
:class:`~tracediff.errors.TracediffError` is either tracediff's bug (exit 3) or a bug in a
model's code: its profile loading, generator, driver, shrink passes, coverage, scenario
conversion, or an import that fails or exits. Telling them apart is read from the
traceback, the way pytest tells a test's frames from its own: the frames of a registered
model's package (a user's model wherever it is installed, the built-in models under
``tracediff/models/``) are the model's; the innermost such frame says where it failed (file
and line), the outermost says which of its members tracediff called. A ``SystemExit`` or a
``KeyboardInterrupt`` raised in a model's frames is its failure too, never an exit status or
an interruption of tracediff's.

Implementations are called through :mod:`tracediff.executor.call` and blamed there; what
reaches this module from a model's package is the model's to fix.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent  # tracediff itself
BUILTIN_MODELS = PACKAGE / "models"


@dataclass(frozen=True)
class ModelFault:
    """A model's own code failed: which model, the member tracediff called, and where."""

    model: str
    member: str
    where: str  # "file:line" of the innermost frame of the model's code
    error: str  # "ExcType: message"
    raised: bool = True  # False: it handed over something wrong, and has no traceback

    def message(self) -> str:
        hint = " (rerun with --debug for the traceback)" if self.raised else ""
        return (
            f"the model {self.model!r} failed in {self.member}: {self.error} ({self.where}); "
            f"fix the model's code{hint}"
        )


@functools.cache
def _model_roots() -> tuple[tuple[str, str], ...]:
    """(directory or file, model name) of every registered model, most specific first."""
    from tracediff.model import targets

    roots: list[tuple[str, str]] = []
    for name, target in targets().items():
        module = target.partition(":")[0]
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):  # its parent package fails: blamed where it fails
            spec = None
        origin = spec.origin if spec is not None else None
        if not origin:
            continue
        path = Path(origin).resolve()
        # a package's models live in its directory; a one-module model in its file
        is_package = path.name == "__init__.py"
        top = path.parent if is_package or "." in module else path
        if top == PACKAGE or top == BUILTIN_MODELS:
            top = path  # a model module directly in tracediff's own package: only that file
        roots.append((str(top), name))
    roots.sort(key=lambda item: len(item[0]), reverse=True)
    return tuple(roots)


def _owner(filename: str) -> str | None:
    try:
        path = os.path.realpath(filename)
    except (OSError, ValueError):
        return None
    for root, name in _model_roots():
        if path == root or path.startswith(root + os.sep):
            return name
    return None


def model_fault(exc: BaseException) -> ModelFault | None:
    """The model whose code raised ``exc``, or None when the innermost frame that is neither
    the standard library's nor a third-party library's is tracediff's own (its bug).

    The member is the outermost frame of that model's code in the traceback (what tracediff
    called: ``load_profile``, ``generate``, ``drive``, a module import); the place is its
    innermost frame."""
    frames = traceback.extract_tb(exc.__traceback__)
    owned = [(frame, _owner(frame.filename)) for frame in frames]
    modeled = [(frame, owner) for frame, owner in owned if owner is not None]
    if not modeled:
        return None
    innermost_frame, owner = modeled[-1]
    # the frames after the model's innermost one are libraries it called, or tracediff's
    # (a model calling back into the core that then fails is tracediff's to fix)
    after = frames[frames.index(innermost_frame) + 1 :]
    if any(_is_tracediff(frame.filename) for frame in after):
        return None
    outermost = next(frame for frame, named in modeled if named == owner)
    # two models in one module: the model object whose method was called names it
    model = _called_model(exc, frames.index(outermost)) or owner
    member = "its import" if outermost.name == "<module>" else f"{outermost.name}"
    where = f"{Path(innermost_frame.filename).name}:{innermost_frame.lineno}"
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(exc, SystemExit):
        error = f"SystemExit({exc.code!r:.60}) (a model must not exit the process)"
    return ModelFault(model, member, where, error)


def _called_model(exc: BaseException, position: int) -> str | None:
    """The registered name of the model object whose method is the traceback's frame at
    ``position`` (its ``self``), if it is one."""
    from tracediff.model import targets

    tb = exc.__traceback__
    for _ in range(position):
        tb = tb.tb_next if tb is not None else None
    owner = tb.tb_frame.f_locals.get("self") if tb is not None else None
    name = getattr(owner, "name", None)
    if isinstance(name, str) and name in targets() and callable(getattr(owner, "drive", None)):
        return name
    return None


def _is_tracediff(filename: str) -> bool:
    try:
        path = Path(os.path.realpath(filename))
    except (OSError, ValueError):
        return False
    return path.is_relative_to(PACKAGE) and not path.is_relative_to(BUILTIN_MODELS)


def yielded_fault(model: str, generator: Any, error: str) -> ModelFault:
    """A model's driver (``generator``, suspended where it yielded) handed over something
    wrong without raising: the model, the member tracediff called (the outermost of the
    model's generators, usually ``drive``) and the file and line of the innermost one's
    ``yield``. The generators are followed through ``yield from``; where none is a model's
    (a driver written outside any registered model's package), the innermost one is named."""
    frames = []
    seen = 0
    while generator is not None and seen < 64:  # bounded: a chain of yield from is short
        frame = getattr(generator, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        generator = getattr(generator, "gi_yieldfrom", None)
        seen += 1
    owned = [frame for frame in frames if _owner(frame.f_code.co_filename) is not None]
    chosen = owned or frames
    if not chosen:
        return ModelFault(model, "drive", "unknown place", error, raised=False)
    inner, outer = chosen[-1], chosen[0]
    where = f"{Path(inner.f_code.co_filename).name}:{inner.f_lineno}"
    return ModelFault(model, outer.f_code.co_name, where, error, raised=False)
