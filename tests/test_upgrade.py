"""``tracediff upgrade``: version 1 traces convert losslessly into version 2, or not at all."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.upgrade import file_version, upgrade_trace
from tracediff.project.impls import parse_impl
from tracediff.running.runner import write_trace
from tracediff.trace import BodyDigest, TraceReader, decode, encode, first_difference
from tracediff.trace.codec import PREVIOUS_VERSION

# Recorded by tracediff's version 1 (the reference on quick seed 13: ragged candidates,
# grammar and host-stop lanes, a small verification budget).
V1 = Path(__file__).parent / "data" / "v1-quick-13.tdtrace"


def v1_copy(tmp_path: Path, name: str = "old.tdtrace") -> Path:
    target = tmp_path / name
    shutil.copyfile(V1, target)
    return target


def test_the_fixture_is_a_version_1_trace() -> None:
    assert file_version(str(V1)) == PREVIOUS_VERSION
    reader = TraceReader(V1, version=PREVIOUS_VERSION)
    assert reader.header["version"] == 1 and "types" not in reader.header


def test_upgrade_gives_the_bytes_a_fresh_recording_gives(tmp_path: Path) -> None:
    out = tmp_path / "new.tdtrace"
    done = upgrade_trace(str(V1), str(out))
    assert done.converted and done.records > 100
    assert done.new_bytes < done.old_bytes / 3  # typed columns in a deflate stream
    reader = TraceReader(out)
    scenario = Scenario.from_dict(reader.header["scenario"])
    fresh = write_trace(scenario, parse_impl("reference"), str(tmp_path), str(tmp_path / "f"))
    assert first_difference(out, fresh) is None
    assert reader.verify() == TraceReader(fresh).verify() == done.new_digest
    provenance = reader.provenance
    assert provenance is not None
    assert provenance["upgraded_from"] == {"version": 1, "digest": done.old_digest}


def test_upgrade_in_place_and_a_current_trace_is_left_alone(tmp_path: Path) -> None:
    path = v1_copy(tmp_path)
    result = CliRunner().invoke(main, ["upgrade", str(path)])
    assert result.exit_code == 0, result.output
    assert "version 1 -> 2" in result.output
    assert file_version(str(path)) == 2
    before = path.read_bytes()
    again = CliRunner().invoke(main, ["upgrade", str(path)])
    assert again.exit_code == 0 and "already version 2, left as it is" in again.output
    assert path.read_bytes() == before


def test_readers_refuse_version_1_and_name_the_upgrade(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["show", str(V1)])
    assert result.exit_code == 2
    assert "trace format version 1" in result.output and "tracediff upgrade" in result.output


def _v1_bytes(header: dict[str, Any], records: list[dict[str, Any]]) -> bytes:
    """A version 1 file: uncompressed frames, as tracediff 1 wrote them."""

    def frame(kind: bytes, payload: bytes) -> bytes:
        return struct.pack(">cII", kind, len(payload), zlib.crc32(payload)) + payload

    digest = BodyDigest()
    head = encode(header)
    digest.add_header(head)
    body = [encode(r) for r in records]
    for payload in body:
        digest.add_record(payload)
    end = encode({"records": len(body), "digest": digest.hexdigest()})
    return (
        b"TDTRACE\n"
        + struct.pack(">HH", 1, 0)
        + frame(b"H", head)
        + b"".join(frame(b"R", p) for p in body)
        + frame(b"E", end)
    )


def _v1_records() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    reader = TraceReader(V1, version=PREVIOUS_VERSION)
    records = [decode(payload) for _i, _o, payload in reader.records()]
    return reader.header, records


def test_a_value_its_column_cannot_hold_refuses_the_file_and_writes_nothing(
    tmp_path: Path,
) -> None:
    header, records = _v1_records()
    plan = next(r for r in records if r["t"] == "plan" and r["candidates"])
    plan["candidates"][0][2] = 70_000  # cohort is an i16 column
    path = tmp_path / "bad.tdtrace"
    path.write_bytes(_v1_bytes(header, records))
    before = path.read_bytes()
    result = CliRunner().invoke(main, ["upgrade", str(path)])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line
    assert "candidates[0].cohort is int 70000" in line and "does not convert" in line
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tdtrace"]


def test_a_version_1_file_that_breaks_the_schema_is_refused(tmp_path: Path) -> None:
    header, records = _v1_records()
    completion = next(r for r in records if r["t"] == "completion")
    completion["round"] = 10_000  # a round never planned
    path = tmp_path / "bad.tdtrace"
    path.write_bytes(_v1_bytes(header, records))
    result = CliRunner().invoke(main, ["upgrade", str(path), "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "not in flight" in result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{d}/a.tdtrace", "{d}/b.tdtrace", "-o", "{d}/c"], "-o/--output takes one TRACE"),
        (["{d}/missing.tdtrace"], "cannot be read"),
    ],
)
def test_bad_command_lines(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["upgrade", *(a.format(d=tmp_path) for a in args)])
    assert result.exit_code == 2 and message in result.output
