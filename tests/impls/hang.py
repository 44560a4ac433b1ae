"""References that hang on one scenario (seed ``HANG_SEED``, plan ``HANG_AT``), each in its
own way, and one that is merely slow everywhere.

Which hangs the in-process ``SIGALRM`` can stop and which only the parent-side watchdog can:

==================  ==============================================  =================
class               how it hangs                                    stopped by
==================  ==============================================  =================
LoopScheduler       ``while True: pass`` (Python bytecode)          SIGALRM
SleepScheduler      ``time.sleep(10**6)`` (returns on a signal)     SIGALRM
LockScheduler       a ``threading.Lock`` acquired twice             SIGALRM
SwallowingScheduler a loop that swallows every ``Exception``        SIGALRM
SpinScheduler       ``sum(itertools.repeat(0))``: a C loop holding  watchdog (kill)
                    the GIL that never checks for signals
MutexScheduler      a pthread mutex locked twice through ctypes:    watchdog (kill)
                    C code blocked in the kernel, GIL released
==================  ==============================================  =================
"""

from __future__ import annotations

import ctypes
import itertools
import threading
import time
from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler

HANG_SEED = 1
HANG_AT = 2
SLOW_S = 0.25  # SlowScheduler: pause at the first plan of every scenario


class _HangsOnOneSeed(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self._hangs = scenario.seed == HANG_SEED

    def plan(self, now: int) -> dict[str, Any]:
        if self._hangs and self.plan_number + 1 == HANG_AT:
            self.hang()
        return super().plan(now)

    def hang(self) -> None:
        raise NotImplementedError


class LoopScheduler(_HangsOnOneSeed):
    name = "hang-loop"

    def hang(self) -> None:
        spins = 0
        while True:
            spins += 1


class SleepScheduler(_HangsOnOneSeed):
    name = "hang-sleep"

    def hang(self) -> None:
        time.sleep(10**6)


class LockScheduler(_HangsOnOneSeed):
    name = "hang-lock"

    def hang(self) -> None:
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()


class SpinScheduler(_HangsOnOneSeed):
    name = "hang-spin"

    def hang(self) -> None:
        sum(itertools.repeat(0))


class MutexScheduler(_HangsOnOneSeed):
    name = "hang-mutex"

    def hang(self) -> None:
        mutex = ctypes.create_string_buffer(64)  # all zeros: PTHREAD_MUTEX_INITIALIZER
        libc = ctypes.CDLL(None)
        libc.pthread_mutex_lock(mutex)
        libc.pthread_mutex_lock(mutex)  # a default mutex locked twice never returns


class SlowScheduler(ReferenceScheduler):
    """Decides exactly as the reference, but pauses ``SLOW_S`` at each scenario's first
    plan: runs last long enough to be interrupted."""

    name = "slow"

    def plan(self, now: int) -> dict[str, Any]:
        if self.plan_number == 0:
            time.sleep(SLOW_S)
        return super().plan(now)


class SwallowingScheduler(_HangsOnOneSeed):
    """Loops forever, retrying whatever ``Exception`` interrupts it."""

    name = "hang-swallow"

    def hang(self) -> None:
        while True:
            try:
                while True:
                    pass
            except Exception:  # noqa: BLE001 - deliberately swallows everything it can
                continue
