"""Implementations aimed at tracediff's own plumbing (issue "Reliability holes"), each hostile
on one scenario (seed ``HOSTILE_SEED`` of tests/impls/hostile.py, plan ``HOSTILE_AT``) and the
reference on every other. tests/test_reliability_holes.py runs them.

=======================  ===========================================================
class                    what it does
=======================  ===========================================================
KillParentScheduler      SIGKILLs its worker's parent (the fork server) when that is
                         not tracediff itself (in-process it raises instead)
BrokenPipeScheduler      raises ``BrokenPipeError`` from ``plan()``
EOFScheduler             raises ``EOFError`` from ``plan()``
ConnectionScheduler      raises ``ConnectionRefusedError`` from ``plan()``
ForgeScheduler           writes a forged "fatal" message to every inherited descriptor
                         that is a socket (the worker's channel to its parent)
HugeMessageScheduler     raises with a 20 MB message
=======================  ===========================================================

The constructor and ``plan()`` variants for in-process commands take the misbehaviour from
:data:`RAISERS` by name (``Raise<Name>`` in ``__init__``, ``Plan<Name>`` in ``plan``).
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import sys
from typing import Any

from tests.impls.hostile import HOSTILE_AT, HOSTILE_SEED, _HostileOnOneSeed
from tracediff.errors import UsageError
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler

HUGE_MESSAGE = 20 * 1024 * 1024


def _parent_is_tracediff() -> bool:
    # The fork server's command line names multiprocessing's forkserver; tracediff's does not.
    try:
        with open(f"/proc/{os.getppid()}/cmdline", "rb") as handle:
            return b"forkserver" not in handle.read()
    except OSError:
        return True


class KillParentScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        if _parent_is_tracediff():
            raise RuntimeError("not in a worker: refusing to kill tracediff itself")
        os.kill(os.getppid(), signal.SIGKILL)
        signal.pause()  # the kernel kills this worker with its parent (PR_SET_PDEATHSIG)
        return record


class BrokenPipeScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        raise BrokenPipeError(32, "Broken pipe (raised by the implementation)")


class EOFScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        raise EOFError("raised by the implementation")


class ConnectionScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        raise ConnectionRefusedError(111, "Connection refused (raised by the implementation)")


FORGED = "forged by the implementation"


class ForgeScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        from multiprocessing.connection import Connection

        for fd in range(3, 256):
            try:
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    continue
                sock = socket.socket(fileno=os.dup(fd))
            except OSError:
                continue
            try:
                conn = Connection(sock.detach())
                conn.send(("fatal", FORGED))
                conn.send(("done", 0, None, ()))
            except OSError:
                pass
        return record


class HugeMessageScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        raise RuntimeError("x" * HUGE_MESSAGE)


def _raiser(name: str) -> BaseException:
    return {
        "SystemExit0": SystemExit(0),
        "SystemExit3": SystemExit(3),
        "KeyboardInterrupt": KeyboardInterrupt(),
        "BrokenPipe": BrokenPipeError(32, "Broken pipe (raised by the implementation)"),
        "FileNotFound": FileNotFoundError(2, "No such file (raised by the implementation)", "x"),
        "UsageError": UsageError("a UsageError raised by the implementation"),
    }[name]


RAISERS = ("SystemExit0", "SystemExit3", "KeyboardInterrupt", "BrokenPipe", "FileNotFound",
           "UsageError")  # fmt: skip


def _constructor(name: str) -> type:
    def __init__(self: Any, scenario: Scenario) -> None:
        raise _raiser(name)

    return type(f"Raise{name}", (ReferenceScheduler,), {"__init__": __init__})


def _planner(name: str) -> type:
    def plan(self: Any, now: int) -> Any:
        raise _raiser(name)

    return type(f"Plan{name}", (ReferenceScheduler,), {"plan": plan})


for _name in RAISERS:
    setattr(sys.modules[__name__], f"Raise{_name}", _constructor(_name))
    setattr(sys.modules[__name__], f"Plan{_name}", _planner(_name))

__all__ = ["HOSTILE_AT", "HOSTILE_SEED"]


class SlowScheduler(ReferenceScheduler):
    """The reference, with a pause in its first plan: scenarios stay in flight a while."""

    def plan(self, now: int) -> Any:
        if self.plan_number == 0:
            import time

            time.sleep(0.5)
        return super().plan(now)
