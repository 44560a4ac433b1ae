"""The one in-worker time limit: ``SIGALRM`` raises :class:`ScenarioTimeout` in the task.

It interrupts Python code and blocking calls that return on a signal (``time.sleep``, lock
waits); not C code that holds on without returning, which the executor's parent-side
watchdog covers by killing the worker. The limit is disarmed before the block is left, so a
signal arriving late is ignored rather than raised outside the block. Outside the main
thread (signals reach only it) the block runs without a limit; the watchdog still applies.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from tracediff.executor.call import HarnessSignal


class ScenarioTimeout(HarnessSignal):
    """The time limit expired. Not an ``Exception``, so that an implementation's own
    ``except Exception`` cannot swallow it; a :class:`HarnessSignal`, never its failure."""


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`ScenarioTimeout` inside the block once ``seconds`` have passed."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not seconds or not usable:
        yield
        return
    armed = True

    def expired(_signum: int, _frame: FrameType | None) -> None:
        nonlocal armed
        if armed:
            armed = False
            raise ScenarioTimeout()

    previous: Any = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous if previous is not None else signal.SIG_DFL)


def grace(timeout_s: float) -> float:
    """How long past the limit the in-worker alarm gets before the parent kills the worker:
    a quarter of the limit, at least 1 s and at most 30 s."""
    return min(30.0, max(1.0, timeout_s / 4))
