"""The stdio protocol for implementations in other processes (docs/protocol.md).

A message is a big-endian u32 length followed by exactly that many bytes: one msgpack map
with a string ``type``. The harness writes requests to the implementation's stdin and reads
exactly one reply per request from its stdout (``shutdown`` has none). This module holds
the framing and the constants both sides share: the exec adapter
(:mod:`tracediff.models.specdec.external`)
and the server for Python implementations (:mod:`tracediff.models.specdec.serve`).

Messages are encoded with the trace format's canonical packer (float64 always, smallest
ints, maps in insertion order) and decoded with its hardened decoder, so a plan record that
crosses the pipe decodes to the same Python values it was built from: the same trace bytes
as in process.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import msgpack

from tracediff.model import Encoded
from tracediff.trace.codec import decode, encode, unpack_limits

PROTOCOL_VERSIONS: Final = (1, 2)  # what this tracediff speaks, oldest first
LENGTH: Final = struct.Struct(">I")
# A message longer than this is garbage: the largest plan record (64 lanes, a prefill row,
# mixed graphs) is a few hundred kilobytes.
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024

# Requests (harness -> implementation) and their replies.
HELLO, RESET, ARRIVE, PLAN, COMPLETE, STATE, BENCH, SHUTDOWN = (
    "hello",
    "reset",
    "arrive",
    "plan",
    "complete",
    "state",
    "bench",
    "shutdown",
)
OK, RETIRED, ERROR = "ok", "retired", "error"


class ProtocolError(Exception):
    """A frame or message that breaks the protocol (the text says what)."""


def frame(message: dict[str, Any]) -> bytes:
    """One message as the bytes to write: its length, then its msgpack map."""
    payload = encode(message)
    if len(payload) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"a {message.get('type')!r} message of {len(payload)} bytes is over "
            f"the {MAX_MESSAGE_BYTES}-byte limit"
        )
    return LENGTH.pack(len(payload)) + payload


def message_length(prefix: bytes) -> int:
    """The payload length a 4-byte prefix announces; raises ProtocolError past the limit."""
    (length,) = LENGTH.unpack(prefix)
    if length > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"a message announces {length} bytes, over the {MAX_MESSAGE_BYTES}-byte limit "
            f"(first bytes {prefix.hex()}: is something printing to stdout?)"
        )
    return int(length)


# The reply to every arrival, as every implementation encodes it (one fixmap, one fixstr
# each): recognised by its bytes, not decoded.
_OK_PAYLOAD: Final = encode({"type": OK})
# The reply to most completions (they retire nothing), as a canonical encoder writes it.
_NONE_RETIRED_PAYLOAD: Final = encode({"type": RETIRED, "ids": []})


def parse(payload: bytes) -> dict[str, Any]:
    """Decode one payload into a message map with a string ``type``."""
    if payload == _OK_PAYLOAD:  # the reply to every arrival: nothing to decode
        return {"type": OK}
    if payload == _NONE_RETIRED_PAYLOAD:
        return {"type": RETIRED, "ids": []}
    try:
        value = decode(payload, path="message")
    except Exception as exc:  # noqa: BLE001 - TraceFormatError; the text is what matters
        raise ProtocolError(f"undecodable message ({exc})") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError(f"a message must be a map with a string 'type', got {_brief(value)}")
    return value


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


def _brief(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
