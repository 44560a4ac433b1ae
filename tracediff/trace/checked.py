"""Reading a trace's records checked against its model's schema.

The framing (``reader.py``) guarantees the bytes are the ones written; the model's checker
(:meth:`tracediff.model.DecisionModel.trace_checker`) guarantees what they decode to is a
trace of that model. A trace names its model in its provenance frame, outside the compared
body (so a digest does not depend on the name); a trace that names none is the default
model's, as every trace written before models had names is.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tracediff import model as models
from tracediff.errors import TraceFormatError
from tracediff.model import DecisionModel
from tracediff.trace import provenance
from tracediff.trace.codec import decode

MODEL_KEY = "model"  # in the provenance frame


def trace_model(reader: Any) -> DecisionModel:
    """The model whose trace ``reader`` (a :class:`~tracediff.trace.TraceReader`) holds."""
    named = (reader.provenance or {}).get(MODEL_KEY)
    if named is not None and not isinstance(named, str):
        raise TraceFormatError(reader.name, f"provenance: model is {type(named).__name__}")
    try:  # the name bounded: no model's is 200 characters, and the refusal says it
        return models.get(None if named is None else provenance.text(named))
    except Exception as exc:  # noqa: BLE001 - an unknown or broken model: say which file
        why = provenance.text(str(exc), 1000)
        raise TraceFormatError(reader.name, f"provenance: {why}") from None


def trace_checker(reader: Any) -> Any:
    """The checker of ``reader``'s records; TraceFormatError for a header its model refuses.
    Its ``scenario`` is the header's scenario."""
    model = trace_model(reader)
    checker = model.trace_checker(reader.header, reader.name)
    scenario = getattr(checker, "scenario", None)
    if scenario is not None:
        models.claim(model, scenario)
    return checker


@dataclass(frozen=True)
class CheckedRecord:
    """One record of a trace, checked: its body index (first record 1), frame offset, raw
    payload and decoded map (its column-stored tables as rows)."""

    index: int
    offset: int
    payload: bytes
    record: dict[str, Any]


def checked_records(reader: Any, checker: Any = None) -> Iterator[CheckedRecord]:
    """Every record of ``reader``, decoded and checked, in order; a record that breaks the
    schema raises :class:`TraceFormatError`. Records come back in their model's readable
    shape (``rows_view``), the one ``show``, explanations and replay label and compare;
    ``payload`` keeps the bytes as stored."""
    model = trace_model(reader)
    checker = checker or model.trace_checker(reader.header, reader.name)
    for index, offset, payload in reader.records():
        record = decode(payload, path=reader.name, offset=offset, record=index)
        checker.check(record, offset=offset, index=index)
        yield CheckedRecord(index, offset, payload, model.rows_view(record))
