"""A served reference that attacks tracediff's side of the stdio protocol on one scenario,
in the way argv[1] says (tests/test_reliability_holes.py):

    python tests/impls/holes_server.py hugeerror|caps|forkexit

``hugeerror``: at plan ``BAD_AT`` of seed ``BAD_SEED`` it raises with a 20 MB message (an
``error`` reply of that size); ``caps``: its hello's ``capabilities`` is a string, not a
list; ``forkexit``: at that plan it forks a child that keeps its stdout open and sleeps, and
exits itself (no end of file ever reaches tracediff).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tracediff.models.specdec import serve  # noqa: E402
from tracediff.models.specdec.scenario.model import Scenario  # noqa: E402
from tracediff.models.specdec.sched.reference import ReferenceScheduler  # noqa: E402

BAD_SEED = 1
BAD_AT = 3
HUGE = 20 * 1024 * 1024
MODE = sys.argv[1] if len(sys.argv) > 1 else "hugeerror"


class Attacking(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.bad = scenario.seed == BAD_SEED

    def plan(self, now: int) -> dict[str, Any]:
        if self.bad and self.plan_number + 1 == BAD_AT:
            if MODE == "hugeerror":
                raise RuntimeError("y" * HUGE)
            if MODE == "forkexit":
                if os.fork() == 0:
                    time.sleep(120)  # holds the protocol's stdout open, then goes
                    os._exit(0)
                os._exit(4)
        return super().plan(now)


class _OddHello(serve.Server):
    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        reply = super().handle(message)
        if message["type"] == "hello":
            reply["capabilities"] = "state"
        return reply


if __name__ == "__main__":
    PROTOCOL_FD = os.dup(1)
    os.dup2(2, 1)
    if MODE == "caps":
        serve.Server = _OddHello  # type: ignore[misc]
    sys.exit(serve.serve(Attacking, f"holes-{MODE}", 0, PROTOCOL_FD))
