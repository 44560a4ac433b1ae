"""The framing every process protocol shares (docs/protocol.md, "Framing").

A message is a big-endian u32 length followed by exactly that many bytes: one msgpack map
with a string ``type``. The harness writes requests to the implementation's stdin and reads
exactly one reply per request from its stdout (``shutdown`` has none). A model's own layout
(specdec's) and the generic one differ in the messages they exchange, never in this.

Messages are encoded with the trace format's canonical packer (float64 always, smallest
ints, maps in insertion order) and decoded with its hardened decoder, so a record that
crosses the pipe decodes to the same Python values it was built from: the same trace bytes
as in process.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from tracediff.trace.codec import decode, encode

LENGTH: Final = struct.Struct(">I")
# A message longer than this is garbage: the largest specdec plan record (64 lanes, a
# prefill row, mixed graphs) is a few hundred kilobytes.
MAX_MESSAGE_BYTES: Final = 64 * 1024 * 1024

# The messages every layout has (the others are the layout's own).
HELLO, RESET, SHUTDOWN, OK, ERROR = "hello", "reset", "shutdown", "ok", "error"
# In the finding of a reset answered with a reply too many, owed since the scenario the
# process served before (ExternalProcess.reset): the reset scenario, run again, passes, which
# is no sign of a nondeterministic implementation (tracediff.running.explain reads it).
STRAY_BEFORE_RESET = "a reply too many, most likely to the last request of scenario"


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


# The reply to a call that returns nothing (an arrival), as every implementation encodes
# it (one fixmap, one fixstr each): recognised by its bytes, not decoded.
OK_PAYLOAD: Final = encode({"type": OK})


def parse(payload: bytes) -> dict[str, Any]:
    """Decode one payload into a message map with a string ``type``."""
    if payload == OK_PAYLOAD:  # the commonest reply: nothing to decode
        return {"type": OK}
    try:
        value = decode(payload, path="message")
    except Exception as exc:  # noqa: BLE001 - TraceFormatError; the text is what matters
        raise ProtocolError(f"undecodable message ({exc})") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError(f"a message must be a map with a string 'type', got {brief(value)}")
    return value


def brief(value: Any) -> str:
    """``repr(value)`` cut to one short line."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
