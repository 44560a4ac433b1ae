"""Implementation specs: a built-in name, ``package.module:attr``, or an entry point.

An implementation is a factory ``(scenario) -> scheduler`` (usually the scheduler class
itself); the scheduler speaks the driver interface of docs/implementations.md. Names are
resolved lazily, so loading the CLI imports no implementation it does not run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tracediff.errors import ImplementationError
from tracediff.executor.call import ExitPatched, keep_exit
from tracediff.model import DecisionModel

ENTRY_POINT_GROUP = "tracediff.implementations"
# ``exec:COMMAND ARGS``: a process speaking the stdio protocol (tracediff.process).
EXEC_PREFIX = "exec:"


def builtins() -> Mapping[str, str]:
    """The current model's built-in implementations, by name (tracediff.model)."""
    return _model().builtin_impls


def checked() -> Mapping[str, str]:
    """``--check`` swaps each built-in for its check-mode twin where it has one."""
    return _model().checked_impls


def _model() -> DecisionModel:
    from tracediff.project import current_model

    return current_model()


_NAMED_EXEC = re.compile(r"^([A-Za-z_][\w.-]*)=(exec:.*)$", re.DOTALL)
# NAME@PYTHON: NAME served by another interpreter (a path, or a [tool.tracediff.envs] name)
_ELSEWHERE = re.compile(r"^([^@=\s]+)@(\S.*)$", re.DOTALL)
GIT_PREFIX = "git:"
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")

Factory = Callable[[Any], Any]


@dataclass(frozen=True)
class ImplSpec:
    """What the user typed and what it resolves to (a ``module:attr`` target)."""

    name: str
    target: str
    # what the user typed for a spec tracediff serves itself elsewhere (``NAME@PYTHON``,
    # ``git:REV:TARGET``; tracediff.project.elsewhere): its server must run this tracediff
    origin: str = ""

    @property
    def arg(self) -> str:
        """What to type after ``--impl`` to get this spec back (for repro lines)."""
        if self.origin:
            return self.origin
        if self.target.startswith(EXEC_PREFIX) and self.name != self.target:
            return f"{self.name}={self.target}"
        return self.name


