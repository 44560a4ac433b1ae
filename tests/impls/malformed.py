"""References that break the driver contract on one scenario (seed ``BAD_SEED``, plan
``BAD_AT``), each in its own way; on every other scenario they decide as the reference.

=======================  =====================================================
class                    what plan ``BAD_AT`` of seed ``BAD_SEED`` does
=======================  =====================================================
RaiseScheduler           raises ValueError
WrongKeysScheduler       returns a plan without its ``probe`` key
NotADictScheduler        returns a list instead of a plan record
BadRoundScheduler        returns a round cut short (no lanes)
UnencodableScheduler     puts an ``object()`` into the plan
ExitScheduler            calls ``sys.exit(3)``
HardExitScheduler        calls ``os._exit(7)``: the process ends at once
SegfaultScheduler        reads address 0 through ctypes: SIGSEGV
=======================  =====================================================

The last two kill the process they run in: use them only with worker processes (``-j 2``
or ``--timeout``).
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.reference import ReferenceScheduler

BAD_SEED = 3
BAD_AT = 2


class _BadOnOneSeed(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self._bad = scenario.seed == BAD_SEED

    def plan(self, now: int) -> Any:
        record = super().plan(now)
        if self._bad and record["plan"] == BAD_AT:
            return self.spoil(record)
        return record

    def spoil(self, record: dict[str, Any]) -> Any:
        raise NotImplementedError


class RaiseScheduler(_BadOnOneSeed):
    name = "raise"

    def spoil(self, record: dict[str, Any]) -> Any:
        raise ValueError(f"deliberate failure at plan {record['plan']}")


class WrongKeysScheduler(_BadOnOneSeed):
    name = "wrong-keys"

    def spoil(self, record: dict[str, Any]) -> Any:
        del record["probe"]
        return record


class NotADictScheduler(_BadOnOneSeed):
    name = "not-a-dict"

    def spoil(self, record: dict[str, Any]) -> Any:
        return list(record.items())


class BadRoundScheduler(_BadOnOneSeed):
    name = "bad-round"

    def spoil(self, record: dict[str, Any]) -> Any:
        record["round"] = list(record["round"])[:3]  # the lanes and the rest cut off
        return record


class UnencodableScheduler(_BadOnOneSeed):
    name = "unencodable"

    def spoil(self, record: dict[str, Any]) -> Any:
        record["credit_after"] = object()
        return record


class ExitScheduler(_BadOnOneSeed):
    name = "exit"

    def spoil(self, record: dict[str, Any]) -> Any:
        sys.exit(3)


class HardExitScheduler(_BadOnOneSeed):
    name = "hard-exit"

    def spoil(self, record: dict[str, Any]) -> Any:
        os._exit(7)


class SegfaultScheduler(_BadOnOneSeed):
    name = "segfault"

    def spoil(self, record: dict[str, Any]) -> Any:
        return ctypes.string_at(0)
