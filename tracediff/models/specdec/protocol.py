"""specdec's message layout over the stdio protocol (docs/protocol.md).

The framing (a big-endian u32 length, one msgpack map with a string ``type``), its limits
and its canonical encoding are the core's (:mod:`tracediff.process.framing`), as are the
process and its pipes (:mod:`tracediff.process.pipes`). This module holds what only
specdec's layout has: its message types, its protocol versions (1 and 2) and the fast
parses of its commonest replies, shared by its client (:mod:`tracediff.models.specdec.external`)
and its server (:mod:`tracediff.models.specdec.serve`).
"""

from __future__ import annotations

from typing import Any, Final

import msgpack

from tracediff.model import Encoded
from tracediff.process import framing
from tracediff.process.framing import (
    ERROR,
    HELLO,
    LENGTH,
    MAX_MESSAGE_BYTES,
    OK,
    RESET,
    SHUTDOWN,
    ProtocolError,
    frame,
    message_length,
)
from tracediff.trace.codec import encode, unpack_limits

__all__ = [
    "ARRIVE",
    "BENCH",
    "COMPLETE",
    "ERROR",
    "HELLO",
    "LENGTH",
    "MAX_MESSAGE_BYTES",
    "OK",
    "PLAN",
    "PROTOCOL_VERSIONS",
    "RESET",
    "RETIRED",
    "SHUTDOWN",
    "STATE",
    "ProtocolError",
    "frame",
    "message_length",
    "parse",
    "parse_plan",
]

PROTOCOL_VERSIONS: Final = (1, 2)  # what this tracediff speaks, oldest first

# Requests (harness -> implementation) and their replies, beyond the shared ones.
ARRIVE, PLAN, COMPLETE, STATE, BENCH = "arrive", "plan", "complete", "state", "bench"
RETIRED = "retired"

# The reply to most completions (they retire nothing), as a canonical encoder writes it.
_NONE_RETIRED_PAYLOAD: Final = encode({"type": RETIRED, "ids": []})


def parse(payload: bytes) -> dict[str, Any]:
    """Decode one payload into a message map with a string ``type``."""
    if payload == _NONE_RETIRED_PAYLOAD:  # recognised by its bytes, not decoded
        return {"type": RETIRED, "ids": []}
    return framing.parse(payload)


# The fields of a plan record that the driver and a recording read (the round goes to the
# engine): on a golden check's first pass only these are decoded, the rest skipped.
DRIVER_FIELDS: Final = frozenset({"t", "plan", "round"})


def parse_plan(payload: bytes) -> dict[str, Any] | None:
    """A plan reply whose record keeps the bytes it came in (:class:`Encoded`), for a
    recording that digests them as they are; None for anything that is not a well-formed
    plan reply with a record map (then :func:`parse` decodes it, and says what is wrong).

    Decoded under the limits :func:`parse` applies, but without its nesting walk, and of
    the record only the fields the driver and the recording read (``t``, ``plan``,
    ``round``): the others (the wide tables, most of the bytes) are skipped, not built as
    Python objects. On the 2-core VM a quick plan reply takes 21-23 µs to parse in full,
    10.5-11 µs this way (15-16 µs when the whole record was decoded). The bytes are what
    is digested, judged against a known good digest, and a mismatch runs the scenario again
    with every reply parsed and checked in full (tracediff.golden.digest)."""
    size = len(payload)
    unpacker = msgpack.Unpacker(max_buffer_size=max(size, 1), **unpack_limits(size))
    try:
        unpacker.feed(payload)
        reply: dict[str, Any] = {}
        record = None
        for _ in range(unpacker.read_map_header()):
            key = unpacker.unpack()
            if key == "record":
                start = unpacker.tell()
                fields: dict[str, Any] = {}
                for _ in range(unpacker.read_map_header()):
                    name = unpacker.unpack()
                    if name in DRIVER_FIELDS:
                        fields[name] = unpacker.unpack()
                    else:
                        unpacker.skip()
                record = reply[key] = Encoded(fields, payload[start : unpacker.tell()])
            else:
                reply[key] = unpacker.unpack()
        complete = unpacker.tell() == size
    except Exception:  # noqa: BLE001 - anything odd: the full parse names it
        return None
    if not complete or record is None or reply.get("type") != PLAN:
        return None
    return reply
