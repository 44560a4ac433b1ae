"""Self-check: an implementation that decides differently on a second run is flagged."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, ClassVar

from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.project.impls import parse_impl
from tracediff.running.selfcheck import (
    DETERMINISTIC,
    ERROR,
    NONDETERMINISTIC,
    TIMEOUT,
    self_check,
    self_check_scenario,
)

LEAKY = "tests.test_selfcheck:LeakyScheduler"
RANDOM = "tests.test_selfcheck:RandomScheduler"


class LeakyScheduler(ReferenceScheduler):
    """Keeps a cache in a class attribute: a second instance starts with the first one's
    leftovers (a module-level cache keyed by something that is not the scenario)."""

    _plans_seen: ClassVar[dict[int, int]] = {}

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        seen = self._plans_seen.get(record["plan"], 0)
        self._plans_seen[record["plan"]] = seen + 1
        if seen and record["plan"] == 4:
            record["credit_after"] = record["credit_after"] + seen
        return record


class RandomScheduler(ReferenceScheduler):
    """Breaks a tie with the process-wide random generator (no seed): varies run to run."""

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        if record["plan"] == 6:
            record["refresh"] = random.randrange(1 << 30)
        return record


def _scenario(seed: int = 12) -> Any:
    return generate(load_profile("quick"), seed)


def test_reference_is_deterministic() -> None:
    result = self_check_scenario(_scenario(), parse_impl("reference"))
    assert result.status == DETERMINISTIC
    assert result.digests[0] == result.digests[1]
    assert result.plans > 0


def test_state_leaking_between_instances_is_nondeterminism_at_its_plan() -> None:
    result = self_check_scenario(_scenario(), parse_impl(LEAKY))
    assert result.status == NONDETERMINISTIC
    assert result.digests[0] != result.digests[1]
    assert result.plan == 4 and result.record_type == "plan"
    assert result.divergence is not None and result.divergence > 0


def test_unseeded_randomness_is_nondeterminism() -> None:
    result = self_check_scenario(_scenario(), parse_impl(RANDOM))
    assert result.status == NONDETERMINISTIC and result.plan == 6


def test_a_deterministic_failure_is_an_error_not_nondeterminism() -> None:
    result = self_check_scenario(_scenario(), parse_impl("tests.impls.raises:RaisingScheduler"))
    assert result.status == ERROR
    assert "deliberate failure" in result.message


def test_summary_separates_implementations_and_workers_agree() -> None:
    scenarios = [_scenario(seed) for seed in (0, 12)]
    specs = (parse_impl("reference"), parse_impl(RANDOM))
    summary = self_check(scenarios, specs, jobs=2)
    assert not summary.ok
    assert {r.impl for r in summary.nondeterministic} == {RANDOM}
    statuses = {(r.seed, r.impl): r.status for r in summary.results}
    assert statuses[(12, "reference")] == DETERMINISTIC
    assert summary.to_dict()["nondeterministic"] == len(summary.nondeterministic)


def test_cli_selfcheck(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(main, ["selfcheck", "--seeds", "0,12", "--impl", "reference", "-j", "1"])
    assert ok.exit_code == 0, ok.output
    assert "deterministic" in ok.output
    out = tmp_path / "selfcheck.json"
    bad = runner.invoke(
        main, ["selfcheck", "--seeds", "12", "--impl", LEAKY, "-j", "1", "--json", str(out)]
    )
    assert bad.exit_code == 1, bad.output
    assert "NONDETERMINISTIC" in bad.output and "quick:12" in bad.output
    data = json.loads(out.read_text())
    assert data["format"] == "tracediff-selfcheck" and data["nondeterministic"] == 1


def test_run_self_check_reports_nondeterminism_and_exits_1(tmp_path: Path) -> None:
    out = tmp_path / "summary.json"
    args = ["run", "--seeds", "3", "-j", "1", "--impl", "reference", "--impl", RANDOM]
    result = CliRunner().invoke(main, [*args, "--self-check", "--json", str(out)])
    assert result.exit_code == 1, result.output
    data = json.loads(out.read_text())
    assert data["self_check"]["nondeterministic"] >= 1
    plain = CliRunner().invoke(main, ["run", "--seeds", "3", "-j", "1", "--self-check"])
    assert plain.exit_code == 0, plain.output


class SlowFirstScheduler(ReferenceScheduler):
    """Stalls in its first plan the first time it is built in a process, never after."""

    built: ClassVar[int] = 0

    def __init__(self, scenario: Any) -> None:
        super().__init__(scenario)
        type(self).built += 1
        self._stall = type(self).built == 1

    def plan(self, now: int) -> dict[str, Any]:
        if self._stall:
            self._stall = False
            time.sleep(10)  # the time limit interrupts it
        return super().plan(now)


def test_a_run_that_times_out_where_the_other_did_not_is_a_timeout_not_nondeterminism() -> None:
    SlowFirstScheduler.built = 0
    spec = parse_impl("tests.test_selfcheck:SlowFirstScheduler")
    result = self_check_scenario(_scenario(), spec, timeout_s=0.5)
    assert result.status == TIMEOUT, result
    assert "first run: timeout, second run: ok" in result.message
