"""Replay: recorded inputs in, every decision checked byte for byte against the trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.impls.raises import RAISE_AT
from tests.impls.skewed import SKEW_AT
from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import COLUMNS as RECORD_COLUMNS
from tracediff.models.specdec.sched.record import rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.project.impls import parse_impl
from tracediff.replay import (
    ERROR,
    MATCH,
    MISMATCH,
    difference_path,
    format_path,
    replay,
    value_at,
)
from tracediff.running.runner import trace_records, write_trace
from tracediff.trace import TraceReader, TraceWriter

COLUMNS = {name: list(cols) for name, cols in RECORD_COLUMNS.items()}
SEED = 12  # quick:12 has 8 requests, retirements and 53 plans


class NeverRetires(ReferenceScheduler):
    """Forgets to report retirements: the first recorded retire record is a mismatch."""

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        super().complete(event, now)
        return []


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("replay")
    scenario = generate(load_profile("quick"), SEED)
    return Path(write_trace(scenario, parse_impl("reference"), str(directory)))


def _index_of(path: Path, predicate: Any) -> int:
    for index, record in enumerate(TraceReader(path).decoded_records(), start=1):
        if predicate(record):
            return index
    raise AssertionError("no such record")


def test_replay_of_the_recording_implementation_matches(recorded: Path) -> None:
    result = replay(str(recorded), parse_impl("reference"))
    assert result.status == MATCH and result.ok
    records = list(TraceReader(recorded).decoded_records())
    assert result.records == len(records)
    assert result.plans == sum(1 for r in records if r["t"] == "plan")
    assert result.decisions == sum(1 for r in records if r["t"] in ("plan", "retire"))


def test_replay_of_a_skewed_implementation_fails_at_the_skewed_plan(recorded: Path) -> None:
    result = replay(str(recorded), parse_impl("tests.impls.skewed:SkewedScheduler"))
    assert result.status == MISMATCH
    mismatch = result.mismatch
    assert mismatch is not None
    assert mismatch.plan == SKEW_AT
    assert mismatch.record_type == "plan"
    assert mismatch.field == "credit_after"
    assert mismatch.index == _index_of(recorded, lambda r: r.get("plan") == SKEW_AT)
    expected, actual = mismatch.values()
    assert actual == pytest.approx(expected + 1.0)


def test_a_missing_retirement_is_a_mismatch_at_the_retire_record(recorded: Path) -> None:
    result = replay(str(recorded), parse_impl("tests.test_replay:NeverRetires"))
    assert result.status == MISMATCH
    assert result.mismatch is not None
    assert result.mismatch.record_type == "retire"
    assert result.mismatch.actual is None
    assert result.mismatch.index == _index_of(recorded, lambda r: r["t"] == "retire")


def test_an_implementation_that_raises_is_an_error_at_its_plan(recorded: Path) -> None:
    result = replay(str(recorded), parse_impl("tests.impls.raises:RaisingScheduler"))
    assert result.status == ERROR
    assert result.error_plan == RAISE_AT
    assert "deliberate failure" in result.message


def test_replay_uses_only_recorded_events_never_the_simulator(
    recorded: Path, tmp_path: Path
) -> None:
    # A live engine's trace: the same records, but the header's engine truth says nothing
    # about what happened. Re-simulating would produce other completions; replay must not.
    reader = TraceReader(recorded)
    header = dict(reader.header)
    scenario = dict(header["scenario"])
    scenario["truth"] = dict(scenario["truth"], copy_match=0.0, duration_drift=0.9)
    header["scenario"] = scenario
    live = tmp_path / "live.trace"
    with TraceWriter(live, header) as writer:
        for _index, _offset, payload in reader.records():
            writer.write_record(payload)
    assert replay(str(live), parse_impl("reference")).status == MATCH


def test_until_stops_at_the_plan_and_keeps_the_state_before_it(recorded: Path) -> None:
    result = replay(str(recorded), parse_impl("reference"), until=4, want_state=True)
    assert result.status == MATCH and result.stopped
    assert result.plan_record is not None and result.plan_record["plan"] == 4
    assert result.state is not None and result.state["plan"] == 3
    assert result.state_at == "before plan 4"
    assert {"requests", "submitted", "table", "credit"} <= set(result.state)


def test_cli_replay_exit_codes_and_mismatch_report(recorded: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["replay", str(recorded), "--impl", "reference"])
    assert ok.exit_code == 0, ok.output
    assert "identical" in ok.output
    bad = runner.invoke(
        main, ["replay", str(recorded), "--impl", "tests.impls.skewed:SkewedScheduler"]
    )
    assert bad.exit_code == 1, bad.output
    index = _index_of(recorded, lambda r: r.get("plan") == SKEW_AT)
    assert f"MISMATCH at record {index} (plan {SKEW_AT}, plan record)" in bad.output
    assert f"plan {SKEW_AT}" in bad.output
    assert "credit_after" in bad.output
    assert f"--until {SKEW_AT} --state" in bad.output


def test_cli_until_state_renders_the_state(recorded: Path) -> None:
    result = CliRunner().invoke(main, ["replay", str(recorded), "--until", "4", "--state"])
    assert result.exit_code == 0, result.output
    assert "identical up to plan 4" in result.output
    assert "reference before plan 4" in result.output
    for title in ("requests (", "acceptance: survival", "rounds in flight", "packed round table"):
        assert title in result.output


def test_cli_until_json(recorded: Path) -> None:
    result = CliRunner().invoke(main, ["replay", str(recorded), "--until", "4", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["format"] == "tracediff-replay"
    assert data["status"] == MATCH and data["stopped"]
    assert data["state"]["plan"] == 3
    assert data["plan_record"]["plan"] == 4


def test_cli_state_of_a_mismatch_is_before_the_mismatching_plan(recorded: Path) -> None:
    result = CliRunner().invoke(
        main,
        [
            "replay",
            str(recorded),
            "--impl",
            "tests.impls.skewed:SkewedScheduler",
            "--state",
            "--json",
        ],
    )
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["mismatch"]["plan"] == SKEW_AT
    assert data["mismatch"]["keys"] == ["credit_after"]
    assert data["state_at"] == f"before plan {SKEW_AT}"
    assert data["state"]["plan"] == SKEW_AT - 1


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--until", "9999"], "has no plan 9999"),
        (["--until", "0"], "--until must be"),
        (["--impl", "bogus"], "unknown implementation 'bogus'"),
    ],
)
def test_cli_bad_input_exits_2(recorded: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(main, ["replay", str(recorded), *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_cli_corrupt_trace_exits_2(recorded: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.trace"
    data = recorded.read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    result = CliRunner().invoke(main, ["replay", str(broken)])
    assert result.exit_code == 2
    assert "broken.trace" in result.output and "truncated" in result.output


def test_difference_path_and_column_names() -> None:
    scenario = generate(load_profile("quick"), SEED)
    # replay compares records as rows (read from the file, or the produced record's rows view)
    live = trace_records(scenario, parse_impl("reference"))
    records = [rows_view(r) for r in live if r.get("t") == "plan"]
    record = next(r for r in records if r["round"] and r["round"][6])
    changed = json.loads(json.dumps(record))
    changed["round"][6][0][2] += 1
    path = difference_path(record, changed)
    assert path == ("round", 6, 0, 2)
    assert format_path(path, record, COLUMNS) == "round.lanes[0].prefix"
    assert value_at(changed, path) == record["round"][6][0][2] + 1
    changed = json.loads(json.dumps(record))
    changed["candidates"][1][8] = -1.0
    assert (
        format_path(difference_path(record, changed) or (), record, COLUMNS)
        == "candidates[1].expected"
    )
    assert difference_path(record, json.loads(json.dumps(record))) is None
    # 1 and 1.0 are different bytes in a trace, so they differ here too
    assert difference_path({"a": 1}, {"a": 1.0}) == ("a",)
