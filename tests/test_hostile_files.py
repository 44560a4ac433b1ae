"""Hostile files: traces whose content is wrong, names that would leave their directory.

A trace with valid frames but wrong content is exit 2 with one line naming the file and the
record, for every command that reads it; ``replay`` never blames the implementation for a
damaged input. Names derived from data (a scenario's profile, a profile's name) never make a
command write outside the directory it was given.
"""

from __future__ import annotations

import copy
import errno
import json
import math
import os
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tracediff.cli import main
from tracediff.errors import OutputError
from tracediff.filenames import component, inside
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import TABLES, rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.models.specdec.schema import Schema, record_problem
from tracediff.project.impls import parse_impl
from tracediff.running.runner import RunOptions, run_scenarios, trace_records
from tracediff.trace import encode, trace_bytes

SKEWED = "tests.impls.skewed:SkewedScheduler"
SEED = 4  # one request, probes, pruning: every row kind is present


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


def assert_refused(result: Result, *needles: str) -> str:
    """Exit 2, one line on stderr, no traceback; returns the line."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tracediff: error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _records(seed: int = SEED) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    header, *records = trace_records(
        generate(load_profile("quick"), seed), parse_impl("reference", check=False)
    )
    return header, records


def _write(path: Path, header: dict[str, Any], records: list[dict[str, Any]]) -> str:
    path.write_bytes(trace_bytes(encode(header), [encode(r) for r in records]))
    return str(path)


def _first(records: list[dict[str, Any]], test: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, r in enumerate(records) if test(r))


def _completion(records: list[dict[str, Any]]) -> int:
    return _first(records, lambda r: r["t"] == "completion" and bool(r["lanes"]))


def _with_rows(table: str) -> Callable[[list[dict[str, Any]]], int]:
    """The first plan whose typed ``table`` has rows (its first column is a non-empty bin)."""
    return lambda records: _first(records, lambda r: r["t"] == "plan" and bool(r[table][0]))


_with_candidates = _with_rows("candidates")


def _with_round(records: list[dict[str, Any]]) -> int:
    return _first(records, lambda r: r["t"] == "plan" and bool(r["round"] and r["round"][6]))


def _column(table: str, column: str) -> int:
    return TABLES[table].names.index(column)


def _bin(table: str, column: str, change: Callable[[bytes], Any]) -> Any:
    """Damage one typed column of the first plan whose ``table`` has rows."""

    def damage(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
        at = _with_rows(table)(records)
        columns = records[at][table]
        position = _column(table, column)
        columns[position] = change(columns[position])
        return at + 1

    return damage


def _f64(value: float) -> Callable[[bytes], bytes]:
    """A float column whose first value is ``value`` (a NaN or an infinity)."""
    return lambda data: struct.pack("<d", value) + data[8:]


def _table(table: str, change: Callable[[list[Any]], Any]) -> Any:
    def damage(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
        at = _with_rows(table)(records)
        records[at][table] = change(records[at][table])
        return at + 1

    return damage


def _popped(columns: list[Any]) -> list[Any]:
    return columns[:-1]


def _swapped(columns: list[Any]) -> list[Any]:
    # id (i32) and kind (u8) change places: every bin keeps whole values of neither
    return [columns[1], columns[0], *columns[2:]]


def _ragged_lengths_plus_one(column: list[bytes]) -> list[bytes]:
    lengths, values = column
    return [struct.pack("<H", struct.unpack_from("<H", lengths)[0] + 1) + lengths[2:], values]


def _set(index_of: Callable[[list[dict[str, Any]]], int], *path: Any, value: Any) -> Any:
    def damage(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
        at = index_of(records)
        target: Any = records[at]
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value
        return at + 1

    return damage


def _drop(index_of: Callable[[list[dict[str, Any]]], int], key: str) -> Any:
    def damage(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
        at = index_of(records)
        del records[at][key]
        return at + 1

    return damage


def _accepted_beyond_verified(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
    at = _completion(records)
    lane = records[at]["lanes"][0]
    lane[2] = lane[1] + 1
    return at + 1


def _completion_of_another_round(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
    at = _completion(records)
    records[at]["round"] += 1000
    return at + 1


def _header(change: Callable[[dict[str, Any]], None]) -> Any:
    def damage(header: dict[str, Any], records: list[dict[str, Any]]) -> int:
        change(header)
        return 0

    return damage


# (what is damaged, how, words the one line must hold)
# A wide table (eligible, candidates, pruned, probes, lane_values) is typed columns
# (tracediff/trace/columns.py): the damage of v1's rows (bytes, NaN, a bool for an id, a row cut
# short, a scalar for rows) is done to the equivalent column; round and completions are rows.
DAMAGE: list[tuple[str, Any, str]] = [
    ("a string for a clock", _set(lambda r: 0, "now", value="x"), "now is str 'x'"),
    (
        "a string where a bin belongs",
        _bin("candidates", "value", lambda _: "x"),
        "candidates.value is str 'x', expected a bin of f64 values",
    ),
    (
        "an int where a bin belongs",
        _bin("candidates", "id", lambda _: 7),
        "candidates.id is int 7, expected a bin of i32 values",
    ),
    (
        "a boolean for the ids",
        _bin("candidates", "id", lambda _: True),
        "candidates.id is bool True, expected a bin of i32 values",
    ),
    (
        "a list where a bin belongs (v1 rows)",
        _bin("candidates", "value", lambda _: [0.5]),
        "candidates.value is list [0.5], expected a bin of f64 values",
    ),
    ("NaN value", _bin("candidates", "value", _f64(math.nan)), "candidates.value holds float nan"),
    (
        "infinite value",
        _bin("candidates", "value", _f64(math.inf)),
        "candidates.value holds float inf",
    ),
    (
        "NaN in a survival curve",
        _bin("eligible", "curve", _f64(-math.nan)),
        "eligible.curve holds float nan",
    ),
    (
        "a bool column byte 2",
        _bin("candidates", "prefill", lambda data: b"\x02" + data[1:]),
        "candidates.prefill holds a byte other than 0 and 1 in a bool column",
    ),
    (
        "a bin cut short",
        _bin("candidates", "id", lambda data: data[:-1]),
        "not whole i32 values",
    ),
    (
        "a bin one row longer",
        _bin("candidates", "value", lambda data: data + data[:8]),
        "candidates.value has 2 rows, id has 1",
    ),
    (
        "a ragged column whose lengths do not add up",
        _bin("candidates", "prefixes", _ragged_lengths_plus_one),
        "candidates.prefixes lengths add up to",
    ),
    (
        "a ragged column as one bin",
        _bin("candidates", "prefixes", lambda column: column[1]),
        "candidates.prefixes is bytes",
    ),
    (
        "ragged lengths of an odd size",
        _bin("candidates", "prefixes", lambda column: [column[0] + b"\x00", column[1]]),
        "candidates.prefixes lengths are 3 bytes, not whole u16 values",
    ),
    ("a column missing", _table("candidates", _popped), "candidates has 11 columns, expected 12"),
    (
        "columns swapped",
        _table("candidates", _swapped),
        "candidates.id is 1 bytes, not whole i32 values",
    ),
    (
        "a column too many",
        _table("pruned", lambda cols: [*cols, b""]),
        "pruned has 3 columns, expected 2",
    ),
    (
        "a scalar for a table",
        _table("pruned", lambda _: 3),
        "pruned is int 3, expected a list of 2 columns",
    ),
    (
        "a table that is a map",
        _table("candidates", lambda cols: dict(zip(TABLES["candidates"].names, cols, strict=True))),
        "candidates is dict",
    ),
    (
        "columns of different row counts",
        _table("lane_values", lambda cols: [cols[0] + cols[0], *cols[1:]]),
        "lane_values.expected has 1 rows, request has 2",
    ),
    ("wrong nesting", _set(_with_round, "round", 6, value=[1, 2]), "round.lanes[0]"),
    ("a completion without lanes", _drop(_completion, "lanes"), "lacks ['lanes']"),
    ("a completion row too long", _set(_completion, "lanes", 0, value=[0] * 7), "7 columns"),
    ("a string in a completion", _set(_completion, "lanes", 0, 1, value="2"), "verified"),
    ("verified beyond the prefix", _set(_completion, "lanes", 0, 1, value=8), "exceeds"),
    ("accepted beyond verified", _accepted_beyond_verified, "exceeds verified"),
    ("a round never planned", _completion_of_another_round, "not in flight"),
    ("an unknown record type", _set(lambda r: 0, "t", value="party"), "record type 'party'"),
    ("no columns in the header", _header(lambda h: h.pop("columns")), "lacks ['columns']"),
    (
        "no lanes columns",
        _header(lambda h: h["columns"].pop("lanes")),
        "columns lacks the row kinds ['lanes']",
    ),
    (
        "a bad scenario",
        _header(lambda h: h["scenario"]["params"].__setitem__("max_lanes", "x")),
        "params.max_lanes is str 'x'",
    ),
    ("another schema version", _header(lambda h: h.__setitem__("version", 9)), "version 9"),
    (
        "a v1 header",
        _header(lambda h: h.__setitem__("version", 1)),
        "record schema version 1; this tracediff reads version 2 "
        "(convert it with `tracediff upgrade`)",
    ),
    ("no types in the header", _header(lambda h: h.pop("types")), "lacks ['types']"),
    (
        "types that are not a map",
        _header(lambda h: h.__setitem__("types", ["i32"])),
        "types is list, expected a map",
    ),
    (
        "types without a table",
        _header(lambda h: h["types"].pop("probes")),
        "types['probes'] is None, expected a list of column types",
    ),
    (
        "an unknown column type",
        _header(lambda h: h["types"]["pruned"].__setitem__(1, "u128")),
        "types['pruned'] declares the unknown column type 'u128'",
    ),
    (
        "a wrong column type",
        _header(lambda h: h["types"]["pruned"].__setitem__(1, "f64")),
        "types['pruned'] is ['i32', 'f64']; this tracediff reads ['i32', 'i32']",
    ),
    (
        "rounds that cost nothing",  # the reference divided by zero: once blamed on it
        _header(lambda h: h["scenario"]["params"].update(base_us=0, lane_us=0, token_us=0)),
        "a round costs time",
    ),
    (
        "a negative batch bucket",  # found by the long semantic fuzz: a division by zero
        _header(lambda h: h["scenario"]["params"]["batch_buckets"].__setitem__(0, -99)),
        "['params.batch_buckets'] must not be negative",
    ),
    (
        "no prior weight",
        _header(lambda h: h["scenario"]["params"].update(prior_weight=0.0)),
        "prior_weight must be above 0",
    ),
    (
        "a 64-bit seed",
        _header(lambda h: h["scenario"].__setitem__("seed", 2**64 - 1)),
        "beyond the ±2**53",
    ),
]


@pytest.fixture(scope="module")
def base() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    return _records()


@pytest.mark.parametrize(("what", "damage", "needle"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_wrong_content_is_one_line_naming_the_file_for_every_reader(
    tmp_path: Path,
    base: tuple[dict[str, Any], list[dict[str, Any]]],
    what: str,
    damage: Any,
    needle: str,
) -> None:
    header, records = copy.deepcopy(base)
    good = _write(tmp_path / "good.trace", *copy.deepcopy(base))
    index = damage(header, records)
    bad = _write(tmp_path / "bad.trace", header, records)
    for args in (
        ["show", bad],
        ["show", "--jsonl", bad],
        ["diff", good, bad] if index == 0 else ["diff", bad, bad],
        ["diff", "--format", "json", bad, bad],
        ["diff", "--format", "html", bad, bad],
        ["replay", bad],
    ):
        line = assert_refused(invoke(args), f"{bad} at", f"record {index}", needle)
        assert "re-record" in line or index == 0 or "scenario" in line, line


def test_a_v1_trace_is_refused_by_every_reader_pointing_at_upgrade(
    tmp_path: Path, base: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    """Framing version 1 in the preamble (the header's record schema version 1 is a case
    of DAMAGE): one line naming the file and the version, and the command that converts it."""
    from tracediff.trace.codec import MAGIC

    good = _write(tmp_path / "good.trace", *copy.deepcopy(base))
    data = bytearray(Path(good).read_bytes())
    data[len(MAGIC) : len(MAGIC) + 2] = struct.pack(">H", 1)
    old = tmp_path / "old.trace"
    old.write_bytes(bytes(data))
    for args in (
        ["show", str(old)],
        ["show", "--jsonl", str(old)],
        ["show", "--plan", "2", str(old)],
        ["diff", good, str(old)],
        ["diff", str(old), good],
        ["diff", "--format", "json", str(old), str(old)],
        ["diff", "--format", "html", good, str(old)],
        ["replay", str(old)],
        ["replay", str(old), "--impl", "optimized", "--json"],
    ):
        assert_refused(
            invoke(args),
            str(old),
            "trace format version 1; this tracediff reads version 2",
            "`tracediff upgrade",
        )


def test_replay_of_corrupt_completion_rows_does_not_blame_the_implementation(
    tmp_path: Path, base: tuple[dict[str, Any], list[dict[str, Any]]]
) -> None:
    header, records = copy.deepcopy(base)
    at = _completion(records)
    records[at]["lanes"][0][1] = 0  # the reference would count 5 acceptances of 0 drafts
    records[at]["lanes"][0][2] = 5
    bad = _write(tmp_path / "bad.trace", header, records)
    line = assert_refused(invoke(["replay", bad, "--json"]), f"record {at + 1}", "accepted 5")
    assert "exceeds verified 0" in line


def test_a_trace_tracediff_wrote_always_reads_back(tmp_path: Path) -> None:
    for seed in (0, 8, 40, 44):
        header, records = _records(seed)
        path = _write(tmp_path / f"t{seed}.trace", header, records)
        assert invoke(["show", path]).exit_code == 0
        assert invoke(["replay", path]).exit_code == 0
    assert all(record_problem(r) is None for r in records)


def test_the_schema_follows_the_record_module() -> None:
    from tracediff.models.specdec.sched.record import COLUMNS

    assert dict(Schema.current().columns) == {k: tuple(v) for k, v in COLUMNS.items()}


class NaNScheduler(ReferenceScheduler):
    """Puts a NaN into the value column of its candidates at plan 2 (column form)."""

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        value = _column("candidates", "value")
        if record["plan"] == 2 and record["candidates"][0]:
            column = record["candidates"][value]
            record["candidates"][value] = struct.pack("<d", math.nan) + column[8:]
        return record


class NaNRowScheduler(ReferenceScheduler):
    """Returns its tables as rows, with a NaN in the value of its first candidate at plan 2."""

    def plan(self, now: int) -> dict[str, Any]:
        record = rows_view(super().plan(now))
        if record["plan"] == 2 and record["candidates"]:
            record["candidates"][0][_column("candidates", "value")] = math.nan
        return record


class TupleScheduler(ReferenceScheduler):
    """Returns its tables as rows, the rows as tuples and its floats as a float subclass:
    the driver packs them into the same bytes."""

    def plan(self, now: int) -> dict[str, Any]:
        record = rows_view(super().plan(now))
        for key in ("eligible", "candidates", "pruned", "probes", "lane_values"):
            record[key] = tuple(
                tuple(_Float(v) if type(v) is float else v for v in row) for row in record[key]
            )
        return record


class _Float(float):
    pass


def test_rows_as_tuples_and_float_subclasses_are_the_same_record() -> None:
    specs = (parse_impl("reference"), parse_impl("tests.test_hostile_files:TupleScheduler"))
    scenarios = [generate(load_profile("quick"), seed) for seed in (SEED, 8)]
    results = run_scenarios(scenarios, RunOptions(impls=specs, jobs=1)).results
    assert [r.status for r in results] == ["identical", "identical"], results[0].message


class StringRetireScheduler(ReferenceScheduler):
    """Returns request ids as strings from complete()."""

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        return [str(r) for r in super().complete(event, now)]  # type: ignore[misc]


@pytest.mark.parametrize(
    ("impl", "needle"),
    [
        ("NaNScheduler", "plan 2: malformed plan record: candidates.value holds float nan"),
        ("NaNRowScheduler", "plan 2: malformed plan record: candidates[0].value is float nan"),
        ("StringRetireScheduler", "complete() returned list"),
    ],
)
def test_a_record_the_schema_refuses_is_the_implementations_finding(impl: str, needle: str) -> None:
    """So that no trace tracediff writes is one it cannot read back."""
    specs = (parse_impl("reference"), parse_impl(f"tests.test_hostile_files:{impl}"))
    scenario = generate(load_profile("quick"), SEED)
    (result,) = run_scenarios([scenario], RunOptions(impls=specs, jobs=1)).results
    assert result.status == "error" and needle in result.message, result.message


# -- names from data stay inside their directory -------------------------------------------------
TRAVERSAL = "../../escaped"


def _scenario_file(tmp_path: Path, profile: str = TRAVERSAL, seed: int = 12) -> Path:
    data = generate(load_profile("quick"), seed).to_dict()
    data["profile"] = profile
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data))
    return path


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def _nothing_escaped(tmp_path: Path, work: Path) -> None:
    outside = {p for p in _files(tmp_path) if work not in p.parents and p.name != "hostile.json"}
    assert not outside, outside


def test_component_and_inside() -> None:
    assert component("quick", 12, "reference") == "quick-12-reference"
    assert component("tests.impls.skewed:SkewedScheduler") == "tests.impls.skewed_SkewedScheduler"
    for hostile in ("../../x", "..", ".", "", "/etc/passwd", "a/../../b", "x\x00y", "é" * 300):
        name = component(hostile)
        assert name and "/" not in name and not name.startswith(".") and len(name) <= 120
    with pytest.raises(ValueError):
        inside("d", "../x")


def test_inside_refuses_a_symbolic_link_leading_out(tmp_path: Path) -> None:
    (tmp_path / "golden").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "golden" / "traces").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OutputError, match="outside"):
        inside(tmp_path / "golden", "traces", "quick-1.trace")


def test_shrink_save_and_traces_stay_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS")  # --save writes where gate reads
    scenario = _scenario_file(tmp_path)
    result = invoke(
        ["shrink", "--scenario", str(scenario), "--impl", "reference", "--impl", SKEWED]
        + ["--save", "--traces", "traces", "--timeout-s", "20", "--signature", "fields"]
    )
    assert result.exit_code == 1, result.output
    saved = list((work / "scenarios" / "regressions").glob("*.json"))
    assert len(saved) == 1 and saved[0].name.startswith("_.._escaped-12-"), saved
    assert {p.name for p in (work / "traces").iterdir()} == {
        "_.._escaped-12-reference.trace",
        "_.._escaped-12-tests.impls.skewed_SkewedScheduler.trace",
    }
    _nothing_escaped(tmp_path, work)


KEPT_REFERENCE = r"escaped-12-[0-9a-f]{8}-reference\.trace$"  # profile, seed, content tag


def test_gate_and_run_artifacts_stay_inside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "a" / "b" / "work"
    corpus = work / "corpus"
    corpus.mkdir(parents=True)
    monkeypatch.chdir(work)
    _scenario_file(tmp_path).rename(corpus / "hostile.json")
    common = ["--impl", "reference", "--impl", SKEWED, "--regressions", "corpus", "-j", "1"]
    (work / "g").mkdir()  # an empty golden directory: no manifest for the profile
    gate = invoke(["gate", *common, "--seeds", "0", "--artifacts", "art", "--golden-dir", "g"])
    assert gate.exit_code == 1, gate.output
    run = invoke(["run", *common, "--seeds", "0", "--artifacts", "run-art", "--no-progress"])
    assert run.exit_code == 1, run.output
    kept = {p.relative_to(work).as_posix() for p in _files(work / "art") | _files(work / "run-art")}
    # the hostile profile name ("../../escaped") is kept, sanitised, inside each directory
    assert any(
        k.startswith("art/regressions/")
        and re.search(r"escaped-12-[0-9a-f]{8}-reference\.trace$", k)
        for k in kept
    ), kept
    assert any(k.startswith("run-art/") and re.search(KEPT_REFERENCE, k) for k in kept), kept
    _nothing_escaped(tmp_path, work)


def test_golden_update_refuses_a_profile_name_that_leaves_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI", raising=False)
    profile = tmp_path / "p.toml"
    profile.write_text('name = "../../x"\nseeds = 1\n')
    result = invoke(["golden", "update", "--profile", str(profile), "--golden-dir", "g"])
    assert_refused(result, "p.toml:1 name", "not a plain name")
    assert not (tmp_path / "g").exists() and not (tmp_path.parent.parent / "x.json.new").exists()


def test_golden_paths_are_plain_names_inside_the_golden_directory(tmp_path: Path) -> None:
    from tracediff.golden import manifest_path, trace_path

    assert manifest_path(tmp_path, TRAVERSAL) == tmp_path / "_.._escaped.json"
    assert trace_path(tmp_path, TRAVERSAL, 3) == tmp_path / "traces" / "_.._escaped-3.trace"


def test_shrink_scenario_does_not_import_what_the_file_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = generate(load_profile("quick"), 12).to_dict()
    data["impls"] = ["reference", "tests.impls.should_never_be_imported:X"]
    path = tmp_path / "f.json"
    path.write_text(json.dumps(data))
    imported: list[str] = []
    import importlib

    real = importlib.import_module

    def spy(name: str, package: str | None = None) -> Any:
        imported.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", spy)
    result = invoke(["shrink", "--scenario", str(path), "--timeout-s", "5"])
    assert_refused(result, "f.json", "confirm with --impl reference --impl tests.impls")
    assert "tests.impls.should_never_be_imported" not in imported


# -- a full disk --------------------------------------------------------------------------------
def test_a_full_disk_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tracediff.atomic

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tracediff.atomic.os, "fsync", full)
    out = tmp_path / "out.trace"
    result = invoke(["record", "--seed", "3", "-o", str(out)])
    assert_refused(result, f"{out}: cannot be written: No space left on device")
    assert not out.exists() and not list(tmp_path.glob(".out.trace.*"))


# -- scenario files -------------------------------------------------------------------------------
def test_a_damaged_scenario_file_is_a_scenario_error_and_nothing_else() -> None:
    """What shrink --scenario, run and gate read from the regression corpus, and what a trace
    header holds: any damage is a ScenarioError naming the field (exit 2), or still a valid
    scenario; nothing else escapes."""
    import random

    from tests.test_semantic_fuzz import _damage_tree
    from tracediff.errors import ScenarioError
    from tracediff.models.specdec.scenario.model import Scenario

    base = generate(load_profile("quick"), 8).to_dict()
    rng = random.Random(12)
    refused = 0
    for _ in range(400):
        data = copy.deepcopy(base)
        for _ in range(rng.choice((1, 1, 2))):
            _damage_tree(rng, data)
        try:
            scenario = Scenario.from_dict(data)
        except ScenarioError as exc:
            refused += 1
            assert "\n" not in str(exc)
            continue
        assert Scenario.from_dict(scenario.to_dict()) == scenario
    assert 0 < refused < 400


def test_the_schema_follows_new_columns_and_row_kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A typed column, a row column or a row kind the model gains is checked by the layout
    the schema is given alone."""
    import tracediff.models.specdec.schema as schema
    from tracediff.models.specdec.sched.record import COLUMNS, PLAN_KEYS
    from tracediff.trace.columns import TableSpec

    _, records = _records()
    monkeypatch.setattr(schema, "PLAN_KEYS", (*PLAN_KEYS, "batches", "window"))
    columns = {name: tuple(cols) for name, cols in COLUMNS.items()}
    columns["candidates"] = (*columns["candidates"], "novelty")
    columns["round"] = (*columns["round"], "label")
    columns["batches"] = ("size", "label")
    columns["window"] = ("start", "end")
    candidates = TABLES["candidates"]
    tables = dict(TABLES)
    tables["candidates"] = TableSpec("candidates", (*candidates.columns, ("novelty", "f64")))
    wider = schema.Schema(columns, tables)
    plan = copy.deepcopy(records[_with_round(records)])
    rows = len(plan["candidates"][0]) // 4
    plan["candidates"].append(struct.pack(f"<{rows}d", *[0.5] * rows))
    plan["round"].append("wide")
    plan["batches"] = [[4, "a"], [8, "b"]]  # a list of rows
    plan["window"] = [0, 10]  # one row
    wider.check(plan)
    plan["candidates"][-1] = struct.pack(f"<{rows}d", *[math.inf] * rows)
    with pytest.raises(schema.SchemaError, match=r"candidates.novelty holds float inf"):
        wider.check(plan)
    plan["candidates"][-1] = b""
    with pytest.raises(schema.SchemaError, match=rf"candidates.novelty has 0 rows, id has {rows}"):
        wider.check(plan)
    plan["candidates"][-1] = struct.pack(f"<{rows}d", *[0.5] * rows)
    plan["batches"] = [[4, "a"], [8]]
    with pytest.raises(schema.SchemaError, match=r"batches\[1\] has 1 columns"):
        wider.check(plan)


def test_names_from_files_are_printed_as_text_not_console_markup(tmp_path: Path) -> None:
    """A profile or an implementation called "[/bold]" once made rich raise (exit 3)."""
    header, records = _records()
    header["scenario"]["profile"] = "[/bold]"
    a = tmp_path / "a.trace"
    a.write_bytes(
        trace_bytes(encode(header), [encode(r) for r in records], {"implementation": "[/x]"})
    )
    records[-1]["now"] += 1
    b = _write(tmp_path / "b.trace", header, records)
    shown = invoke(["show", str(a)])
    assert shown.exit_code == 0 and "[/bold]" in shown.output and "[/x]" in shown.output
    differ = invoke(["diff", str(a), b])
    assert differ.exit_code == 1 and "[/bold]" in differ.output, differ.output
