"""Protocol version 2 (docs/protocol.md, "Version 2"): the harness writes a step's requests
at once, a ``plan`` may carry a ``count``, and every reply is still read, checked and blamed
one request at a time. Version 1 keeps working on either side.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.impls.misbehave import BAD_SEED
from tracediff.models.specdec import external
from tracediff.models.specdec.external import ExecFactory
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.process import pipes
from tracediff.project.impls import parse_impl
from tracediff.running.record import Recording, drive, start
from tracediff.running.runner import ERROR, IDENTICAL, run_scenario

ROOT = Path(__file__).resolve().parents[1]
SERVE = [sys.executable, "-m", "tracediff.models.specdec.serve", "reference"]
OLD = f"exec:{sys.executable} {ROOT / 'tests' / 'impls' / 'old_server.py'} reference"
MISBEHAVE = f"exec:{sys.executable} {ROOT / 'tests' / 'impls' / 'misbehave.py'}"


def _quick(seed: int) -> Scenario:
    return generate(load_profile("quick"), seed)


def _digest(scenario: Scenario, scheduler: Any) -> str:
    recording = Recording(drive(scenario, scheduler))
    for _ in recording:
        pass
    return recording.hexdigest()


def _reference_digest(scenario: Scenario) -> str:
    recording = Recording(start(scenario, parse_impl("reference")))
    for _ in recording:
        pass
    return recording.hexdigest()


def test_the_harness_offers_2_and_1_and_a_served_implementation_takes_2() -> None:
    scheduler = ExecFactory("served", SERVE)(_quick(0))
    assert scheduler.process.version == 2
    scheduler.process.close()


def test_a_step_is_one_write_and_a_plan_count_fills_the_queue() -> None:
    scenario = _quick(86)  # 8 requests, queue depth 2: the first step plans three times
    assert scenario.params.queue_depth == 2
    scheduler = ExecFactory("served", SERVE)(scenario)
    posted: list[list[tuple[str, int]]] = []
    post = scheduler.process.post

    def recording_post(messages: list[dict[str, Any]], ahead: list[Any]) -> None:
        posted.append([(m["type"], m.get("count", 1)) for m in messages])
        post(messages, ahead)

    scheduler.process.post = recording_post  # type: ignore[method-assign]
    assert _digest(scenario, scheduler) == _reference_digest(scenario)
    assert ("plan", 3) in posted[0]
    assert any(len(step) > 1 and step[0][0] == "complete" for step in posted)
    scheduler.process.close()


def test_an_implementation_that_speaks_only_version_1_still_matches() -> None:
    specs = (parse_impl("reference"), parse_impl(f"old={OLD}"))
    for seed in (6, 48, 86):
        assert run_scenario(_quick(seed), specs).status == IDENTICAL
    old = ExecFactory("old", external.parse_command(OLD))(_quick(0))
    assert old.process.version == 1
    old.process.close()


def test_a_harness_that_offers_only_version_1_is_answered_in_version_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(external, "PROTOCOL_VERSIONS", (1,))
    scenario = _quick(86)
    scheduler = ExecFactory("served", SERVE)(scenario)
    assert scheduler.process.version == 1
    assert _digest(scenario, scheduler) == _reference_digest(scenario)
    scheduler.process.close()


def test_a_scenario_stopped_inside_a_step_leaves_the_process_ready_for_the_next() -> None:
    factory = ExecFactory("served", SERVE)
    scenario = _quick(86)
    scheduler = factory(scenario)
    records = drive(scenario, scheduler)
    for record in records:
        if record.get("t") == "completion":
            break  # the step's requests are written, their replies not read
    process = scheduler.process
    assert process._ahead
    del records, scheduler
    gc.collect()  # the scenario is over: its process goes back to the factory
    other = _quick(87)
    again = factory(other)
    assert again.process is process and not process._ahead
    assert _digest(other, again) == _reference_digest(other)
    process.close()


def _found(spec: str) -> tuple[str, int | None, str]:
    result = run_scenario(_quick(BAD_SEED), (parse_impl("reference"), parse_impl(spec)))
    return result.status, result.plan, result.message


def test_an_error_on_a_request_sent_ahead_is_blamed_on_it_as_under_version_1(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    status, plan, message = _found(f"bad={MISBEHAVE} complete")
    assert status == ERROR
    assert "bad reported an error on the 'complete' request" in message
    assert "misbehave: refusing the completion of round" in message
    # the process answered the requests sent after it and serves the next scenario
    after = run_scenario(
        _quick(BAD_SEED + 1), (parse_impl("reference"), parse_impl(f"bad={MISBEHAVE} complete"))
    )
    assert after.status == IDENTICAL
    monkeypatch.setattr(external, "PROTOCOL_VERSIONS", (1,))
    external._FACTORIES.clear()  # a fresh process, which hears only version 1
    assert _found(f"bad={MISBEHAVE} complete") == (status, plan, message)


def test_a_step_that_cannot_be_written_fails_its_first_call_not_the_announcement() -> None:
    class _Gone:
        version = 2

        def post(self, messages: list[dict[str, Any]], ahead: list[Any]) -> None:
            raise external.ExternalFault("x exited with status 1 before reading the 'plan' request")

    scheduler = external.ExternalScheduler(_Gone())  # type: ignore[arg-type]
    scheduler.begin_step(5, [], 2)  # the driver's announcement never raises
    with pytest.raises(external.ExternalFault, match="before reading the 'plan' request"):
        scheduler.plan(5)  # counted as the plan that failed, as under version 1


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux and two CPUs",
)
def test_a_worker_and_its_process_share_one_cpu_while_it_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    allowed = os.sched_getaffinity(0)
    monkeypatch.setenv(pipes.PIN_ENV, "1")
    scheduler = ExecFactory("served", SERVE)(_quick(0))
    pid = scheduler.process.popen.pid
    try:
        mine = os.sched_getaffinity(0)
        free = [cpu for cpu in allowed if (claim := pipes._claim(cpu)) and not claim.close()]
        if len(mine) == 1:  # pinned to a CPU it claimed, which its process shares
            assert os.sched_getaffinity(pid) == mine and not set(free) & mine
        else:  # other workers hold every CPU: nothing pinned
            assert mine == allowed and not free
    finally:
        scheduler.process.close()
    assert os.sched_getaffinity(0) == allowed  # the last process closed: the CPU set back
    monkeypatch.setenv(pipes.PIN_ENV, "0")
    unpinned = ExecFactory("served", SERVE)(_quick(0))
    try:
        assert os.sched_getaffinity(0) == allowed
        assert os.sched_getaffinity(unpinned.process.popen.pid) == allowed
    finally:
        unpinned.process.close()


@pytest.mark.parametrize("versions", [(1, 2), (1,)])
def test_a_reply_too_many_is_the_finding_of_the_scenario_that_sent_it(
    monkeypatch: pytest.MonkeyPatch, versions: tuple[int, ...]
) -> None:
    """Its 'ok' after the last plan of BAD_SEED was read by the next scenario's reset,
    which then blamed a later, innocent scenario (or, on the last scenario, nobody)."""
    monkeypatch.setattr(external, "PROTOCOL_VERSIONS", versions)
    external._FACTORIES.clear()
    specs = (parse_impl("reference"), parse_impl(f"bad={MISBEHAVE} extra"))
    reference = run_scenario(_quick(BAD_SEED), specs[:1])
    result = run_scenario(_quick(BAD_SEED), specs)
    assert result.status == ERROR and result.failed_impl == "bad"
    assert result.plan == reference.impls[0].plans  # pinned to the scenario's last plan
    assert "bad sent a 'ok' message after the scenario's last reply" in result.message
    assert "a reply too many" in result.message
    for seed in (BAD_SEED + 1, BAD_SEED + 2):  # the process was replaced: nothing left over
        assert run_scenario(_quick(seed), specs).status == IDENTICAL
    external._FACTORIES.clear()


def test_bytes_unasked_when_a_process_is_taken_retire_it_unread() -> None:
    factory = ExecFactory("served", SERVE)
    scheduler = factory(_quick(0))
    process = scheduler.process
    os.write(process._in, pipes.frame({"type": "state"}))  # its reply: nobody's
    deadline = time.monotonic() + 10
    while not process._readable.poll(0) and time.monotonic() < deadline:
        time.sleep(0.01)
    del scheduler
    gc.collect()  # the scenario is over: the process goes back, a reply unread
    again = factory(_quick(1))
    assert again.process is not process and process.broken
    assert _digest(_quick(1), again) == _reference_digest(_quick(1))
    again.process.close()
