"""Implementations in another process: the stdio protocol, exec: specs,
tracediff.models.specdec.serve.

The served reference must be byte-identical to the in-process one; a served broken
implementation must be caught as it is in process; a process that speaks garbage, dies or
hangs is a finding (exit 1), never a hang of tracediff.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.impls.misbehave import BAD_AT, BAD_SEED
from tracediff.cli import main
from tracediff.errors import ImplementationError
from tracediff.models.specdec.external import ExecFactory, ExternalFault, parse_command
from tracediff.models.specdec.protocol import (
    MAX_MESSAGE_BYTES,
    ProtocolError,
    frame,
    message_length,
    parse,
)
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import parse_impl
from tracediff.running.explain import explain_many
from tracediff.running.runner import DIVERGED, ERROR, IDENTICAL, TIMEOUT, run_scenario

ROOT = Path(__file__).resolve().parents[1]
SERVE = f"exec:{sys.executable} -m tracediff.models.specdec.serve"
MISBEHAVE = f"exec:{sys.executable} {ROOT / 'tests' / 'impls' / 'misbehave.py'}"
# Every allocation x graph mode at 3 and 8 requests, queue depth 0, and 8 requests at queue
# depths 1 and 2: the quick profile's features at a CI-friendly cost. The whole quick
# profile is `tracediff run --profile quick --impl reference --impl '<SERVE> reference'`.
SERVED_SEEDS = "6..17,48..53,84..89"


def _quick(seed: int):  # type: ignore[no-untyped-def]
    return generate(load_profile("quick"), seed)


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["run", "--no-progress", *args])
    return result.exit_code, result.output


# -- framing -------------------------------------------------------------------------------
def test_a_frame_is_a_big_endian_length_and_one_msgpack_map() -> None:
    data = frame({"type": "plan", "now": 7})
    assert message_length(data[:4]) == len(data) - 4
    assert parse(data[4:]) == {"type": "plan", "now": 7}


@pytest.mark.parametrize(
    "message",
    [{"type": "ok"}, {"type": "retired", "ids": []}, {"type": "retired", "ids": [3, 1]}],
)
def test_the_commonest_replies_parse_as_decoded_and_each_is_a_fresh_object(
    message: dict[str, object],
) -> None:
    # the reply to an arrival and to a completion that retires nothing are recognised by
    # their bytes, not decoded: the result must be what decoding gives, and never shared
    payload = frame(message)[4:]
    first, second = parse(payload), parse(payload)
    assert first == second == message and list(first) == list(message)
    assert first is not second
    if "ids" in first:
        first["ids"].append(99)
        assert parse(payload)["ids"] == message["ids"]


def test_garbage_frames_and_payloads_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError, match="over the"):
        message_length(b"hell")  # "hello world" printed to stdout: 1.7 GB announced
    assert message_length((MAX_MESSAGE_BYTES).to_bytes(4, "big")) == MAX_MESSAGE_BYTES
    with pytest.raises(ProtocolError, match="undecodable"):
        parse(b"\xc1")
    with pytest.raises(ProtocolError, match="string 'type'"):
        parse(frame({"kind": "plan"})[4:])


def test_exec_specs_are_split_like_a_shell_and_checked_before_running() -> None:
    assert parse_command("exec:python -m 'a b'") == ["python", "-m", "a b"]
    spec = parse_impl("native=exec:python -m x")
    assert (spec.name, spec.target) == ("native", "exec:python -m x")
    for bad in ("exec:", "exec:'unclosed", "exec:/no/such/command --flag"):
        with pytest.raises(ImplementationError):
            parse_command(bad)


# -- the served reference --------------------------------------------------------------------
def test_the_served_reference_is_byte_identical_to_the_in_process_one() -> None:
    code, output = _run(
        "--profile", "quick", "--seeds", SERVED_SEEDS, "-j", "1",
        "--impl", "reference", "--impl", f"served={SERVE} reference",
    )  # fmt: skip
    assert code == 0, output
    assert "identical: 24 scenarios" in " ".join(output.split())


def test_one_process_serves_every_scenario_and_a_dead_one_is_replaced() -> None:
    factory = ExecFactory(
        "served", [sys.executable, "-m", "tracediff.models.specdec.serve", "reference"]
    )
    first = factory(_quick(0))
    pid = first.process.popen.pid
    del first  # the scenario is over: its process goes back to the factory
    second = factory(_quick(2))
    assert second.process.popen.pid == pid
    second.process.popen.kill()
    second.process.popen.wait()
    del second
    third = factory(_quick(4))
    assert third.process.popen.pid != pid
    third.process.close()


def test_a_served_implementation_reports_its_state() -> None:
    factory = ExecFactory(
        "served", [sys.executable, "-m", "tracediff.models.specdec.serve", "reference"]
    )
    scenario = _quick(0)
    scheduler = factory(scenario)
    scheduler.arrive(scenario.requests[0], 0)
    state = scheduler.state()
    assert state["plan"] == 0
    assert [r["id"] for r in state["requests"]] == [scenario.requests[0].id]
    scheduler.process.close()


@pytest.mark.parametrize(
    ("broken", "seeds"),
    [
        ("summation:ReversedSumScheduler", "14,15"),
        ("stale_advance:StaleAdvanceScheduler", "49"),
        ("slot_tiebreak:SlotTieBreakScheduler", "13"),
    ],
)
def test_a_served_broken_implementation_is_caught_with_the_same_kind_and_signature(
    broken: str, seeds: str
) -> None:
    reference = parse_impl("reference")
    in_process = parse_impl(f"tests.impls.{broken}")
    served = parse_impl(f"served={SERVE} tests.impls.{broken}")
    found = []
    for spec in (in_process, served):
        work = []
        for seed in (int(s) for s in seeds.split(",")):
            scenario = _quick(seed)
            work.append((scenario, run_scenario(scenario, (reference, spec))))
        divergences = explain_many(work, (reference, spec))
        found.append(
            [
                (r.status, r.divergence, d.kind, d.signature)
                for (_, r), d in zip(work, divergences, strict=True)
            ]
        )
    assert found[0] == found[1]
    assert all(status == DIVERGED for status, *_ in found[0])


# -- misbehaving processes -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "status", "needles"),
    [
        ("garbage", ERROR, ("spoke garbage", "something printing to stdout")),
        ("die", ERROR, ("exited with status 3", "misbehave: giving up at plan 3")),
        ("error", ERROR, ("reported an error", "RuntimeError: misbehave: refusing plan 3")),
    ],
)
def test_a_process_that_speaks_garbage_dies_or_fails_is_an_error_finding(
    mode: str, status: str, needles: tuple[str, ...], tmp_path: Path
) -> None:
    out = tmp_path / "run.json"
    code, output = _run(
        "--profile", "quick", "--seeds", f"0..{BAD_SEED + 1}", "-j", "1", "--explain", "0",
        "--impl", "reference", "--impl", f"bad={MISBEHAVE} {mode}", "--json", str(out),
    )  # fmt: skip
    assert code == 1, output
    results = {r["seed"]: r for r in json.loads(out.read_text())["results"]}
    bad = results.pop(BAD_SEED)
    assert (bad["status"], bad["failed_impl"], bad["plan"]) == (status, "bad", BAD_AT)
    for needle in needles:
        assert needle in bad["message"]
    assert all(r["status"] == IDENTICAL for r in results.values())  # the others went on


def test_a_process_inherits_the_memory_limit(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    code, output = _run(
        "--profile", "quick", "--seeds", str(BAD_SEED), "-j", "1", "--explain", "0",
        "--memory-limit", "400", "--impl", "reference", "--impl", f"bad={MISBEHAVE} hog",
        "--json", str(out),
    )  # fmt: skip
    assert code == 1, output
    (bad,) = json.loads(out.read_text())["results"]
    assert (bad["status"], bad["failed_impl"], bad["plan"]) == (ERROR, "bad", BAD_AT)
    assert "MemoryError" in bad["message"]


def test_a_hanging_process_is_a_timeout_finding_and_the_next_scenario_gets_a_new_one(
    tmp_path: Path,
) -> None:
    out = tmp_path / "run.json"
    code, output = _run(
        "--profile", "quick", "--seeds", f"0..{BAD_SEED + 1}", "-j", "1", "--explain", "0",
        "--timeout", "3", "--impl", "reference", "--impl", f"bad={MISBEHAVE} hang",
        "--json", str(out),
    )  # fmt: skip
    assert code == 1, output
    results = {r["seed"]: r for r in json.loads(out.read_text())["results"]}
    assert results[BAD_SEED]["status"] == TIMEOUT
    assert results[BAD_SEED]["plan"] == BAD_AT
    assert [results[s]["status"] for s in (0, BAD_SEED + 1)] == [IDENTICAL, IDENTICAL]


def test_without_a_time_limit_a_reply_still_has_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEDIFF_EXEC_REPLY_S", "1")
    spec = parse_impl(f"bad={MISBEHAVE} hang")
    result = run_scenario(_quick(BAD_SEED), (parse_impl("reference"), spec))
    assert (result.status, result.plan) == (ERROR, BAD_AT)
    assert "did not answer the 'plan' request within 1 s" in result.message


def test_stderr_is_kept_bounded_and_a_chatty_process_still_matches() -> None:
    spec = parse_impl(f"noisy={MISBEHAVE} noise")
    result = run_scenario(_quick(BAD_SEED), (parse_impl("reference"), spec))
    assert result.status == IDENTICAL


def test_a_process_of_another_protocol_version_is_refused_before_the_run() -> None:
    code, output = _run("--seeds", "0", "--impl", "reference", "--impl", f"{MISBEHAVE} version")
    assert code == 2
    assert "speaks protocol version 99" in output


def test_an_external_fault_is_a_finding_not_a_usage_error() -> None:
    assert ExternalFault("x").exit_code == 1


def test_tracediff_serve_refuses_an_unknown_name_with_exit_2(python: str) -> None:
    import subprocess

    done = subprocess.run(
        [python, "-m", "tracediff.models.specdec.serve", "no-such-impl"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert done.returncode == 2
    assert "unknown implementation" in done.stderr
