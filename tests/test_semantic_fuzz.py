"""Traces with valid frames and wrong content: every command answers 0, 1 or 2, never 3.

Each case takes a real trace, decodes it, damages what it holds (a string where a number
belongs, bytes, NaN, a 64-bit integer, a missing key, a row cut short or too long, a record
dropped, duplicated or moved, a completion of another round, a header without its
columns...), and encodes it again with valid frames, checksums and digest, so that only the
content schema (tracediff/models/specdec/schema.py) stands between the damage and the code that
reads it. A share of the cases damages one typed column of a plan's wide table instead
(trace format 2, tracediff/trace/columns.py): a bin truncated or extended, a NaN or infinity
written into a float column, a column dropped or two swapped, a bit flipped. All but the
last two are always wrong, and every command that reads to the damage must refuse them.
One *case* is one command run on one damaged trace: ``show``, ``show --jsonl``,
``show --plan``, ``diff`` (text, json, html) against the undamaged trace, and ``replay``.

Every case must exit 0, 1 or 2 without a traceback; an exit 2 is one line on stderr naming
the file. ``replay`` of a reference trace into the reference implementation may find a
mismatch (a damaged decision, or damaged inputs that change what it decides), but the
reference never *raises* on a trace the schema accepts: damaged inputs are the file's fault.

``TRACEDIFF_SEMANTIC_CASES`` sets the quick run's number of cases (CI: 210);
``TRACEDIFF_FUZZ_LONG=1`` enables the long run (100,000 cases, ``make fuzz-long``), which
prints its figures (cases, exit codes, time) at the end, and every 1,000 cases into the file
``TRACEDIFF_SEMANTIC_PROGRESS`` names, if set.
"""

from __future__ import annotations

import copy
import math
import os
import random
import struct
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import TABLES
from tracediff.project.impls import parse_impl
from tracediff.running.runner import trace_records
from tracediff.trace import encode, read_trace, trace_bytes

CASES = int(os.environ.get("TRACEDIFF_SEMANTIC_CASES", "210"))
LONG_CASES = int(os.environ.get("TRACEDIFF_SEMANTIC_LONG_CASES", "100000"))
LONG_ENABLED = os.environ.get("TRACEDIFF_FUZZ_LONG") == "1"
SEEDS = (4, 8, 40)  # quick-profile scenarios with probes, pruning, refreshes, queue depth 1

HOSTILE: tuple[Any, ...] = (
    "x",
    "",
    "[/bold]",
    b"\x00\xff",
    None,
    True,
    False,
    0,
    -1,
    7,
    8,
    1000,
    2**53 + 1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    math.nan,
    math.inf,
    -math.inf,
    1e308,
    -0.0,
    0.5,
    [],
    [1],
    [[]],
    [[1, 2]],
    {},
    {"a": 1},
    {"t": "plan"},
)


@dataclass(frozen=True)
class Base:
    """One undamaged trace: its decoded parts and the file written from them."""

    name: str
    header: dict[str, Any]
    records: list[dict[str, Any]]
    provenance: dict[str, Any] | None
    path: Path
    plans: tuple[int, ...]


def _bases(directory: Path) -> list[Base]:
    profile = load_profile("quick")
    spec = parse_impl("reference", check=False)
    bases = []
    for seed in SEEDS:
        header, *records = trace_records(generate(profile, seed), spec)
        provenance = {"implementation": "reference", "target": "x", "tracediff": "0"}
        path = directory / f"base-{seed}.trace"
        path.write_bytes(trace_bytes(encode(header), [encode(r) for r in records], provenance))
        assert read_trace(path).records == records
        plans = tuple(r["plan"] for r in records if r["t"] == "plan")
        bases.append(Base(f"seed {seed}", header, records, provenance, path, plans))
    return bases


# -- damage ----------------------------------------------------------------------------------
Path_ = list[Any]


