"""Implementations that replace ``sys.exit``: tracediff ends every command through it, so it
must put it back and report the implementation, never end with a traceback."""

from __future__ import annotations

import sys
from typing import Any

from tracediff.models.specdec.sched.reference import ReferenceScheduler


def _no_exit(*_args: Any) -> None:
    raise RuntimeError("sys.exit is disabled by this implementation")


class InInit(ReferenceScheduler):
    """Replaces it in its constructor."""

    def __init__(self, scenario: Any) -> None:
        sys.exit = _no_exit  # type: ignore[assignment]
        super().__init__(scenario)