def available() -> list[str]:
    names = set(builtins())
    try:
        names.update(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # noqa: BLE001 - broken metadata must not break name listing
        pass
    return sorted(names)


@dataclass(frozen=True)
class Listed:
    """One implementation ``tracediff impls`` lists: how to name it and what it is."""

    name: str
    kind: str  # "built-in", "entry point", "exec", "interpreter" or "revision"
    target: str
    note: str = ""


def listing() -> list[Listed]:
    """Every implementation tracediff can load by name, and how to name an external one.

    Entry points are listed with whether they import; nothing is run.
    """
    known = builtins()
    rows = [Listed(name, "built-in", target) for name, target in known.items()]
    try:
        points = sorted(
            importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name
        )
    except Exception:  # noqa: BLE001 - broken metadata must not break the listing
        points = []
    for ep in points:
        if known.get(ep.name) == ep.value or _builtin_of_another_model(ep.value, known):
            continue  # tracediff's own entry points, for tools that only read metadata
        note = ""
        if ep.name in known:
            note = "shadowed by the built-in of that name; use its target instead"
        else:
            try:
                load(ImplSpec(ep.name, ep.value))
            except ImplementationError as exc:
                note = f"cannot load: {exc}"
        rows.append(Listed(ep.name, "entry point", ep.value, note))
    rows.append(
        Listed(
            "exec:COMMAND ARGS",
            "exec",
            "any program speaking docs/protocol.md on stdin/stdout",
            "e.g. 'exec:tracediff serve NAME' serves a Python one; "
            "'NAME=exec:...' names it in reports",
        )
    )
    rows.append(
        Listed(
            "NAME@PYTHON",
            "interpreter",
            "NAME served by another Python (a path or a [tool.tracediff.envs] name)",
            "e.g. 'optimized@/path/to/venv/bin/python'",
        )
    )
    rows.append(
        Listed(
            "git:REV:TARGET",
            "revision",
            "TARGET as at revision REV of this repository",
            "e.g. 'git:HEAD~1:mypkg.sched:Fast'",
        )
    )
    return rows


def _builtin_of_another_model(target: str, known: Mapping[str, str]) -> bool:
    """A built-in model's implementation (``tracediff.models.NAME...``) while another model
    is in effect: not a candidate here, so not listed as one."""
    package = ".".join(target.partition(":")[0].split(".")[:3])
    ours = {".".join(t.partition(":")[0].split(".")[:3]) for t in known.values()}
    return package.startswith("tracediff.models.") and package not in ours


def parse_impl(text: str, *, check: bool = False) -> ImplSpec:
    """Turn a user's ``--impl`` value into a spec; raises ImplementationError if unknown."""
    name = text.strip()
    if name.startswith(EXEC_PREFIX):
        _check_reply_seconds()
        return ImplSpec(name, name)
    named = _NAMED_EXEC.match(name)
    if named:  # NAME=exec:COMMAND: a short name for reports and tables
        _check_reply_seconds()
        return ImplSpec(named.group(1), named.group(2))
    if name.startswith(GIT_PREFIX):
        from tracediff.project.elsewhere import git_target

        return ImplSpec(name, git_target(name, _model().name), origin=name)
    elsewhere = _ELSEWHERE.match(name)
    if elsewhere:
        from tracediff.project.elsewhere import interpreter_target

        impl, where = elsewhere.groups()
        target = interpreter_target(name, impl, where, _model().name)
        return ImplSpec(name, target, origin=name)
    known, twins = builtins(), checked()
    if check and name in twins:
        name = twins[name]
    if name in known:
        return ImplSpec(name, known[name])
    if _DOTTED.match(name):
        return ImplSpec(name, name)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ImplSpec(name, ep.value)
    raise ImplementationError(
        f"unknown implementation {text!r}; choose one of: {', '.join(available())}, "
        "give package.module:attr importable from PYTHONPATH or the current directory, "
        "'NAME@/path/to/python' for another interpreter, 'git:REV:TARGET' for another "
        "revision, or 'exec:COMMAND ARGS' for a process speaking docs/protocol.md"
    )


def _add_working_directory() -> None:
    """Make modules in the current directory importable, as ``python -m`` would.

    Appended, not prepended, so a local file never shadows an installed package.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


REPLY_ENV = "TRACEDIFF_EXEC_REPLY_S"  # how long an exec: process has for each reply
MAX_REPLY_S = 1e6  # poll() takes milliseconds as a C int


def _check_reply_seconds() -> None:
    """ImplementationError (exit 2) when ``$TRACEDIFF_EXEC_REPLY_S`` is set to anything but
    a number of seconds in ``(0, 1e6]``: nan, inf, 0 or a word would be no limit, or none."""
    text = os.environ.get(REPLY_ENV)
    if text is None:
        return
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= MAX_REPLY_S:
        raise ImplementationError(
            f"${REPLY_ENV}={text[:40]!r}: expected the seconds an exec: process has for each "
            f"reply, more than 0 and at most {MAX_REPLY_S:,.0f}; fix or unset it (default 60)"
        )


def _imported(spec: ImplSpec, module_name: str) -> Any:
    """The implementation's module, imported; ExitPatched (exit 1, naming it) when importing
    it replaced ``sys.exit`` (put back first: every command ends through it)."""
    try:
        return importlib.import_module(module_name)
    finally:
        keep_exit(spec.name, f"its import (module {module_name!r})")


def load(spec: ImplSpec) -> Factory:
    """Import the factory a spec names; raises ImplementationError with the reason."""
    if spec.target.startswith(EXEC_PREFIX):
        # a server tracediff starts itself must run this tracediff version
        options = {"strict": True} if spec.origin else {}
        external: Any = _model().exec_factory(spec.name, spec.target, **options)
        external.probe()
        factory: Factory = external
        return factory
    module_name, _, attr_path = spec.target.partition(":")
    _add_working_directory()
    try:
        obj: Any = _imported(spec, module_name)
    except SystemExit as exc:  # a module that exits on import must not end tracediff
        raise ImplementationError(
            f"implementation {spec.name!r}: importing module {module_name!r} called "
            f"sys.exit({exc.code!r}); a module must not exit when it is imported"
        ) from None
    except ExitPatched:
        raise  # a finding of the implementation's, said as such
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to fix
        raise ImplementationError(
            f"implementation {spec.name!r}: cannot import module {module_name!r}: "
            f"{type(exc).__name__}: {exc} (is it on PYTHONPATH?)"
        ) from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ImplementationError(
                f"implementation {spec.name!r}: module {module_name!r} has no attribute "
                f"{attr_path!r}"
            ) from None
    # the model may wrap what was named (vllm: a subclass of vLLM's Scheduler becomes a
    # factory of its adapter); optional, docs/models.md "Driving an implementation"
    adapt = getattr(_model(), "adapt_impl", None)
    if adapt is not None:
        obj = adapt(obj, spec.name)
        keep_exit(spec.name, "its adapter")
    if not callable(obj):
        raise ImplementationError(
            f"implementation {spec.name!r}: {spec.target} is not callable; it must be a "
            "scheduler class or a factory taking a Scenario"
        )
    return obj  # type: ignore[no-any-return]
