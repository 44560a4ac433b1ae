"""The native port (examples/native, Rust, std only) against the Python reference.

Built with ``cargo build --release --offline`` into examples/native/target (git-ignored);
skipped, saying why, where cargo is not installed. Its quick-profile identity test checks
every quick scenario's digest against the reference's golden manifest (the native process
runs alone, so it takes seconds) and a lockstep run against the in-process reference.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.bench import run_bench
from tracediff.project.impls import load, parse_impl

ROOT = Path(__file__).resolve().parents[1]
CRATE = ROOT / "examples" / "native"
BINARY = CRATE / "target" / "release" / "tracediff-native"


@pytest.fixture(scope="module")
def native() -> str:
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
    return f"native=exec:{BINARY}"


def test_the_native_port_matches_every_quick_golden_digest(native: str) -> None:
    result = CliRunner().invoke(
        main,
        ["golden", "check", "--profile", "quick", "--impl", native, "-j", "2", "--no-progress"],
    )
    assert result.exit_code == 0, result.output
    assert "native matches all 126 digests" in " ".join(result.output.split())


def test_the_native_port_is_byte_identical_to_the_reference_in_lockstep(native: str) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "--no-progress", "--profile", "quick", "--seeds", "6..17,48..53,84..89",
         "-j", "1", "--impl", "reference", "--impl", native],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "identical: 24 scenarios" in " ".join(result.output.split())


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
