"""References that misbehave on one scenario (seed ``HOSTILE_SEED``, plan ``HOSTILE_AT``) in
ways aimed at tracediff itself rather than at the comparison; on every other scenario they
decide as the reference. tests/test_hostile_impls.py runs each through the command line.

=======================  ===========================================================
class                    what it does
=======================  ===========================================================
ExitZeroScheduler        ``sys.exit(0)``: must not look like success
SystemExitScheduler      ``raise SystemExit(3)``
HardExitScheduler        ``os._exit(7)``: the process ends at once
InterruptScheduler       raises ``KeyboardInterrupt``: must not look like Ctrl-C
AllocateScheduler        allocates 3 GB at once (refuses without an address-space limit)
MutatingScheduler        changes the Scenario it is given (every seed: 4242, other knobs)
HugeRecordScheduler      returns a plan with 10^6 candidate rows
SpawnScheduler           starts ``sleep`` and leaves it running (pid: spawn_pid_file())
BrokenConstructor        raises in ``__init__``
=======================  ===========================================================

Column-form garbage: each ``*Columns`` class damages the typed candidates table of plan
``HOSTILE_AT`` (one row there) in one way, each ``*Rows`` class returns the table as rows
with one bad row; ``COLUMN_GARBAGE`` maps each to the words its error finding must hold.
``BytearrayColumns``, ``MemoryviewColumns`` and ``BytesSubclassColumns`` give the same
contents as other bytes-like objects: the driver accepts them (they pack as the same bin).
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.sched.record import CANDIDATES, rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler

HOSTILE_SEED = 3
HOSTILE_AT = 2
ALLOCATE_BYTES = 3 * 1024**3
HUGE_ROWS = 10**6
MUTATED_SEED = 4242


def spawn_pid_file() -> Path:
    """Where SpawnScheduler notes its children (a fixed name: a worker's environment is its
    fork server's, fixed when the server started, so a test cannot pass a path in it)."""
    return Path(tempfile.gettempdir()) / f"tracediff-hostile-spawn-{os.getuid()}.pids"


class _HostileOnOneSeed(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self._hostile = scenario.seed == HOSTILE_SEED

    def plan(self, now: int) -> Any:
        record = super().plan(now)
        if self._hostile and record["plan"] == HOSTILE_AT:
            return self.misbehave(record)
        return record

    def misbehave(self, record: dict[str, Any]) -> Any:
        raise NotImplementedError


class ExitZeroScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        sys.exit(0)


class SystemExitScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        raise SystemExit(3)


class HardExitScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        os._exit(7)


class InterruptScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        raise KeyboardInterrupt


class AllocateScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            raise RuntimeError("AllocateScheduler refuses to allocate without --memory-limit")
        hoard = bytearray(ALLOCATE_BYTES)
        return record | {"plan": record["plan"] + len(hoard)}


class MutatingScheduler(ReferenceScheduler):
    """Decides as the reference on the scenario it was given, after changing it (seed 4242,
    one lane at most): another implementation handed the same object would run a different
    scenario, and the run would report the wrong seed."""

    def __init__(self, scenario: Scenario) -> None:
        object.__setattr__(scenario, "seed", MUTATED_SEED)
        changed = dataclasses.replace(scenario.params, max_lanes=1, base_us=1)
        object.__setattr__(scenario, "params", changed)
        super().__init__(scenario)


class HugeRecordScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        # returned as rows, which the driver packs into columns (at the cost it takes)
        rows = rows_view(record)["candidates"]
        row = rows[0] if rows else [0]
        return record | {"candidates": [list(row) for _ in range(HUGE_ROWS)]}


class SpawnScheduler(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        child = subprocess.Popen(["sleep", "300"])
        with open(spawn_pid_file(), "a", encoding="utf-8") as handle:
            handle.write(f"{child.pid}\n")
        return record


class BrokenConstructor(ReferenceScheduler):
    def __init__(self, scenario: Scenario) -> None:
        if scenario.seed == HOSTILE_SEED:
            raise RuntimeError("deliberate failure in the constructor")
        super().__init__(scenario)


# -- column-form garbage ----------------------------------------------------------------------
VALUE = CANDIDATES.names.index("value")
PREFILL = CANDIDATES.names.index("prefill")
PREFIXES = CANDIDATES.names.index("prefixes")


class _CandidateColumns(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        columns = list(record["candidates"])
        self.damage(columns)
        return record | {"candidates": columns}

    def damage(self, columns: list[Any]) -> None:
        raise NotImplementedError


class ShortBinColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[VALUE] = columns[VALUE][:-1]


class LongerColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[VALUE] = columns[VALUE] * 2


class NaNBytesColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[VALUE] = struct.pack("<d", math.nan) + columns[VALUE][8:]


class BoolByteColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[PREFILL] = b"\x02" + columns[PREFILL][1:]


class RaggedColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        lengths, values = columns[PREFIXES]
        columns[PREFIXES] = [struct.pack("<H", 9) + lengths[2:], values]


class MissingColumn(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns.pop()


class StringColumn(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[VALUE] = "0.5"


class StridedMemoryviewColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[VALUE] = memoryview(columns[VALUE] * 2)[::2]  # no msgpack bin: not contiguous


class BytearrayColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[:] = [bytearray(c) if type(c) is bytes else c for c in columns]


class MemoryviewColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[:] = [memoryview(c) if type(c) is bytes else c for c in columns]
        lengths, values = columns[PREFIXES]
        columns[PREFIXES] = [memoryview(lengths), bytearray(values)]


class _Bin(bytes):
    pass


class BytesSubclassColumns(_CandidateColumns):
    def damage(self, columns: list[Any]) -> None:
        columns[VALUE] = _Bin(columns[VALUE])


class _CandidateRows(_HostileOnOneSeed):
    def misbehave(self, record: dict[str, Any]) -> Any:
        rows = rows_view(record)["candidates"]
        return record | {"candidates": [*rows, self.bad_row(list(rows[0]))]}

    def bad_row(self, row: list[Any]) -> Any:
        raise NotImplementedError


class ShortRowRows(_CandidateRows):
    def bad_row(self, row: list[Any]) -> Any:
        return row[:2]


class StringIdRows(_CandidateRows):
    def bad_row(self, row: list[Any]) -> Any:
        return ["7", *row[1:]]


class InfRows(_CandidateRows):
    def bad_row(self, row: list[Any]) -> Any:
        row[VALUE] = -math.inf
        return row


class BytesRows(_CandidateRows):
    def bad_row(self, row: list[Any]) -> Any:
        return b"\x00" * len(row)


COLUMN_GARBAGE = {
    "ShortBinColumns": "candidates.value is 7 bytes, not whole f64 values",
    "LongerColumns": "candidates.value has 2 rows, id has 1",
    "NaNBytesColumns": "candidates.value holds float nan",
    "BoolByteColumns": "candidates.prefill holds a byte other than 0 and 1",
    "RaggedColumns": "candidates.prefixes lengths add up to 9 values, its values bin holds 0",
    "MissingColumn": "candidates has 11 columns, expected 12",
    "StringColumn": "candidates.value is str '0.5', expected a bin of f64 values",
    "StridedMemoryviewColumns": "candidates.value is memoryview",
    "ShortRowRows": "candidates[1]: a row of 2 values, expected 12",
    "StringIdRows": "candidates[1].id is str '7'",
    "InfRows": "candidates[1].value is float -inf",
    "BytesRows": "candidates[1] is bytes",
}
SAME_BYTES = ("BytearrayColumns", "MemoryviewColumns", "BytesSubclassColumns")
