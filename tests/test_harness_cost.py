"""``tracediff bench --harness``: the harness's cost per plan, and the runner's checks."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.harness_cost import measure_harness
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import CANDIDATES, rows_view
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.project.impls import ImplSpec, load, parse_impl
from tracediff.running.runner import run_scenario


def _scenarios(count: int = 3) -> list[Any]:
    profile = load_profile("quick")
    return [generate(profile, seed) for seed in profile.seeds[:count]]


def test_costs_add_up_and_identical_implementations_store_the_same_bytes() -> None:
    factories = {name: load(parse_impl(name)) for name in ("reference", "optimized")}
    result = measure_harness(_scenarios(), factories)
    reference, optimized = result.costs
    assert reference.plans == optimized.plans > 0
    assert reference.records == optimized.records > reference.plans
    # identical bodies share one digest, hashed once and counted to the first: the others
    # pay none for it
    assert reference.digest_ns > 0 and optimized.digest_ns == 0
    for cost in (reference, optimized):
        assert cost.scenarios == 3
        assert min(cost.plan_ns, cost.check_ns, cost.encode_ns) > 0
        assert cost.harness_ns == cost.encode_ns + cost.digest_ns + cost.compare_ns
        assert math.isclose(cost.share, cost.harness_ns / cost.plan_ns)
        assert cost.share_with_check > cost.share
        # the stored deflate stream is much smaller than the compared body
        assert 0 < cost.stored_bytes < cost.body_bytes / 2
    assert reference.body_bytes == optimized.body_bytes
    assert reference.stored_bytes == optimized.stored_bytes


def test_the_cli_prints_the_table_and_writes_json(tmp_path: Path) -> None:
    out = tmp_path / "h.json"
    result = CliRunner().invoke(
        main,
        ["bench", "--harness", "--profile", "quick", "--seeds", "0..1", "--json", str(out)],
        env={"COLUMNS": "200"},  # a slow machine's wider figures must not wrap the headers
    )
    assert result.exit_code == 0, result.output
    assert "harness / plan()" in result.output and "target: harness within 3%" in result.output
    data = json.loads(out.read_text())
    assert data["version"] == 1
    names = [c["impl"] for c in data["costs"]]
    assert names == ["reference", "optimized"]
    for cost in data["costs"]:
        per_plan = cost["us_per_plan"]
        assert per_plan["harness"] > 0 and cost["body_bytes_per_plan"] > 0


def test_profile_options_need_harness() -> None:
    result = CliRunner().invoke(main, ["bench", "--profile", "quick"])
    assert result.exit_code == 2 and "--profile and --seeds go with --harness" in result.output


class InfiniteDuration(ReferenceScheduler):
    """Records an infinite expected value in its first candidate once there are lanes."""

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        at = CANDIDATES.names.index("expected")
        column = record["candidates"][at]
        if column and rows_view(record)["eligible"]:
            record["candidates"][at] = struct.pack("<d", math.inf) + column[8:]
        return record


def test_the_runner_checks_the_first_implementation_and_any_differing_record() -> None:
    """The runner skips the schema check only for bytes equal to a record it checked: a
    malformed record is caught whether its implementation comes first or second."""
    scenario = _scenarios(4)[3]
    bad = ImplSpec("bad", "tests.test_harness_cost:InfiniteDuration")
    for specs in ((bad, parse_impl("reference")), (parse_impl("reference"), bad)):
        result = run_scenario(scenario, specs)
        assert result.status == "error", result
        assert result.failed_impl == "bad"
        assert "candidates.expected holds float inf" in result.message
