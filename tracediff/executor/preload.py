"""What a worker imports before its first task, imported once by the local executor's fork
server (and so inherited by every worker it forks).

The modules come from the loaded models (their entry modules, and the ``worker_modules``
the model in effect names: tracediff.model.worker_modules), written by the parent into
:data:`ENV` before the server starts, each with the model that named it. CPython's fork
server imports its preload list itself, passing over an ``ImportError`` and dying, with a
traceback on tracediff's standard error, on anything else: a model whose worker module
raised on import made every worker start fail ("cannot start a worker process ...; check
ulimit", exit 3). Here every import is tried and the first failure, whatever it raised
(``SystemExit`` and ``KeyboardInterrupt`` included), is kept as the model's fault
(:data:`PROBLEM`): each worker answers its first task with it, and the command ends with
exit 2 naming the model, ``worker_modules``, the module and the file and line.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback

from tracediff.blame import ModelFault

ENV = "TRACEDIFF_WORKER_MODULES"  # JSON: [[module, model], ...]

PROBLEM = ""  # the first failure, as the one line a command prints (empty: all imported)


def encode(modules: dict[str, str]) -> str:
    """The value of :data:`ENV` for these modules (module -> the model that names it)."""
    return json.dumps([[module, model] for module, model in modules.items()])


def _where(exc: BaseException) -> str:
    """The innermost frame of the failed import outside the import machinery, else the
    attribute that named the module."""
    machinery = (os.path.dirname(importlib.__file__), __file__)
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<") and not f.filename.startswith(machinery)
    ]
    if frames:
        return f"{frames[-1].filename}:{frames[-1].lineno}"
    return "named in its worker_modules"


def problem_of(module: str, model: str, exc: BaseException) -> str:
    """The one line for a worker module that failed to import."""
    error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    fault = ModelFault(
        model=model,
        member="worker_modules",
        where=_where(exc),
        error=f"cannot import {module!r}: {error}",
        raised=False,
    )
    return fault.message()


def load(value: str) -> str:
    """Import every module :data:`ENV`'s ``value`` names; the first failure's line, or ''."""
    try:
        pairs = json.loads(value) if value else []
    except ValueError:
        return ""  # not ours to judge: written by this package's parent only
    for module, model in pairs:
        try:
            importlib.import_module(module)
        except BaseException as exc:  # noqa: BLE001 - every failure is the model's
            return problem_of(module, model, exc)
    return ""


PROBLEM = load(os.environ.get(ENV, ""))
