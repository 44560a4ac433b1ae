"""The native port (examples/native, Rust, std only) against the Python reference.

Built with ``cargo build --release --offline`` into examples/native/target (git-ignored);
skipped, saying why, where cargo is not installed. Both variants, the reference port and
``--optimized``, are checked: every quick scenario's digest against the reference's golden
manifest (the native process runs alone, so it takes seconds) and a lockstep run of both
against the in-process reference on 24 quick seeds.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec import external
from tracediff.models.specdec.bench import run_bench
from tracediff.models.specdec.external import ExecFactory, parse_command
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import load, parse_impl
from tracediff.running.record import Recording, drive, instance

ROOT = Path(__file__).resolve().parents[1]
CRATE = ROOT / "examples" / "native"
BINARY = CRATE / "target" / "release" / "tracediff-native"


@pytest.fixture(scope="module")
def built() -> Path:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed: the Rust port in examples/native cannot be built")
    done = subprocess.run(
        [cargo, "build", "--release", "--offline", "--quiet"],
        cwd=CRATE,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return BINARY


@pytest.fixture(scope="module")
def native(built: Path) -> str:
    return f"native=exec:{built}"


@pytest.fixture(scope="module")
def native_optimized(built: Path) -> str:
    return f"native-opt=exec:{built} --optimized"


@pytest.mark.parametrize("variant", ["native", "native_optimized"])
def test_the_native_port_matches_every_quick_golden_digest(
    variant: str, request: pytest.FixtureRequest
) -> None:
    impl = request.getfixturevalue(variant)
    result = CliRunner().invoke(
        main,
        ["golden", "check", "--profile", "quick", "--impl", impl, "-j", "2", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    name = impl.split("=")[0]
    assert f"{name} matches all 130 digests" in " ".join(result.output.split())


def test_both_native_variants_are_byte_identical_to_the_reference_in_lockstep(
    native: str, native_optimized: str
) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "--no-progress", "--profile", "quick", "--seeds", "6..17,48..53,84..89",
         "-j", "1", "--impl", "reference", "--impl", native, "--impl", native_optimized],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "identical: 24 scenarios" in " ".join(result.output.split())


def test_both_native_variants_speak_protocol_version_2_and_refuse_unknown_flags(
    native: str, native_optimized: str
) -> None:
    for spec in (native, native_optimized):
        factory = ExecFactory("native", parse_command(spec.split("=", 1)[1]))
        scheduler = factory(generate(load_profile("quick"), 0))
        assert scheduler.process.version == 2
        scheduler.process.close()
    done = subprocess.run([str(BINARY), "--bogus"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "usage: tracediff-native [--optimized]" in done.stderr


def test_the_native_port_still_speaks_version_1_to_a_harness_that_offers_only_1(
    native_optimized: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(external, "PROTOCOL_VERSIONS", (1,))
    scenario = generate(load_profile("quick"), 86)  # queue depth 2
    scheduler = ExecFactory("native", parse_command(native_optimized.split("=", 1)[1]))(scenario)
    assert scheduler.process.version == 1
    digests = []
    for impl in (scheduler, instance(scenario, parse_impl("reference"))):
        recording = Recording(drive(scenario, impl))
        for _ in recording:
            pass
        digests.append(recording.hexdigest())
    assert digests[0] == digests[1]
    scheduler.process.close()


def test_bench_times_the_native_plan_beside_python_and_checks_its_records(native: str) -> None:
    spec = parse_impl(native)
    result = run_bench(
        {"optimized": load(parse_impl("optimized")), "native": load(spec)},
        requests=(8,),
        allocations=("device",),
        repeats=2,
    )
    for cell in result.cells:
        assert cell.records_equal
        assert cell.timing("native").samples == 2
        assert cell.median("native") > 0


def test_bench_compares_the_two_native_variants_with_a_funded_probe(
    native: str, native_optimized: str
) -> None:
    result = run_bench(
        {"native": load(parse_impl(native)), "native-opt": load(parse_impl(native_optimized))},
        requests=(8, 64),
        allocations=("host",),
        probe=(False, True),
        repeats=1,
    )
    assert all(cell.records_equal for cell in result.cells)
    assert any(cell.probe_rows > 0 for cell in result.cells if cell.probe)


def test_bench_reaches_a_served_python_implementation_too() -> None:
    served = parse_impl(f"served=exec:{sys.executable} -m tracediff.models.specdec.serve optimized")
    result = run_bench(
        {"optimized": load(parse_impl("optimized")), "served": load(served)},
        requests=(8,),
        allocations=("host",),
        probe=(True,),
        repeats=1,
    )
    assert result.cells[0].records_equal
    assert result.cells[0].probe_rows > 0


def test_impls_lists_built_ins_and_how_to_name_an_exec_one() -> None:
    result = CliRunner().invoke(main, ["impls", "--json"])
    assert result.exit_code == 0
    import json

    rows = {row["name"]: row for row in json.loads(result.output)}
    assert rows["reference"]["kind"] == "built-in"
    assert rows["optimized-check"]["kind"] == "built-in"
    assert rows["exec:COMMAND ARGS"]["kind"] == "exec"