def _paths(value: Any, prefix: Path_) -> Iterator[Path_]:
    """Every position inside a decoded value (its own root included)."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, [*prefix, key])
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, [*prefix, index])


def _parent(root: Any, path: Path_) -> Any:
    for part in path[:-1]:
        root = root[part]
    return root


def _hostile(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(HOSTILE))


def _replace(rng: random.Random, root: Any, path: Path_) -> None:
    _parent(root, path)[path[-1]] = _hostile(rng)


def _nudge(rng: random.Random, root: Any, path: Path_) -> None:
    """A plausible wrong number: the kind of damage only consistency checks can see."""
    parent = _parent(root, path)
    value = parent[path[-1]]
    nudged = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        nudged = value + rng.choice((-100, -2, -1, 1, 2, 3, 9, 1000))
    if nudged is None or (isinstance(nudged, int) and not -(2**63) <= nudged < 2**64):
        nudged = _hostile(rng)  # msgpack holds 64-bit integers: a file cannot hold more
    parent[path[-1]] = nudged


def _delete(rng: random.Random, root: Any, path: Path_) -> None:
    parent = _parent(root, path)
    del parent[path[-1]]


def _grow(rng: random.Random, root: Any, path: Path_) -> None:
    parent = _parent(root, path)
    value = parent[path[-1]]
    if isinstance(value, list):
        value.insert(rng.randint(0, len(value)), copy.deepcopy(rng.choice(value or [0])))
    elif isinstance(value, dict):
        value[rng.choice(("extra", "t", "now", "lanes", "round"))] = _hostile(rng)
    else:
        parent[path[-1]] = [value, value]


MUTATORS: tuple[Callable[[random.Random, Any, Path_], None], ...] = (
    _replace,
    _replace,
    _nudge,
    _nudge,
    _delete,
    _grow,
)


def _damage_tree(rng: random.Random, root: dict[str, Any]) -> None:
    positions = list(_paths(root, []))[1:]  # never the root map itself
    if positions:
        rng.choice(MUTATORS)(rng, root, rng.choice(positions))


# -- typed columns ----------------------------------------------------------------------------
# Bit patterns no f64 column may hold: quiet, signalling and negative NaNs, the infinities.
NON_FINITE = tuple(
    struct.pack("<Q", bits)
    for bits in (0x7FF8000000000000, 0x7FF0000000000001, 0xFFF8000000000000, 0x7FF0000000000000)
) + (struct.pack("<d", -math.inf),)


def _bins(records: list[dict[str, Any]]) -> list[tuple[int, str, int, int | None]]:
    """Every non-empty bin of a typed table: (record, table, column, part of a ragged column)."""
    found: list[tuple[int, str, int, int | None]] = []
    for at, record in enumerate(records):
        if record.get("t") != "plan":
            continue
        for table in TABLES:
            for position, column in enumerate(record[table]):
                if isinstance(column, bytes):
                    if column:
                        found.append((at, table, position, None))
                else:
                    found += [(at, table, position, i) for i, part in enumerate(column) if part]
    return found


def damage_columns(rng: random.Random, records: list[dict[str, Any]]) -> tuple[str, bool]:
    """Damage one typed column of one plan record; (what, whether the damage is always
    wrong, so that every reader must refuse the file)."""
    bins = _bins(records)
    at, table, position, part = rng.choice(bins)
    columns = records[at][table]
    spec = TABLES[table]
    name = f"record {at + 1} {table}.{spec.names[position]}"
    choice = rng.randrange(7)
    if choice == 2:  # a NaN or infinity in a float column
        floats = [b for b in bins if TABLES[b[1]].types[b[2]].floating]
        at, table, position, part = rng.choice(floats)
        columns = records[at][table]
        column = columns[position]
        where = 8 * rng.randrange(len(column) // 8)
        columns[position] = column[:where] + rng.choice(NON_FINITE) + column[where + 8 :]
        return f"record {at + 1} {table}.{TABLES[table].names[position]} non-finite", True
    if choice == 3:
        columns.pop(rng.randrange(len(columns)))
        return f"record {at + 1} {table}: a column dropped", True
    if choice == 4:
        i, j = rng.sample(range(len(columns)), 2)
        columns[i], columns[j] = columns[j], columns[i]
        return f"record {at + 1} {table}: columns {i} and {j} swapped", False
    holder: list[Any] = columns if part is None else columns[position]
    index = position if part is None else part
    data = holder[index]
    if choice == 0:
        holder[index] = data[: rng.randrange(len(data))]
        return f"{name} truncated", True
    if choice == 1:
        holder[index] = data + bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 16)))
        return f"{name} extended", True
    flipped = bytearray(data)
    flipped[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    holder[index] = bytes(flipped)
    return f"{name} a bit flipped", False


def damage(rng: random.Random, base: Base) -> tuple[bytes, str, bool]:
    """A damaged copy of ``base`` with valid framing, a word on what was damaged, and
    whether the damage is always wrong (every reader must refuse it)."""
    header = copy.deepcopy(base.header)
    records = copy.deepcopy(base.records)
    provenance = copy.deepcopy(base.provenance)
    if rng.random() < 0.3:
        what, refused = damage_columns(rng, records)
        data = trace_bytes(encode(header), [encode(r) for r in records], provenance)
        return data, what, refused
    what = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        target = rng.random()
        if target < 0.12:
            what.append("header")
            _damage_tree(rng, header)
        elif target < 0.17 and provenance is not None:
            what.append("provenance")
            _damage_tree(rng, provenance)
        elif target < 0.27 and records:
            what.append("record order")
            at = rng.randrange(len(records))
            choice = rng.randrange(4)
            if choice == 0:
                del records[at]
            elif choice == 1:
                records.insert(at, copy.deepcopy(records[rng.randrange(len(records))]))
            elif choice == 2:
                records.insert(rng.randrange(len(records)), records.pop(at))
            else:
                records.insert(at, {"t": _hostile(rng), "now": _hostile(rng)})
        elif records:
            # completions are what replay feeds the implementation: damage them more often
            completions = [i for i, r in enumerate(records) if r.get("t") == "completion"]
            at = (
                rng.choice(completions)
                if completions and rng.random() < 0.35
                else rng.randrange(len(records))
            )
            what.append(f"record {at + 1} ({records[at].get('t')})")
            _damage_tree(rng, records[at])
    data = trace_bytes(encode(header), [encode(r) for r in records], provenance)
    return data, ", ".join(what), False


# -- commands ---------------------------------------------------------------------------------
def commands(base: Base, damaged: Path, rng: random.Random) -> list[tuple[str, list[str]]]:
    plan = str(rng.choice(base.plans)) if base.plans else "1"
    a, b = str(base.path), str(damaged)
    return [
        ("show", ["show", b]),
        ("show --jsonl", ["show", "--jsonl", b]),
        ("show --plan", ["show", "--plan", plan, b]),
        ("diff", ["diff", b, a]),  # the damaged trace first: its names head the report
        ("diff --format json", ["diff", "--format", "json", a, b]),
        ("diff --format html", ["diff", "--format", "html", b, a]),
        ("replay", ["replay", b, "--impl", "reference"]),
    ]


@dataclass
class Tally:
    cases: int = 0
    codes: Counter[int] | None = None
    by_command: Counter[tuple[str, int]] | None = None

    def __post_init__(self) -> None:
        self.codes = Counter()
        self.by_command = Counter()


# What reads every record up to the damage, so must refuse a damage that is always wrong
# (``show --plan`` may stop before it).
READ_THROUGH = frozenset(
    {"show", "show --jsonl", "diff", "diff --format json", "diff --format html", "replay"}
)


def run_case(
    runner: CliRunner,
    base: Base,
    damaged: Path,
    rng: random.Random,
    what: str,
    tally: Tally,
    refused: bool = False,
) -> None:
    for label, args in commands(base, damaged, rng):
        result = runner.invoke(main, args, catch_exceptions=True)
        code = result.exit_code
        context = f"{label} on {damaged.name} ({base.name}; damaged {what})"
        output = result.output + result.stderr
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{context}: {result.exception!r}"
        )
        assert code in (0, 1, 2), f"{context}: exit {code}: {output[-800:]}"
        if refused and label in READ_THROUGH:
            assert code == 2, f"{context}: exit {code}, the damage is always wrong"
        assert "Traceback" not in output, f"{context}: {output[-800:]}"
        if code == 2:
            lines = result.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), (
                f"{context}: {result.stderr!r}"
            )
            assert damaged.name in lines[0] or base.path.name in lines[0], (
                f"{context}: the message does not name the file: {lines[0]}"
            )
        if label == "replay" and code == 1:
            assert "ERROR: reference raised" not in result.output, (
                f"{context}: replay blamed the implementation for a damaged trace: "
                f"{result.output[-800:]}"
            )
        assert tally.codes is not None and tally.by_command is not None
        tally.codes[code] += 1
        tally.by_command[(label, code)] += 1
        tally.cases += 1


def fuzz(
    directory: Path, cases: int, seed: int, progress: Callable[[Tally], None] | None = None
) -> Tally:
    bases = _bases(directory)
    runner = CliRunner()
    tally = Tally()
    rng = random.Random(seed)
    damaged = directory / "damaged.trace"
    mutation = 0
    while tally.cases < cases:
        case_seed = rng.getrandbits(32)
        case_rng = random.Random(case_seed)
        base = bases[mutation % len(bases)]
        data, what, refused = damage(case_rng, base)
        damaged.write_bytes(data)
        context = f"{what}; case seed {case_seed}"
        run_case(runner, base, damaged, case_rng, context, tally, refused)
        mutation += 1
        if progress is not None and mutation % 143 == 0:  # 143 damaged traces: 1,001 cases
            progress(tally)
    return tally


def report(tally: Tally, seconds: float) -> str:
    assert tally.codes is not None and tally.by_command is not None
    codes = ", ".join(f"exit {c}: {n:,}" for c, n in sorted(tally.codes.items()))
    lines = [f"{tally.cases:,} cases in {seconds:.0f} s ({codes})"]
    labels = sorted({label for label, _ in tally.by_command})
    for label in labels:
        counts = sorted(tally.by_command.items())
        per = ", ".join(f"{code}: {n:,}" for (name, code), n in counts if name == label)
        lines.append(f"  {label}: {per}")
    return "\n".join(lines)


def test_damaged_content_is_exit_2_never_3(tmp_path: Path) -> None:
    tally = fuzz(tmp_path, CASES, seed=12)
    assert tally.codes is not None
    # the damage must reach every answer: refused files, and files whose damage still reads
    assert tally.codes[2] > 0 and tally.codes[0] + tally.codes[1] > 0


@pytest.mark.slow
@pytest.mark.skipif(not LONG_ENABLED, reason="long fuzz run: set TRACEDIFF_FUZZ_LONG=1")
def test_damaged_content_is_exit_2_never_3_long(tmp_path: Path) -> None:
    started = time.monotonic()
    progress_file = os.environ.get("TRACEDIFF_SEMANTIC_PROGRESS")

    def progress(tally: Tally) -> None:
        if progress_file:
            Path(progress_file).write_text(report(tally, time.monotonic() - started) + "\n")

    seed = int(os.environ.get("TRACEDIFF_SEMANTIC_SEED", "1"))
    tally = fuzz(tmp_path, LONG_CASES, seed=seed, progress=progress)
    progress(tally)
    print("\nsemantic fuzz:", report(tally, time.monotonic() - started))
