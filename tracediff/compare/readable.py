"""Records as explanations, reports and ``show`` read them: tables as rows, never bytes.

A trace stores a plan record's wide tables as typed columns (``bytes`` per column); a
built-in's ``plan()`` returns them that way too. Field paths (``candidates[3].value``),
ULP distances and JSON reports all need one value per cell, so every record this package
compares, labels or keeps for a report goes through :func:`readable` first: tables become
rows, exactly the version 1 shape (the model's :meth:`~tracediff.model.DecisionModel.as_rows`).

A table that cannot be read as rows (columns of the wrong width, rows no column holds) is
kept as recorded, with any ``bytes`` written as hexadecimal text: a report still shows what
was there, and a JSON report never holds bytes.
"""

from __future__ import annotations

from typing import Any

from tracediff.model import DecisionModel
from tracediff.project import current_model


def readable(record: Any, model: DecisionModel | None = None) -> Any:
    """``record`` with every typed table as rows and any other ``bytes`` as hex text;
    ``model``: the record's (default: the default model)."""
    if isinstance(record, dict) and "t" in record:
        record = (model or current_model()).as_rows(record)
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
