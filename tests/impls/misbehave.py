"""A served reference that breaks the stdio protocol on one scenario, in the way argv[1] says.

    python tests/impls/misbehave.py MODE   (garbage|die|hang|noise|version|error|hog|complete|
                                            loose|deep|extra|late|late-ok)

On scenario seed ``BAD_SEED`` at plan ``BAD_AT`` it writes non-protocol bytes to stdout
(``garbage``), exits with status 3 after a last word on stderr (``die``), or sleeps forever
(``hang``). ``noise`` writes a lot to stderr on every plan and otherwise behaves; ``version``
answers the hello with a protocol version tracediff does not speak; ``error`` answers the
plan with the protocol's error message; ``hog`` allocates 4 GB (a MemoryError under
``--memory-limit``, which the process inherits); ``complete`` raises in the first completion
after plan ``BAD_AT`` (under protocol version 2 a request sent ahead of others). ``loose``
breaks nothing: on every scenario it encodes each plan record's number as a 64-bit integer
(valid msgpack that decodes to the same record, but not tracediff's canonical bytes).
``deep`` adds to plan ``BAD_AT``'s record a key whose value is nested 80 levels deep.
``extra`` answers the last plan of scenario ``BAD_SEED`` (the one after every request
retired) and then, in the same write, one reply too many: an ``ok`` nobody asked for.
``late`` holds that reply too many (the last plan's reply, again) until the next message
arrives, and answers it, the next scenario's ``reset``, with the stray reply first, then
``ok``; ``late-ok`` the same with an ``ok`` as the reply too many (two ``ok`` in a row
answer that reset). ``MISBEHAVE_SEED`` in the environment overrides ``BAD_SEED``. Every
other scenario is the reference's.
"""

from __future__ import annotations

import os
import struct
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tracediff.models.specdec import serve  # noqa: E402
from tracediff.models.specdec.scenario.model import Scenario  # noqa: E402
from tracediff.models.specdec.sched.reference import ReferenceScheduler  # noqa: E402
from tracediff.trace import encode  # noqa: E402

BAD_SEED = int(os.environ.get("MISBEHAVE_SEED", "1"))
BAD_AT = 3
MODE = sys.argv[1] if len(sys.argv) > 1 else "garbage"


class Misbehaving(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.bad = scenario.seed == BAD_SEED

    def plan(self, now: int) -> dict[str, Any]:
        if MODE == "noise":
            sys.stderr.write("noise " * 2000 + "\n")
        if self.bad and self.plan_number + 1 == BAD_AT:
            if MODE == "garbage":
                os.write(PROTOCOL_FD, b"this is not a length-prefixed message\n")
                time.sleep(30)  # the harness must not wait for the rest
            elif MODE == "die":
                sys.stderr.write("misbehave: giving up at plan 3\n")
                sys.stderr.flush()
                os._exit(3)
            elif MODE == "hang":
                time.sleep(10**6)
            elif MODE == "error":
                raise RuntimeError("misbehave: refusing plan 3")
            elif MODE == "hog":
                self.hoard = bytearray(4 << 30)  # over any --memory-limit the tests give
            elif MODE == "deep":
                record = super().plan(now)
                junk: Any = 0
                for _ in range(80):
                    junk = [junk]
                record["junk"] = junk
                return record
        return super().plan(now)

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        if MODE == "complete" and self.bad and self.plan_number >= BAD_AT:
            raise RuntimeError(f"misbehave: refusing the completion of round {event['round']}")
        return super().complete(event, now)


class _OldServer(serve.Server):
    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        if message["type"] == "hello":
            return {"type": "hello", "version": 99, "name": "from the future"}
        return super().handle(message)


class _ExtraServer(serve.Server):
    """One ``ok`` too many after the last plan of scenario BAD_SEED (``extra``), or that
    plan's reply again before the reply to the next message (``late``)."""

    retired: set[int]

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        BEFORE.extend(HELD)  # the next message: a held reply goes out before its reply
        HELD.clear()
        if message["type"] == "reset":
            self.retired = set()
        reply = super().handle(message)
        if reply["type"] == "retired":
            self.retired.update(reply["ids"])
        scenario = self.scenario
        if (
            reply["type"] == "plan"
            and reply["record"].get("round") is None
            and scenario is not None
            and scenario.seed == BAD_SEED
            and len(self.retired) == len(scenario.requests)
        ):
            if MODE == "late":
                HELD.append(dict(reply))
            elif MODE == "late-ok":
                HELD.append({"type": "ok"})
            else:
                EXTRA.append({"type": "ok"})
        return reply


EXTRA: list[dict[str, Any]] = []  # replies too many, sent after the reply
HELD: list[dict[str, Any]] = []  # replies too many, held until the next message arrives
BEFORE: list[dict[str, Any]] = []  # replies too many, sent before the reply


def _extra_frame(message: dict[str, Any]) -> bytes:
    """Any reply too many due before the reply, the reply, then any due after it."""
    data = b"".join(_canonical_frame(m) for m in (*BEFORE, message, *EXTRA))
    BEFORE.clear()
    EXTRA.clear()
    return data


def _loose_frame(message: dict[str, Any]) -> bytes:
    """A plan reply whose record's ``plan`` is a uint 64 (0xcf): equal values, other bytes."""
    record = message.get("record")
    if message.get("type") != "plan" or not isinstance(record, dict) or len(message) > 15:
        return _canonical_frame(message)
    parts = [bytes([0x80 | len(message)])]
    for key, value in message.items():
        parts.append(encode(key))
        if key == "record":
            parts.append(bytes([0x80 | len(record)]))
            for name, item in record.items():
                parts.append(encode(name))
                loose = name == "plan" and type(item) is int and item >= 0
                parts.append(b"\xcf" + struct.pack(">Q", item) if loose else encode(item))
        else:
            parts.append(encode(value))
    payload = b"".join(parts)
    return struct.pack(">I", len(payload)) + payload


if __name__ == "__main__":
    PROTOCOL_FD = os.dup(1)
    os.dup2(2, 1)
    if MODE == "version":
        serve.Server = _OldServer  # type: ignore[misc]
    _canonical_frame = serve.frame
    if MODE == "loose":
        serve.frame = _loose_frame  # type: ignore[assignment]
    if MODE in ("extra", "late", "late-ok"):
        serve.Server = _ExtraServer  # type: ignore[misc]
        serve.frame = _extra_frame  # type: ignore[assignment]
    sys.exit(serve.serve(Misbehaving, f"misbehave-{MODE}", 0, PROTOCOL_FD))
