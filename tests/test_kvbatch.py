"""The kvbatch model (docs/kvbatch.md): the second built-in model, through the seam only.

Reference vs optimized on quick (in process and on the command line), coverage complete on
quick, a spec oracle written from the docs (it reads traces and imports nothing of the
planners), and the classic optimisation bugs of tests/impls/kvbatch_broken.py each caught
on quick as a divergence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tracediff import model as registry
from tracediff.errors import ScenarioError
from tracediff.models.kvbatch.model import MODEL
from tracediff.models.kvbatch.scenario import KVScenario, Request
from tracediff.project.impls import ImplSpec
from tracediff.running.runner import RunOptions, RunSummary, run_scenarios

ROOT = Path(__file__).resolve().parents[1]
QUICK = MODEL.load_profile("quick")
BROKEN = (
    "EvictedStillFree",
    "HitIgnoresRefcount",
    "PreemptOldestFirst",
    "ChunkOffByOne",
    "HitRepeatLeavesFreeTwice",
    "OrdersById",
)


def _spec(name: str) -> ImplSpec:
    return ImplSpec(name, MODEL.builtin_impls.get(name, f"tests.impls.kvbatch_broken:{name}"))


def _run(name: str) -> RunSummary:
    scenarios = [MODEL.generate(QUICK, seed) for seed in QUICK.seeds]
    return run_scenarios(scenarios, RunOptions((_spec("reference"), _spec(name))))


def test_the_model_is_registered_beside_specdec() -> None:
    assert "kvbatch" in registry.names() and "specdec" in registry.names()
    found: object = registry.get("kvbatch")
    assert found is MODEL
    owner: object = registry.of(MODEL.generate(QUICK, 0))
    assert owner is MODEL


def test_reference_and_optimized_are_identical_on_quick() -> None:
    summary = _run("optimized")
    assert [str(r.status) for r in summary.results] == ["identical"] * len(QUICK.seeds)
    assert summary.plans > 500


def _td(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200")
    env.pop("TRACEDIFF_MODEL", None)
    env.pop("TRACEDIFF_REGRESSIONS", None)  # the repository's own (kvbatch's subdirectory)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", "--model", "kvbatch", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_command_line_runs_and_covers_quick() -> None:
    # --no-regressions: the profile alone (the corpus has its own test below)
    run = _td("run", "--profile", "quick", "--no-regressions")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "identical: 40 scenarios" in run.stdout
    cov = _td("coverage", "--profile", "quick", "--min", "3")
    assert cov.returncode == 0, cov.stdout + cov.stderr
    assert "every required rule clause decided in at least 3 scenarios" in cov.stdout


@pytest.mark.parametrize("name", BROKEN)
def test_each_classic_bug_is_caught_on_quick_as_a_divergence(name: str) -> None:
    statuses = [str(r.status) for r in _run(name).results]
    assert "diverged" in statuses, statuses
    first = next(r for r in _run(name).results if str(r.status) != "identical")
    assert str(first.status) == "diverged" and first.record_type == "plan"


# -- the spec oracle: docs/kvbatch.md, read from a trace ---------------------------------
class Oracle:
    """Follows a trace with only what the spec says and checks each plan's decisions."""

    def __init__(self, header: dict[str, Any]) -> None:
        sc = header["scenario"]
        self.bs: int = sc["block_size"]
        self.budget: int = sc["token_budget"]
        self.max_running: int = sc["max_running"]
        self.num_blocks: int = sc["num_blocks"]
        self.req = {r[0]: {"arrival": r[1], "prompt": r[2], "output": r[3], "priority": r[4],
                           "prefix": r[5], "seq": r[2], "done": 0, "out": 0, "held": 0}
                    for r in sc["requests"]}  # fmt: skip
        self.waiting: set[int] = set()
        self.running: list[int] = []

    def key(self, rid: int) -> tuple[int, int, int]:
        r = self.req[rid]
        return (r["priority"], r["arrival"], rid)

    def need(self, rid: int, n: int) -> int:
        r = self.req[rid]
        blocks: int = -(-(r["done"] + n) // self.bs) - r["held"]
        return blocks

    def check(self, rec: dict[str, Any]) -> None:
        alloc = {rid: len(blocks) for rid, blocks in rec["alloc"]}
        left = self.budget
        # running requests: a prefix of the running list, in order, each min(rest, budget)
        ran = [rid for rid, _n in rec["run"]]
        assert ran == self.running[: len(ran)], "running requests out of admission order"
        for rid, n in rec["run"]:
            r = self.req[rid]
            assert n == min(r["seq"] - r["done"], left), f"chunk of {rid}"
            assert alloc.get(rid, 0) == self.need(rid, n), f"blocks of {rid}"
            r["held"] += alloc.get(rid, 0)
            left -= n
        # preemption: the newest running requests, newest first; no admission after it
        if rec["preempt"]:
            rest = self.running[len(ran) :]
            assert rec["preempt"] == rest[::-1][: len(rec["preempt"])], "preemption order"
            assert rec["admit"] == [], "admitted in a plan that preempted"
            for rid in rec["preempt"]:
                self.running.remove(rid)
                r = self.req[rid]
                r.update(done=0, held=0, seq=r["prompt"] + r["out"])
                self.waiting.add(rid)
        else:
            assert len(ran) == len(self.running) or left == 0, "a running request skipped"
        # admission: always the head of the waiting queue by (priority, arrival, id)
        for rid, hits, n in rec["admit"]:
            assert left > 0 and len(self.running) < self.max_running
            assert rid == min(self.waiting, key=self.key), "admission is not the head"
            r = self.req[rid]
            assert hits <= min(len(r["prefix"]), (r["seq"] - 1) // self.bs), "hit cap"
            r["done"], r["held"] = hits * self.bs, hits
            assert n == min(r["seq"] - r["done"], left), f"admitted chunk of {rid}"
            assert alloc.get(rid, 0) == self.need(rid, n), f"admitted blocks of {rid}"
            r["held"] += alloc.get(rid, 0)
            self.waiting.discard(rid)
            self.running.append(rid)
            left -= n
        assert rec["tokens"] == self.budget - left and rec["hits"] == sum(
            h for _i, h, _n in rec["admit"]
        )
        assert 0 <= rec["free"] <= self.num_blocks
        # the step's effect
        done = []
        for rid, n in [(i, n) for i, n in rec["run"]] + [(i, n) for i, _h, n in rec["admit"]]:
            r = self.req[rid]
            r["done"] += n
            if r["done"] == r["seq"]:
                r["out"] += 1
                r["seq"] += 1
                if r["out"] == r["output"]:
                    done.append(rid)
        assert rec["finished"] == done, "finished requests"
        for rid in done:
            self.running.remove(rid)
        if not self.running and not self.waiting:
            assert rec["free"] == self.num_blocks, "blocks leaked with nothing running"


def check_trace(records: Iterable[dict[str, Any]]) -> int:
    iterator = iter(records)
    oracle = Oracle(next(iterator))
    plans: int = 0
    for rec in iterator:
        if rec["t"] == "arrival":
            oracle.waiting.add(rec["id"])
        else:
            plans += 1
            oracle.check(rec)
    assert not oracle.waiting and not oracle.running
    return plans


@pytest.mark.parametrize("impl", ["reference", "optimized"])
def test_the_spec_oracle_agrees_with_every_quick_trace(impl: str) -> None:
    from tracediff.project.impls import load

    factory = load(_spec(impl))
    plans = 0
    for seed in QUICK.seeds:
        scenario = MODEL.generate(QUICK, seed)
        plans += check_trace(MODEL.drive(scenario, factory(MODEL.private_copy(scenario))))
    assert plans > 500


def test_the_oracle_catches_the_order_and_chunk_bugs() -> None:
    """Not only the reference: the oracle itself refuses the broken planners' traces."""
    from tracediff.project.impls import load

    for name in ("PreemptOldestFirst", "ChunkOffByOne"):
        factory = load(_spec(name))
        caught = 0
        for seed in QUICK.seeds:
            scenario = MODEL.generate(QUICK, seed)
            try:
                check_trace(MODEL.drive(scenario, factory(MODEL.private_copy(scenario))))
            except AssertionError:
                caught += 1
        assert caught, name


# -- scenarios, generator, validation, fuzzing -------------------------------------------
def test_the_generator_is_a_pure_function_of_profile_and_seed() -> None:
    assert MODEL.generate(QUICK, 5) == MODEL.generate(QUICK, 5)
    assert MODEL.generate(QUICK, 5) != MODEL.generate(QUICK, 6)
    assert len(MODEL.load_profile("default").seeds) == 300 and len(QUICK.seeds) == 40
    for seed in QUICK.seeds:
        scenario = MODEL.generate(QUICK, seed)
        MODEL.validate(scenario)
        assert MODEL.scenario_from_dict(scenario.to_dict()) == scenario


@pytest.mark.parametrize(
    "request_",
    [
        Request(0, 0, 3, 1, 1, (7,)),  # a prefix hash beyond the full blocks
        Request(0, 0, 40, 10, 1, ()),  # does not fit the cache alone
        Request(0, -1, 3, 1, 1, ()),
        Request(0, 0, 3, 0, 1, ()),
    ],
)
def test_validate_refuses_invalid_requests(request_: Request) -> None:
    with pytest.raises(ScenarioError):
        MODEL.validate(KVScenario("t", 0, block_size=4, num_blocks=4, requests=(request_,)))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(MODEL.fuzz_strategy(6))
def test_fuzzed_scenarios_are_valid_and_identical(scenario: KVScenario) -> None:
    from tracediff.models.kvbatch.optimized import Optimized
    from tracediff.models.kvbatch.reference import Reference

    MODEL.validate(scenario)
    a = list(MODEL.drive(scenario, Reference(MODEL.private_copy(scenario))))
    b = list(MODEL.drive(scenario, Optimized(MODEL.private_copy(scenario))))
    assert a == b
    check_trace(a)


def test_a_prompt_that_repeats_a_hash_is_planned_as_the_reference_plans_it() -> None:
    """A prompt whose prefix holds one hash twice hits one cached block twice: the block
    leaves the free count once (the shipped optimized planner took it out twice, and its
    free count stayed one short from then on)."""
    from tracediff.models.kvbatch.optimized import Optimized
    from tracediff.models.kvbatch.reference import Reference

    scenario = KVScenario("quick", 0, block_size=2, num_blocks=8, requests=(
        Request(0, 0, 8, 2, prefix=(1, 2, 1)), Request(1, 60_000, 8, 2, prefix=(1, 2, 1)),
    ))  # fmt: skip
    MODEL.validate(scenario)
    a = list(MODEL.drive(scenario, Reference(MODEL.private_copy(scenario))))
    b = list(MODEL.drive(scenario, Optimized(MODEL.private_copy(scenario))))
    assert [r["hits"] for r in a if r.get("t") == "plan"] == [0, 0, 3, 0]
    assert a == b
    check_trace(a)


def test_the_generators_repeat_hashes_within_a_prompt() -> None:
    """quick and the fuzz strategy both draw prompts that repeat a hash (and quick catches
    the planner that mishandled them: HitRepeatLeavesFreeTwice, in BROKEN)."""
    from hypothesis import find

    def repeats(s: KVScenario) -> bool:
        return any(len(set(r.prefix)) < len(r.prefix) for r in s.requests)

    assert any(repeats(MODEL.generate(QUICK, seed)) for seed in QUICK.seeds)
    find(MODEL.fuzz_strategy(4), repeats, settings=settings(database=None))


SHRUNK = [
    # bug, a quick seed it breaks, the kind and field of the divergence, shrunk requests
    ("EvictedStillFree", 2, "bookkeeping · plan: free", 2),
    ("HitIgnoresRefcount", 0, "bookkeeping · plan: free", 2),
    ("PreemptOldestFirst", 0, "decision · plan: run[*]", 3),
    ("ChunkOffByOne", 1, "decision · plan: admit[*][*]", 1),  # 2 before the new passes
    ("HitRepeatLeavesFreeTwice", 9, "bookkeeping · plan: free", 2),
    ("OrdersById", 5, "decision · plan: admit[*][*]", 3),
]


@pytest.mark.parametrize(("name", "seed", "kind", "requests"), SHRUNK)
def test_each_bug_shrinks_to_a_small_scenario_of_its_kind(
    name: str, seed: int, kind: str, requests: int
) -> None:
    done = _td("shrink", "--profile", "quick", "--seed", str(seed), "--impl", "reference",
               "--impl", f"tests.impls.kvbatch_broken:{name}")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"signature: {kind}" in done.stdout
    assert f"shrunk scenario: {requests} requests" in done.stdout


def test_the_bench_scenarios_are_valid_and_the_table_has_every_cell() -> None:
    from tracediff.models.kvbatch.bench import bench_lines, bench_scenario, run_bench
    from tracediff.project.impls import load

    for pressure in ("low", "high"):
        scenario = bench_scenario(30, pressure)
        MODEL.validate(scenario)
        check_trace(MODEL.drive(scenario, load(_spec("optimized"))(scenario)))
    factories = {n: load(_spec(n)) for n in ("reference", "optimized")}
    cells = run_bench(factories, MODEL.drive, (10, 20), ("low", "high"), repeats=1)
    assert [(c.requests, c.pressure) for c in cells] == [
        (10, "low"), (20, "low"), (10, "high"), (20, "high"),
    ]  # fmt: skip
    lines = bench_lines(list(factories), cells)
    assert len(lines) == 1 + 4 + 2 and "x optimized" in lines[0]


@pytest.mark.parametrize("name", ["EvictedStillFree", "HitIgnoresRefcount"])
def test_the_check_mode_names_the_drifted_state(name: str) -> None:
    """optimized-check (``--check``) recounts after each plan: a bookkeeping bug is caught
    where it happens, without a reference to compare with."""
    import tests.impls.kvbatch_broken as broken
    from tracediff.models.kvbatch.optimized import CheckedOptimized

    assert MODEL.checked_impls == {"optimized": "optimized-check"}
    checked = type("Checked", (getattr(broken, name), CheckedOptimized), {})
    messages = []
    for seed in QUICK.seeds:
        scenario = MODEL.generate(QUICK, seed)
        try:
            list(MODEL.drive(scenario, checked(MODEL.private_copy(scenario))))
        except AssertionError as exc:
            messages.append(str(exc))
        except IndexError:
            pass  # the bug broke a heap before the check could run
    assert messages and all("drifted" in m or "free" in m or "negative" in m for m in messages)


def test_the_golden_digests_and_the_corpus_gate() -> None:
    """golden/kvbatch holds the reference's digests of quick and scenarios/regressions/kvbatch
    the shrunk scenarios of the classic bugs: this project's model is specdec, so another model's
    data is found in a subdirectory named after it, without naming it."""
    ok = _td("golden", "check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "matches all 40 digests" in ok.stdout
    bad = _td("golden", "check", "--impl", "tests.impls.kvbatch_broken:ChunkOffByOne")
    assert bad.returncode == 1
    where: tuple[str, ...] = ()
    gate = _td("gate", *where)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "all good: 45 scenarios" in gate.stdout
    for name in BROKEN:
        failing = _td("gate", *where, "--impl", "reference",
                      "--impl", f"tests.impls.kvbatch_broken:{name}")  # fmt: skip
        assert failing.returncode == 1, name
        assert "regressions" in failing.stdout and "FAIL" in failing.stdout.upper()


def test_a_project_that_configures_kvbatch_runs_every_command_on_it(tmp_path: Path) -> None:
    """``[tool.tracediff] model = "kvbatch"``: the configured default, no --model needed."""
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "kvbatch"\n')
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=str(ROOT))
    env.pop("TRACEDIFF_MODEL", None)
    env.pop("TRACEDIFF_REGRESSIONS", None)

    def td(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip

    bug = "tests.impls.kvbatch_broken:ChunkOffByOne"
    assert "identical: 40 scenarios" in td("tracediff", "run").stdout
    assert td("tracediff", "record", "--seed", "1", "-o", "a.trace").returncode == 0
    assert td("tracediff", "record", "--seed", "1", "--impl", bug, "-o", "b.trace").returncode == 0
    diff = td("tracediff", "diff", "a.trace", "b.trace")
    assert diff.returncode == 1 and "(plan 1): decision" in diff.stdout
    show = td("tracediff", "show", "a.trace")
    assert show.returncode == 0 and "kvbatch" in show.stdout
    assert td("tracediff", "replay", "a.trace", "--impl", "optimized").returncode == 0
    assert td("tracediff", "replay", "a.trace", "--impl", bug).returncode == 1
    fuzz = td("tracediff", "fuzz", "--impl", "reference", "--impl", bug, "--max-examples", "50")
    assert fuzz.returncode == 1 and "DIVERGED" in fuzz.stdout
    campaign = td("tracediff", "campaign", "--out", "c", "--seeds", "0..20")
    assert campaign.returncode == 0, campaign.stdout
    plugin = td("pytest", "--tracediff-profile", "quick", "-q", "-p", "no:cacheprovider")
    assert plugin.returncode == 0 and "40 passed" in plugin.stdout, plugin.stdout


def test_impls_lists_the_models_own_implementations_only() -> None:
    done = _td("impls", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    targets = [row["target"] for row in rows if row["kind"] == "built-in"]
    assert targets and all(t.startswith("tracediff.models.kvbatch.") for t in targets)
    assert not any("shadowed" in row["note"] for row in rows)


def test_fuzz_draws_through_the_generator_and_finds_an_id_order_bug() -> None:
    """kvbatch's fuzz strategy is its generator with Hypothesis answering the draws, so it
    reaches every ordering the generator makes: a queue ordered by id instead of arrival
    (never visible while ids follow arrival order, as the hand-written strategy numbered
    them) is found; each found scenario is saved under a name of its own."""
    done = _td("fuzz", "--impl", "reference", "--impl", "tests.impls.kvbatch_broken:OrdersById",
               "--max-examples", "200", "--seed", "1")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIVERGED" in done.stdout and "decision" in done.stdout
    assert "reproduce: tracediff run --scenario artifacts/fuzz/fuzz-0.json" not in done.stdout


def test_the_generator_is_written_once_against_draws() -> None:
    """Seeded, the draws make the scenarios random.Random made (the golden digests hold);
    a scenario replays from its recorded choices; fewer choices make a smaller scenario."""
    from tracediff.draws import Draws
    from tracediff.models.kvbatch.scenario import generate_from

    for seed in QUICK.seeds[:10]:
        draws = Draws.seeded(f"kvbatch:quick:{seed}")
        scenario = generate_from(QUICK, seed, draws)
        assert scenario == MODEL.generate(QUICK, seed)
        choices, streams = draws.recorded()
        assert generate_from(QUICK, seed, Draws.replaying(choices, streams)) == scenario
        simplest = generate_from(QUICK, seed, Draws.replaying(()))
        MODEL.validate(simplest)
        assert len(simplest.requests) == 2  # every draw at its simplest: the fewest requests
