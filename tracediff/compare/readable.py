"""Records as explanations, reports and ``show`` read them: tables as rows, never bytes.

A trace stores a plan record's wide tables as typed columns (``bytes`` per column); a
built-in's ``plan()`` returns them that way too. Field paths (``candidates[3].value``),
ULP distances and JSON reports all need one value per cell, so every record this package
compares, labels or keeps for a report goes through :func:`readable` first: tables become
rows, exactly the version 1 shape (``tracediff.models.specdec.sched.record.rows_view``).

A table that cannot be read as rows (columns of the wrong width, rows no column holds) is
kept as recorded, with any ``bytes`` written as hexadecimal text: a report still shows what
was there, and a JSON report never holds bytes.
"""

from __future__ import annotations

from typing import Any

from tracediff.models.specdec.sched.record import packed_record, rows_view
from tracediff.trace.columns import ColumnError


def readable(record: Any) -> Any:
    """``record`` with every typed table as rows and any other ``bytes`` as hex text."""
    if isinstance(record, dict) and record.get("t") == "plan":
        try:
            record = packed_record(record)
        except ColumnError:
            pass  # rows no column can hold: shown as the implementation returned them
        record = rows_view(record)
    return _without_bytes(record)


_BYTES = (bytes, bytearray, memoryview)


def _without_bytes(value: Any) -> Any:
    if isinstance(value, _BYTES):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {key: _without_bytes(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        # rows of scalars (most of a record) are kept as they are, not copied
        if not any(isinstance(item, (*_BYTES, dict, list, tuple)) for item in value):
            return value
        return [_without_bytes(item) for item in value]
    return value
