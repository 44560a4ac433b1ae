"""A sign of life for logs: one progress line every so often while a long step runs.

On a terminal the commands draw a live progress bar; in a CI log (stderr not a terminal)
that bar is off, and a run of several minutes would otherwise print nothing until its end.
There, a background thread writes ``run: 40 of 108 scenarios, 2 findings, 1.3/s, 31 s, ETA
52 s`` (done of total, rate, elapsed, estimated time left) to stderr
every :data:`INTERVAL_S` seconds ($TRACEDIFF_PROGRESS_INTERVAL overrides it).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

INTERVAL_S = 30.0
INTERVAL_ENV = "TRACEDIFF_PROGRESS_INTERVAL"


@dataclass
class Counter:
    """What the line reports; the command's result callback updates it."""

    label: str
    total: int | None = None
    done: int = 0
    findings: int = 0
    noun: str = "scenario"
    counts_findings: bool = True  # False: a phase whose items are findings already
    started: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        """``run: 40 of 108 scenarios, 2 findings, 1.3/s, 31 s, ETA 52 s``."""
        elapsed = time.monotonic() - self.started
        if self.total is None:
            return f"{self.label}: still running, {self.done} done, {elapsed:.0f} s"
        nouns = self.noun if self.total == 1 else f"{self.noun}s"
        found = ""
        if self.counts_findings:
            found = f", {self.findings} finding{'' if self.findings == 1 else 's'}"
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.done and rate > 0:
            eta = f"ETA {max(0.0, (self.total - self.done) / rate):.0f} s"
        else:
            eta = "ETA unknown"
        return (
            f"{self.label}: {self.done} of {self.total} {nouns}{found}, {rate:.1f}/s, "
            f"{elapsed:.0f} s, {eta}"
        )


def _interval() -> float:
    try:
        return max(0.05, float(os.environ.get(INTERVAL_ENV, INTERVAL_S)))
    except ValueError:
        return INTERVAL_S


@contextmanager
def heartbeat(counter: Counter, *, enabled: bool = True) -> Iterator[Counter]:
    """Print ``counter.line()`` to stderr every interval while the block runs, when
    ``enabled`` and stderr is not a terminal."""
    if not enabled or sys.stderr.isatty():
        yield counter
        return
    stop = threading.Event()
    interval = _interval()

    def beat() -> None:
        while not stop.wait(interval):
            try:
                print(counter.line(), file=sys.stderr, flush=True)
            except (OSError, ValueError):
                return  # stderr went away: stay quiet

    thread = threading.Thread(target=beat, name="tracediff-heartbeat", daemon=True)
    thread.start()
    try:
        yield counter
    finally:
        stop.set()
        thread.join(timeout=1.0)
