"""Every difference between two traces (``tracediff diff --all``), grouped by field.

The explanation of a divergence stops at the first differing record, because what follows
it is mostly its consequence. Sometimes the reader wants the whole picture anyway (is it one
field that drifts, or everything after plan 40?), as diffoscope shows every difference of
two files. This walks both traces to their ends, record by record, and groups the differing
leaves by their field with indices elided (``plan: round.lanes[*].prefix``): per group, its
kind, in how many records it differs, where first, and a few examples.

Bounded like everything that reads a hostile file: the fields of at most
:data:`MAX_DETAILED` differing records are compared (the rest are counted, by their bytes),
and at most :data:`MAX_EXAMPLES` examples are kept per field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracediff.compare.fields import record_changes
from tracediff.compare.model import STRUCTURE, normalise_path, path_text
from tracediff.model import DECISION
from tracediff.trace import TraceReader
from tracediff.trace.checked import checked_records, trace_model

MAX_DETAILED = 2_000  # differing records whose fields are compared
MAX_EXAMPLES = 3  # examples kept per field


@dataclass(frozen=True)
class Example:
    """One occurrence: the record index, its plan (or the last before it), where, values."""

    index: int
    plan: int | None
    location: str
    a: Any
    b: Any


@dataclass
class FieldGroup:
    """A field that differs: its path with indices elided, kind, and where."""

    path: str
    kind: str
    records: int = 0
    examples: list[Example] = field(default_factory=list)


@dataclass(frozen=True)
class AllDifferences:
    """Both traces to their ends: counts, and the differing fields in order of first
    appearance."""

    records: tuple[int, int]  # records in A and in B (header included)
    differing: int  # record indices at which the two differ (a record only one side has too)
    detailed: int  # of those, how many had their fields compared
    groups: tuple[FieldGroup, ...]

    @property
    def identical(self) -> bool:
        return self.differing == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": list(self.records),
            "differing_records": self.differing,
            "detailed_records": self.detailed,
            "fields": [
                {
                    "field": g.path,
                    "kind": g.kind,
                    "records": g.records,
                    "examples": [
                        {"record": e.index, "plan": e.plan, "at": e.location, "a": e.a, "b": e.b}
                        for e in g.examples
                    ],
                }
                for g in self.groups
            ],
        }


def _records(reader: TraceReader) -> Iterator[tuple[bytes, Mapping[str, Any]]]:
    yield reader.header_payload, reader.header
    for checked in checked_records(reader):
        yield checked.payload, checked.record


def _columns(header: Mapping[str, Any]) -> dict[str, list[str]]:
    columns = header.get("columns")
    if not isinstance(columns, dict):
        return {}
    return {
        str(name): [str(c) for c in cols]
        for name, cols in columns.items()
        if isinstance(cols, list) and all(isinstance(c, str) for c in cols)
    }


def every_difference(path_a: str, path_b: str, *, detailed: int = MAX_DETAILED) -> AllDifferences:
    """Every differing record of two trace files, grouped by field (see the module)."""
    reader_a, reader_b = TraceReader(path_a), TraceReader(path_b)
    choices: Mapping[str, frozenset[str]] = trace_model(reader_a).choice_fields
    columns = _columns(reader_a.header)
    source_a, source_b = _records(reader_a), _records(reader_b)
    groups: dict[tuple[str, str], FieldGroup] = {}
    counts = [0, 0]
    differing = compared = 0
    plan: int | None = None
    index = 0
    while True:
        item_a, item_b = next(source_a, None), next(source_b, None)
        if item_a is None and item_b is None:
            break
        for side, item in enumerate((item_a, item_b)):
            counts[side] += item is not None
        record = (item_a or item_b)[1]  # type: ignore[index]
        if record.get("t") == DECISION and isinstance(record.get("plan"), int):
            plan = record["plan"]
        if item_a is not None and item_b is not None and item_a[0] == item_b[0]:
            index += 1
            continue
        differing += 1
        if compared < detailed:
            compared += 1
            for name, kind, location, a, b in _changes(item_a, item_b, index, columns, choices):
                group = groups.setdefault((name, kind), FieldGroup(name, kind))
                group.records += 1
                if len(group.examples) < MAX_EXAMPLES:
                    group.examples.append(Example(index, plan, location, a, b))
        index += 1
    return AllDifferences((counts[0], counts[1]), differing, compared, tuple(groups.values()))


def _changes(
    item_a: tuple[bytes, Mapping[str, Any]] | None,
    item_b: tuple[bytes, Mapping[str, Any]] | None,
    index: int,
    columns: Mapping[str, Sequence[str]],
    choices: Mapping[str, frozenset[str]],
) -> list[tuple[str, str, str, Any, Any]]:
    """(field with indices elided, kind, field as it is, A's value, B's value) per leaf."""
    if item_a is None or item_b is None:
        present = (item_a or item_b)[1]  # type: ignore[index]
        kind_name = str(present.get("t", "header"))
        side = "A" if item_b is None else "B"
        return [(f"{kind_name} record only in {side}", STRUCTURE, kind_name, None, None)]
    a, b = item_a[1], item_b[1]
    name_a = str(a.get("t", "header")) if index else "header"
    if index and a.get("t") != b.get("t"):
        return [("record type", STRUCTURE, "t", a.get("t"), b.get("t"))]
    choice = None if index == 0 else choices.get(name_a)
    changes = record_changes(dict(a), dict(b), {} if index == 0 else columns, choice)
    if not changes:  # equal values in other bytes: key order or encoding
        return [(f"{name_a}: encoding", STRUCTURE, name_a, None, None)]
    return [
        (
            normalise_path((name_a, *change.path)),
            change.kind,
            path_text((name_a, *change.path)),
            change.a,
            change.b,
        )
        for change in changes
    ]
