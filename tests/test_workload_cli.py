"""Workloads on the command line (docs/workloads.md): run, gate and coverage on each shipped
sample under both built-in models, reference vs optimized identical; the same digests in
two processes; shrink --save on a workload scenario, replayed by the gate. Few seeds each:
the whole file takes about a minute on two cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MOONCAKE = "workloads/mooncake_conversation.jsonl"
SAMPLES = ["mooncake_conversation.jsonl", "azure_code.csv", "burstgpt_synthetic.csv"]
MODELS = ["specdec", "kvbatch"]


def _td(*args: str, hashseed: str = "0") -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", PYTHONHASHSEED=hashseed)
    for name in ("TRACEDIFF_MODEL", "TRACEDIFF_REGRESSIONS", "CI"):
        env.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("sample", SAMPLES)
def test_run_on_each_sample_is_identical(model: str, sample: str, tmp_path: Path) -> None:
    report = tmp_path / "run.json"
    done = _td("--model", model, "run", "--workload", f"workloads/{sample}", "--seeds", "0..2",
               "--no-regressions", "-j", "2", "--json", str(report))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: 3 scenarios" in done.stdout
    results = json.loads(report.read_text())["results"]
    assert all(f"workload {Path(sample).stem}[" in r["features"] for r in results)


@pytest.mark.parametrize("model", MODELS)
def test_gate_and_coverage_run_on_the_workload_profile(model: str, tmp_path: Path) -> None:
    gate = _td("--model", model, "gate", "--profile", "workload", "--seeds", "0..5",
               "--regressions", str(tmp_path))  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "profile workload" in gate.stdout and "6 scenarios identical" in gate.stdout
    coverage = _td("--model", model, "coverage", "--profile", "workload", "--seeds", "0..8",
                   "--json", str(tmp_path / "cov.json"))  # fmt: skip
    # exit 1 names what real traffic never reaches; the table is there either way
    assert coverage.returncode in (0, 1), coverage.stdout + coverage.stderr
    measured = json.loads((tmp_path / "cov.json").read_text())
    assert measured["profile"] == "workload"


def test_the_same_workload_gives_the_same_digests_in_two_processes(tmp_path: Path) -> None:
    digests = []
    for hashseed in ("1", "random"):
        report = tmp_path / f"{hashseed}.json"
        done = _td("--model", "kvbatch", "run", "--workload", MOONCAKE,
                   "--seeds", "3,7", "--no-regressions", "-j", "1", "--json", str(report),
                   hashseed=hashseed)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        results = json.loads(report.read_text())["results"]
        digests.append([i["digest"] for r in results for i in r["impls"]])
    assert digests[0] == digests[1]


def test_a_shrunk_workload_scenario_is_saved_and_the_gate_replays_it(tmp_path: Path) -> None:
    broken = "tests.impls.kvbatch_broken:HitIgnoresRefcount"
    shrink = _td("--model", "kvbatch", "shrink", "--workload", MOONCAKE,
                 "--seed", "0", "--impl", "reference", "--impl", broken, "--save",
                 "--regressions", str(tmp_path))  # fmt: skip
    assert shrink.returncode == 1, shrink.stdout + shrink.stderr
    (saved,) = tmp_path.glob("*.json")
    data = json.loads(saved.read_text())
    assert data["workload"]["name"] == "mooncake_conversation"
    assert data["workload"]["format"] == "mooncake" and len(data["workload"]["sha256"]) == 64
    corpus = ("--regressions", str(tmp_path), "--impl", "reference")
    gate = _td("--model", "kvbatch", "gate", "--profile", "quick", "--seeds", "0", *corpus,
               "--impl", "optimized")  # fmt: skip
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "regression" in gate.stdout
    caught = _td("--model", "kvbatch", "gate", "--profile", "quick", "--seeds", "0", *corpus,
                 "--impl", broken)  # fmt: skip
    assert caught.returncode == 1, caught.stdout + caught.stderr
