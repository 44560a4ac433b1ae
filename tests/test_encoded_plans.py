"""A golden check's first pass digests the plan bytes an implementation process sent
(tracediff.model.Encoded) instead of decoding, checking and encoding each record again; an
implementation whose bytes are not tracediff's canonical ones still matches, on the second
pass, and nothing but that first pass ever trusts such bytes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.golden.digest import _digest, digest_scenario
from tracediff.golden.manifest import read_manifest
from tracediff.model import Encoded
from tracediff.models.specdec.protocol import parse, parse_plan
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.record import PLAN_KEYS
from tracediff.project.impls import parse_impl
from tracediff.running.record import Recording, drive, instance, keep_decision_bytes, start
from tracediff.running.runner import IDENTICAL, run_scenario
from tracediff.trace import decode, encode

ROOT = Path(__file__).resolve().parents[1]
SERVED = f"served=exec:{sys.executable} -m tracediff.models.specdec.serve optimized"
LOOSE = f"loose=exec:{sys.executable} {ROOT / 'tests' / 'impls' / 'misbehave.py'} loose"
SEEDS = (0, 1)


def _quick(seed: int) -> Scenario:
    return generate(load_profile("quick"), seed)


def _golden() -> dict[int, str]:
    return {e.seed: e.digest for e in read_manifest(ROOT / "golden" / "quick.json").scenarios}


def _digest_of(records: object) -> str:
    recording = Recording(records)  # type: ignore[arg-type]
    for _ in recording:
        pass
    return recording.hexdigest()


def _asked(scenario: Scenario, spec: object) -> object:
    impl = instance(scenario, spec)  # type: ignore[arg-type]
    keep_decision_bytes(impl)
    return impl


def test_a_process_hands_over_the_bytes_it_sent_only_when_asked() -> None:
    scenario = _quick(0)
    spec = parse_impl(SERVED)
    asked = instance(scenario, spec)
    keep_decision_bytes(asked)
    plans = [r for r in drive(scenario, asked, check=False) if r.get("t") == "plan"]
    assert plans and all(type(r) is Encoded for r in plans)
    # canonical bytes from a canonical encoder: exactly what tracediff would write; of
    # them, only the fields the driver and the recording read are decoded
    for record in plans:
        full = decode(record.payload)
        assert encode(full) == record.payload and tuple(full) == PLAN_KEYS
        assert dict(record) == {key: full[key] for key in ("t", "plan", "round")}
    fast = _digest_of(drive(scenario, _asked(scenario, spec), check=False))
    assert fast == _digest_of(start(scenario, parse_impl("reference"))) == _golden()[0]
    unasked = [r for r in drive(scenario, instance(scenario, spec)) if r.get("t") == "plan"]
    assert unasked and not any(type(r) is Encoded for r in unasked)


def test_other_bytes_for_the_same_records_match_on_the_second_pass() -> None:
    golden = _golden()
    spec = parse_impl(LOOSE)
    for seed in SEEDS:
        scenario = _quick(seed)
        first = _digest(scenario, spec, None, check=False)
        assert first.status == "ok" and first.digest != golden[seed]  # its own bytes
        found = digest_scenario(scenario, spec, expected=golden[seed])
        assert found.status == "ok" and found.digest == golden[seed]
        # a run compares what tracediff encodes: the same trace as the reference's
        assert run_scenario(scenario, (parse_impl("reference"), spec)).status == IDENTICAL


def test_golden_check_passes_an_implementation_that_encodes_otherwise() -> None:
    seeds = ",".join(map(str, SEEDS))
    result = CliRunner().invoke(
        main,
        ["golden", "check", "--profile", "quick", "--seeds", seeds, "--impl", LOOSE, "-j", "1"],
    )
    assert result.exit_code == 0, result.output
    assert f"loose matches all {len(SEEDS)} digests" in result.output


def _plan_reply(record_bytes: bytes, tail: bytes = b"") -> bytes:
    return (
        b"\x83"
        + encode("type")
        + encode("plan")
        + encode("record")
        + record_bytes
        + (encode("plan_ns") + encode(12) + tail)
    )


def test_parse_plan_keeps_the_record_bytes_and_leaves_anything_odd_to_parse() -> None:
    record = {"t": "plan", "plan": 1, "round": None}
    payload = _plan_reply(encode(record))
    reply = parse_plan(payload)
    assert reply is not None and reply == parse(payload)
    assert type(reply["record"]) is Encoded and reply["record"].payload == encode(record)
    # not the simple form: the full parse decides (and says what is wrong)
    for odd in (
        _plan_reply(encode(record), tail=b"\xc0"),  # trailing bytes
        _plan_reply(encode([1, 2])),  # a record that is no map
        _plan_reply(b"\xd4\x01\x00"),  # an ext type
        _plan_reply(encode(record))[:-3],  # truncated
        encode({"type": "ok"}),  # no record
        b"\x81" + encode("type") + b"\xc1",  # never valid msgpack
    ):
        assert parse_plan(odd) is None
    with pytest.raises(Exception, match="extra bytes|ext type|nested"):
        parse(_plan_reply(encode(record), tail=b"\xc0"))


def test_parse_plan_decodes_only_the_fields_the_driver_reads() -> None:
    record = {"t": "plan", "plan": 7, "now": 5, "eligible": [b"\x01\x02", 3.5], "round": [1, 2]}
    payload = _plan_reply(encode(record))
    reply = parse_plan(payload)
    assert reply is not None and reply["type"] == "plan" and reply["plan_ns"] == 12
    kept = reply["record"]
    assert dict(kept) == {"t": "plan", "plan": 7, "round": [1, 2]}
    assert kept.payload == encode(record)  # every field's bytes, skipped ones too
    assert parse(payload)["record"] == record  # the full parse decodes them all


def test_a_record_nested_past_the_limit_is_refused_on_the_second_pass() -> None:
    # parse_plan does not walk the nesting (nothing walks an Encoded record); the full
    # parse, which every other reading and the second pass use, still refuses it
    deep: object = 0
    for _ in range(80):
        deep = [deep]
    payload = _plan_reply(encode({"t": "plan", "plan": 1, "round": None, "junk": deep}))
    assert parse_plan(payload) is not None
    with pytest.raises(Exception, match="nested deeper"):
        parse(payload)


def test_a_record_nested_too_deep_fails_its_scenario_with_the_nesting_named() -> None:
    # The first pass digests the bytes without walking them: they miss the golden digest,
    # and the full second pass refuses the reply as every other reading would.
    from tests.impls.misbehave import BAD_AT, BAD_SEED

    deep = f"deep=exec:{sys.executable} {ROOT / 'tests' / 'impls' / 'misbehave.py'} deep"
    found = digest_scenario(_quick(BAD_SEED), parse_impl(deep), expected=_golden()[BAD_SEED])
    assert found.status == "error", found
    assert "nested deeper than 64 levels" in found.message
    assert found.plans == BAD_AT - 1  # the plans recorded before the refused one


def test_decode_and_the_plan_reader_apply_the_same_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    # codec.decode writes its bounds out (speed); parse_plan's Unpacker takes unpack_limits
    import msgpack

    from tracediff.trace import codec

    seen: dict[str, object] = {}
    real = msgpack.unpackb

    def spy(payload: bytes, **kwargs: object) -> object:
        seen.update(kwargs)
        return real(payload, **kwargs)

    monkeypatch.setattr(codec.msgpack, "unpackb", spy)
    payload = encode({"type": "plan", "record": {"t": "plan"}})
    codec.decode(payload)
    seen.pop("use_list")
    assert seen == codec.unpack_limits(len(payload))
