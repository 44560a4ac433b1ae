"""The one place tracediff calls an implementation's code in its own process.

Every command that runs an implementation here (``replay``, ``bench``, ``record``, the
harness timing, the explanations) calls its constructor, ``arrive``, ``plan``, ``complete``
and ``state`` through :func:`call` or a :class:`Guarded` scheduler. Like pytest's
``CallInfo.from_call``, a call captures its result, the exception it raised and its time;
*every* ``BaseException`` from user code (``SystemExit``, a ``KeyboardInterrupt`` it raises
itself, ``BrokenPipeError``, ``FileNotFoundError``, even tracediff's own ``UsageError``)
becomes :class:`ImplementationFailed`: a finding (exit 1) in one line that names the
implementation, never the exit status, the file blame or the "interrupted" that the same
exception would mean coming from tracediff.

Only what tracediff itself raises into user code passes through: a time limit or a stop
signal (:class:`HarnessSignal`) and a real Ctrl-C or SIGTERM (:class:`Interrupted`, raised by
the handler :func:`real_interrupts` installs). A plain ``KeyboardInterrupt`` seen while that
handler is installed was raised by the implementation.

Text kept from an implementation (an exception's message, an ``exec:`` error reply) is cut
to :data:`TEXT_LIMIT` characters, as stderr is, so that a hostile 60 MB message costs
nothing: :func:`bounded`.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any, Generic, TypeVar

from tracediff.errors import TracediffError

T = TypeVar("T")

TEXT_LIMIT = 16 * 1024  # characters kept of any text an implementation hands us
LINE_LIMIT = 500  # characters of it in a one-line message

# how a message names the call that failed (a driver method is named "<method>()")
CONSTRUCT, PLAN, STATE = ("its constructor", "plan()", "state()")


class HarnessSignal(BaseException):
    """Raised *by tracediff* into running user code (a time limit, a worker's stop signal):
    never the implementation's failure, always passed through."""


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the command; ``signum`` says which. Raised only by
    tracediff's signal handlers, so it is told apart from a KeyboardInterrupt that an
    implementation raises itself."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def bounded(text: str, limit: int = TEXT_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit:,} more characters cut]"


def summary(exc: BaseException) -> str:
    """An implementation's exception as "Type: message", in one bounded line."""
    if isinstance(exc, SystemExit):
        return f"SystemExit: the implementation called sys.exit({bounded(repr(exc.code), 60)})"
    if isinstance(exc, KeyboardInterrupt):
        return "KeyboardInterrupt: raised by the implementation, not by Ctrl-C"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that raises is the implementation's too
        text = "(its message cannot be shown)"
    text = bounded(" ".join(text[: LINE_LIMIT * 4].split()), LINE_LIMIT)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe(exc: BaseException) -> str:
    """What an implementation did, in one bounded line: "raised Type: message"."""
    return f"raised {summary(exc)}"


class ImplementationFailed(TracediffError):
    """Implementation code raised in a command that runs it in this process: a finding
    (exit 1), whatever it raised. ``error`` is the original exception."""

    exit_code = 1

    def __init__(self, impl: str, when: str, error: BaseException, context: str = "") -> None:
        where = f" ({context})" if context else ""
        super().__init__(
            f"the implementation {impl} failed: {when} {describe(error)}{where}; fix the "
            "implementation"
        )
        self.impl = impl
        self.when = when
        self.error = error


# The interpreter's own sys.exit, as tracediff found it: every command ends through it (and
# click's main), so an implementation that replaces it (``sys.exit = ...`` when imported or
# constructed) would turn tracediff's exit into its own code, and a traceback.
_EXIT = sys.exit


class ExitPatched(TracediffError):
    """Implementation code replaced ``sys.exit``: a finding (exit 1) naming it; tracediff
    put the interpreter's back before raising this."""

    exit_code = 1


def keep_exit(impl: str, when: str) -> None:
    """Put the interpreter's ``sys.exit`` back if ``impl``'s code (``when``: "its import",
    "its constructor") replaced it, and raise :class:`ExitPatched` naming it."""
    if sys.exit is _EXIT:
        return
    sys.exit = _EXIT
    raise ExitPatched(
        f"the implementation {impl} replaced sys.exit in {when}; an implementation must not "
        "patch the interpreter's exit (tracediff restored it); fix the implementation"
    )


def passes_through(exc: BaseException) -> bool:
    """Whether ``exc`` is tracediff's own (a time limit, a stop signal, a real Ctrl-C), to be
    raised on rather than blamed on the implementation."""
    if isinstance(exc, HarnessSignal | Interrupted):
        return True
    # A plain KeyboardInterrupt comes from a real Ctrl-C only under Python's own handler.
    return isinstance(exc, KeyboardInterrupt) and _default_sigint()


def _default_sigint() -> bool:
    try:
        return signal.getsignal(signal.SIGINT) is signal.default_int_handler
    except ValueError:  # not the main interpreter
        return True


@dataclass(frozen=True)
class CallInfo(Generic[T]):
    """One call of implementation code: its result or the exception it raised, and how long
    it took (as pytest's ``CallInfo``)."""

    impl: str
    when: str
    result: T | None
    error: BaseException | None
    seconds: float

    @classmethod
    def from_call(cls, impl: str, when: str, func: Callable[[], T]) -> CallInfo[T]:
        start = time.perf_counter()
        try:
            result = func()
        except BaseException as exc:  # noqa: BLE001 - whatever user code raises is captured
            if passes_through(exc):
                raise
            return cls(impl, when, None, exc, time.perf_counter() - start)
        return cls(impl, when, result, None, time.perf_counter() - start)

    def get(self, context: str = "") -> T:
        """The result, or :class:`ImplementationFailed` for the exception."""
        if self.error is not None:
            raise ImplementationFailed(self.impl, self.when, self.error, context) from self.error
        return self.result  # type: ignore[return-value]


def call(impl: str, when: str, func: Callable[..., T], *args: Any) -> T:
    """``func(*args)``, user code of ``impl``: its result, or ImplementationFailed."""
    try:
        return func(*args)
    except BaseException as exc:  # noqa: BLE001 - whatever user code raises is the finding
        if passes_through(exc):
            raise
        raise ImplementationFailed(impl, when, exc) from exc


def construct(impl: str, factory: Callable[[Any], T], scenario: Any) -> T:
    """An implementation's scheduler for ``scenario``, through :func:`call`; one whose
    constructor replaced ``sys.exit`` is :class:`ExitPatched`."""
    try:
        return call(impl, CONSTRUCT, factory, scenario)
    finally:
        keep_exit(impl, CONSTRUCT)


class Guarded:
    """An implementation whose every method is called through :func:`call`: what it raises is
    :class:`ImplementationFailed`, told apart from tracediff's own errors around it (the
    trace file being written, the one being read). ``inner`` is the implementation's.

    Generic over the model's driver interface: a method is wrapped on first use and the
    wrapper kept on the instance, so later calls cost one closure call, as a hand-written
    forwarding method would."""

    def __init__(self, inner: Any, impl: str) -> None:
        self.inner = inner
        self.impl = impl

    @property
    def has_state(self) -> bool:
        return callable(getattr(self.inner, "state", None))

    def state(self) -> Any:
        return call(self.impl, STATE, self.inner.state)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("inner", "impl"):
            raise AttributeError(name)
        attribute = getattr(self.inner, name)
        if not callable(attribute):
            return attribute
        impl, when = self.impl, f"{name}()"

        def guarded(*args: Any) -> Any:
            try:
                return attribute(*args)
            except BaseException as exc:  # noqa: BLE001 - see call()
                if passes_through(exc):
                    raise
                raise ImplementationFailed(impl, when, exc) from exc

        self.__dict__[name] = guarded
        return guarded


@contextlib.contextmanager
def real_interrupts() -> Iterator[bool]:
    """While the block runs, a real SIGINT raises :class:`Interrupted` (not a plain
    KeyboardInterrupt), so that one an implementation raises is told apart. Main thread
    only, and only over Python's default handler (a caller's own handler stays); yields
    whether it installed its handler."""
    if threading.current_thread() is not threading.main_thread() or not _default_sigint():
        yield False
        return

    def interrupted(signum: int, _frame: FrameType | None) -> None:
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield True
    finally:
        signal.signal(signal.SIGINT, previous)
