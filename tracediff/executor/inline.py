"""The in-memory twin of the executors: tasks run here, one after the other.

No isolation: a task that exits, hangs in C code or exhausts memory takes this process with
it. The CLI never uses it; it serves library callers that asked for one job and no limits,
and tests, where starting worker processes would cost more than the work.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any

from tracediff.executor.base import DONE, FAILED, Executor, Guard, Outcome, Task


class InlineExecutor(Executor):
    name = "inline"

    @property
    def workers(self) -> int:
        return 1

    def stream(
        self,
        task: Task,
        items: Iterable[tuple[int, Any]],
        on_outcome: Callable[[Outcome], None],
        *,
        deadline_s: float | None = None,
        guard: Guard = contextlib.nullcontext,
    ) -> None:
        for index, payload in items:
            started = time.monotonic()
            try:
                value = task(payload, None, _no_deadline)
            except Exception as exc:  # noqa: BLE001 - the task's failure is its outcome
                detail = "".join(traceback.format_exception(exc)).rstrip()
                outcome = Outcome(index, FAILED, detail=detail, worker="inline")
            else:
                seconds = time.monotonic() - started
                outcome = Outcome(index, DONE, value=value, seconds=seconds, worker="inline")
            with guard():
                on_outcome(outcome)


def _no_deadline(_seconds: float) -> None:
    """Moving a deadline means nothing here: there is none."""
