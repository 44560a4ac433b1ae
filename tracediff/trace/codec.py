"""Bytes-level pieces of the trace format: canonical msgpack and the frame layout.

The layout itself is specified in the docstring of :mod:`tracediff.trace`; this module only
holds the constants both the writer and the reader must agree on, the canonical encoder, and
the hardened decoder.

Why the decoder needs care: trace files come from CI artifacts, other machines and external
implementations, so a payload may be hostile. msgpack-python (1.x) already bounds most
things when it is given the payload length: strings, binaries, arrays and maps cannot claim
more elements than the payload has bytes, and its C unpacker keeps its own fixed stack
(depth 1024, ``StackError`` beyond; the pure-Python fallback recurses and turns the
``RecursionError`` at the interpreter's limit into ``StackError``), so no input overflows the
C stack.
What it allows that tracediff does not: nesting up to about a thousand levels, which the
recursive code downstream (deepdiff, pretty printers) cannot walk, and ext types (timestamps
included), which the format never writes. Those are rejected here.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import msgpack

from tracediff.errors import TraceFormatError

MAGIC: Final = b"TDTRACE\n"
FORMAT_VERSION: Final = 2
# The previous version, which only ``tracediff upgrade`` reads.
PREVIOUS_VERSION: Final = 1
# magic, u16 version, u16 reserved (always 0)
PREAMBLE: Final = struct.Struct(">8sHH")

# kind (1 byte), u32 payload length, u32 crc32 of the payload
FRAME_HEADER: Final = struct.Struct(">cII")
# the prefix fed into the body digest before each compared payload
BODY_LENGTH: Final = struct.Struct(">I")

KIND_HEADER: Final = b"H"
KIND_RECORD: Final = b"R"
KIND_PROVENANCE: Final = b"P"
KIND_END: Final = b"E"
KINDS: Final = frozenset({KIND_HEADER, KIND_RECORD, KIND_PROVENANCE, KIND_END})

# A frame longer than this is treated as corruption, before anything is allocated for it.
MAX_FRAME_BYTES: Final = 256 * 1024 * 1024
# No legitimate record comes close; the bound keeps a hostile count from costing memory.
MAX_ELEMENTS: Final = 16 * 1024 * 1024
# Records are shallow; 64 leaves ample room while staying far below any recursion limit.
MAX_DEPTH: Final = 64

# Every byte that can open a msgpack container (fixmap, fixarray, array16/32, map16/32).
# Counting these in C gives a cheap upper bound on nesting depth, so the exact walk below
# only runs for payloads that could possibly be too deep.
_CONTAINER_MARKERS: Final = bytes([*range(0x80, 0xA0), 0xDC, 0xDD, 0xDE, 0xDF])
_NOT_CONTAINER_MARKERS: Final = bytes(b for b in range(256) if b not in _CONTAINER_MARKERS)

# Packers for the whole process: building a Packer per call costs more than packing a small
# record. ``autoreset`` makes every ``pack`` return just its own bytes (and the C packer
# resets its buffer after a failed pack too). Packing holds the GIL throughout, so sharing
# them between threads cannot interleave output. The strict packer accepts exact types only
# and is about twice as fast; for those it writes exactly what the loose one writes (the
# same rules: float64, smallest ints, bin, str, maps in order). Anything it refuses (a
# tuple, a subclass of int or str) is packed by the loose one, the canonical form of it.
_STRICT: Final = msgpack.Packer(
    use_bin_type=True, use_single_float=False, autoreset=True, strict_types=True
)
_PACKER: Final = msgpack.Packer(
    use_bin_type=True, use_single_float=False, autoreset=True, strict_types=False
)
_strict_pack = _STRICT.pack
_loose_pack = _PACKER.pack


def encode(obj: Any) -> bytes:
    """Pack ``obj`` canonically: float64 floats, smallest ints, dicts in insertion order.

    Callers build dicts in schema order; that order is part of the compared bytes. Tuples
    pack as arrays, ``bytes`` as bin, ``str`` as UTF-8 str. Unsupported objects raise
    ``TypeError`` (a programming error, not a trace problem).
    """
    try:
        return _strict_pack(obj)
    except TypeError:
        return _loose_pack(obj)


def _reject_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack ext type {code} is not part of the trace format")


def unpack_limits(size: int) -> dict[str, Any]:
    """The bounds under which a payload of ``size`` bytes is unpacked (:func:`decode`, and
    an ``Unpacker`` reading one payload): strings, bins, arrays and maps no longer than the
    payload could hold, no ext types, string keys, valid UTF-8."""
    return {
        "raw": False,
        "strict_map_key": True,
        "max_str_len": size,
        "max_bin_len": size,
        "max_array_len": min(size, MAX_ELEMENTS),
        "max_map_len": min(size // 2, MAX_ELEMENTS),
        "max_ext_len": 0,
        "ext_hook": _reject_ext,
    }


def decode(
    payload: bytes,
    *,
    path: str = "<msgpack>",
    offset: int | None = None,
    record: int | None = None,
) -> Any:
    """Unpack one msgpack object from ``payload`` under hard limits.

    Any failure (malformed or truncated msgpack, trailing bytes, ext types, non-string map
    keys, invalid UTF-8, too many elements, nesting deeper than :data:`MAX_DEPTH`) raises
    :class:`TraceFormatError` naming ``path``, the frame ``offset`` and the ``record`` index.
    """
    size = len(payload)
    # ``unpackb`` has no ``max_buffer_size`` (only ``Unpacker`` does): the whole payload is
    # the buffer, and the per-kind limits below are what bound the allocation. They are
    # unpack_limits(size), written out: building that dict per call cost a microsecond on
    # every decode, a third of a small reply's (a test holds the two equal).
    try:
        value = msgpack.unpackb(
            payload,
            use_list=True,
            raw=False,
            strict_map_key=True,
            max_str_len=size,
            max_bin_len=size,
            max_array_len=min(size, MAX_ELEMENTS),
            max_map_len=min(size // 2, MAX_ELEMENTS),
            max_ext_len=0,
            ext_hook=_reject_ext,
        )
    except Exception as exc:
        # msgpack signals bad input with many types (ValueError and its subclasses,
        # TypeError, StackError, UnicodeDecodeError) that differ between its C and
        # pure-Python unpackers; all of them mean the same thing here.
        raise TraceFormatError(
            path,
            f"corrupt: cannot decode msgpack payload ({_describe(exc)})",
            offset=offset,
            record=record,
        ) from exc
    if (
        isinstance(value, list | dict)
        and len(payload.translate(None, _NOT_CONTAINER_MARKERS)) > MAX_DEPTH
        and _too_deep(value)
    ):
        raise TraceFormatError(
            path,
            f"corrupt: msgpack payload nested deeper than {MAX_DEPTH} levels",
            offset=offset,
            record=record,
        )
    return value


def _describe(exc: Exception) -> str:
    text = str(exc)
    name = type(exc).__name__
    if isinstance(exc, msgpack.ExtraData):
        return "extra bytes after the object"
    if isinstance(exc, msgpack.StackError):
        return "nested too deeply"
    return f"{name}: {text}" if text else name


def _too_deep(value: Any) -> bool:
    # Level by level, not recursive: the value may be up to ~1000 levels deep, which is
    # exactly what recursion must not be trusted with. A level's containers are gathered by a
    # comprehension (decoded values are plain lists and dicts), which costs a third of a
    # per-element stack walk: every plan record crossing the stdio protocol goes through here.
    level: list[Any] = [value]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            return True
        below: list[Any] = []
        for container in level:
            children = container.values() if type(container) is dict else container
            below += [c for c in children if type(c) is list or type(c) is dict]
        level = below
        depth += 1
    return False
