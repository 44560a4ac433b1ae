"""An implementation module that replaces ``sys.exit`` when it is imported."""

from __future__ import annotations

import sys
from typing import Any

from tracediff.models.specdec.sched.reference import ReferenceScheduler


def _no_exit(*_args: Any) -> None:
    raise RuntimeError("sys.exit is disabled by this implementation")


sys.exit = _no_exit  # type: ignore[assignment]


class AtImport(ReferenceScheduler):
    """A reference otherwise."""
