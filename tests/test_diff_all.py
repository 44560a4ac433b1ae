"""``tracediff diff --all``: every difference to the traces' ends, grouped by field."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import parse_impl
from tracediff.running.runner import write_trace

STALE = "tests.impls.stale_advance:StaleAdvanceScheduler"


def _traces(tmp_path: Path) -> tuple[str, str]:
    scenario = generate(load_profile("quick"), 37)
    a = write_trace(scenario, parse_impl("reference"), str(tmp_path), str(tmp_path / "a.trace"))
    b = write_trace(scenario, parse_impl(STALE), str(tmp_path), str(tmp_path / "b.trace"))
    return a, b


def test_diff_all_lists_every_differing_field_with_counts(tmp_path: Path) -> None:
    a, b = _traces(tmp_path)
    done = CliRunner().invoke(main, ["diff", a, b, "--all", "--format", "json"])
    assert done.exit_code == 1, done.output
    report = json.loads(done.output)
    fields = {f["field"]: f for f in report["fields"]}
    # the first difference, as the explanation names it, and everything after it
    lanes = fields["plan: round.lanes[*].prefix"]
    assert lanes["kind"] == "decision" and lanes["examples"][0]["plan"] == 22
    assert lanes["examples"][0]["at"] == "plan: round.lanes[0].prefix"
    assert (lanes["examples"][0]["a"], lanes["examples"][0]["b"]) == (5, 7)
    assert fields["plan: candidates[*].expected"]["records"] > 1  # counted in every record
    assert report["records"][0] != report["records"][1]
    longer = "B" if report["records"][1] > report["records"][0] else "A"
    assert any(f.endswith(f"record only in {longer}") for f in fields)
    assert report["differing_records"] == report["detailed_records"] > 1
    text = CliRunner().invoke(main, ["diff", a, b, "--all"], env={"COLUMNS": "200"})
    assert text.exit_code == 1
    flat = " ".join(text.output.split())
    assert "every difference, by field" in flat and "round.lanes[*].prefix" in flat


def test_diff_all_of_equal_traces_is_exit_0_and_refuses_html(tmp_path: Path) -> None:
    a, _b = _traces(tmp_path)
    same = CliRunner().invoke(main, ["diff", a, a, "--all"])
    assert same.exit_code == 0 and "identical" in same.output
    html = CliRunner().invoke(main, ["diff", a, a, "--all", "--format", "html"])
    assert html.exit_code == 2 and "--all writes text or json" in html.output
