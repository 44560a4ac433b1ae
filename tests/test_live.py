"""The live torch engine: greedy equality, record and replay, and life without torch.

Tests that need torch take the ``torch`` fixture, which skips them where the ``live`` extra
is not installed (``make setup`` installs it, so CI runs them). The model runs in float64 on
the CPU with deterministic algorithms: see ``tracediff/models/specdec/live/oracle.py`` for why
equality with
plain greedy decoding is then exact, and the margin assertion that keeps it honest.
"""

from __future__ import annotations

import dataclasses
import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tracediff.cli import main
from tracediff.models.specdec.live import grammar as G
from tracediff.models.specdec.live.proposers import copy_proposals
from tracediff.models.specdec.live.summary import Round, acceptance, busy_share
from tracediff.models.specdec.live.workload import WorkloadOptions, build
from tracediff.models.specdec.sched.reference import ReferenceScheduler

SAFE_MARGIN = 1e-9  # float64 rounding differences are ~1e-15; a flip needs a closer tie


@pytest.fixture
def torch() -> Iterator[Any]:
    """torch, on one intra-op thread (a tiny model gains nothing from more; a shared CI box
    loses a lot to spinning thread pools), or a skip where the live extra is absent."""
    module = pytest.importorskip("torch")
    threads = module.get_num_threads()
    module.set_num_threads(1)
    yield module
    module.set_num_threads(threads)


# -- without torch ----------------------------------------------------------------------------
def test_live_without_torch_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes ``import torch`` raise ImportError
    result = CliRunner().invoke(main, ["live", "-o", str(tmp_path / "t.trace")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "pip install 'tracediff-harness[live]'" in lines[0]
    assert not (tmp_path / "t.trace").exists()


def test_the_cli_and_core_import_without_torch(python: str, subprocess_env: dict[str, str]) -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import tracediff.cli, tracediff.running.runner, tracediff.replay\n"
        "import tracediff.models.specdec.live, tracediff.models.specdec.live.summary\n"
        "import tracediff.models.specdec.live.workload\n"
        "import tracediff.models.specdec.commands.live_table\n"
        "import click\n"
        "from tracediff.cli import main\n"
        "assert 'live' in main.list_commands(click.Context(main))\n"
        "assert main.get_command(click.Context(main), 'live') is not None\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, env=subprocess_env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# -- host-side pieces (no torch) ---------------------------------------------------------------
def test_copy_proposals_look_up_the_latest_earlier_ngram() -> None:
    context = list(b"abcXYZ abcQRS abc")
    assert bytes(copy_proposals(context, grammar=False)) == b"QRS abc"
    assert copy_proposals(list(b"abcdefg"), grammar=False) == []  # nothing repeats: offer 0
    # A grammar lane keeps only what the grammar allows: "QRS" is not lowercase.
    assert copy_proposals(context, grammar=True) == []
    assert bytes(copy_proposals(list(b"ab cd ab"), grammar=True)) == b" cd ab"


def test_grammar_allows_words_separated_by_single_spaces() -> None:
    assert G.allowed(ord("a")) == G.LETTERS | {G.SPACE}
    assert G.allowed(G.SPACE) == G.LETTERS
    assert G.allowed(ord(".")) == G.LETTERS
    assert bytes(G.conforming_prefix(ord("x"), list(b"ab  cd"))) == b"ab "


def test_busy_share_counts_device_time_over_the_steady_window() -> None:
    # 20 rounds of 1 ms with a 1 ms gap after each: busy half the time, whatever the trim.
    rounds = [Round(i * 2_000_000, i * 2_000_000 + 1_000_000, 1000, [], False) for i in range(20)]
    share, window_us, count = busy_share(rounds)
    assert count == 16  # the first and last two (a tenth each) are left out
    assert window_us == 31_000
    assert share == pytest.approx(16_000 / 31_000)


def test_acceptance_per_depth_counts_verified_and_accepted_depths() -> None:
    lanes = [[0, 3, 1, 2, False, 7], [1, 2, 2, 3, False, 5], [0, 0, 0, 1, True, 7]]
    table = acceptance([Round(0, 1, 1, lanes, False)], {0: "mtp", 1: "copy"})
    assert [(d.trials, d.accepted) for d in table["all"][:4]] == [(2, 2), (2, 1), (1, 0), (0, 0)]
    assert [(d.trials, d.accepted) for d in table["mtp"][:3]] == [(1, 1), (1, 0), (1, 0)]
    assert table["copy"][1].rate == 1.0


def test_workload_prompts_repeat_and_lengths_match() -> None:
    workload = build(WorkloadOptions(requests=6, seed=4, ragged=True))
    for spec, prompt in zip(workload.scenario.requests, workload.prompts, strict=True):
        assert spec.prompt_len == len(prompt)
        assert copy_proposals(list(prompt[: len(prompt) // 2 + 8]), grammar=False) or spec.id
    assert workload.scenario.params.eager_shapes  # mixed graphs mark some shapes eager
    assert build(WorkloadOptions(requests=6, seed=4, ragged=True)) == workload


# -- the engine (torch) ------------------------------------------------------------------------
BATCH_BUCKETS = (1, 2, 4, 8)
TOKEN_BUCKETS = (8, 16, 24, 32, 48, 64)


def _random_round(rng: random.Random, executor: Any, bucketed: bool) -> list[Any]:
    """A round no sane scheduler would plan, but a valid one; ``bucketed``: padded to bucket
    sizes (the shapes a graph pool captures), else padded by a random amount."""
    streams = list(executor.streams.values())
    waiting = [s for s in streams if not s.decoding]
    prefill_request, prefill_tokens = -1, 0
    if waiting and rng.random() < 0.6:
        stream = waiting[0]
        prefill_request = stream.request
        prefill_tokens = min(rng.choice([5, 16, 64]), len(stream.prompt) - stream.prompt_sent)
    decoding = [s for s in streams if s.decoding and (not s.finished or rng.random() < 0.2)]
    chosen = rng.sample(decoding, rng.randint(0, len(decoding)))
    lanes = [[s.request, 0, rng.randint(0, 7), rng.randint(0, 1)] for s in chosen]
    b_pad = len(lanes) + rng.randint(0, 2)
    if bucketed and lanes:
        b_pad = next(b for b in BATCH_BUCKETS if b >= len(lanes))
    if rng.random() < 0.5:
        kind = 0
        width = min(7, max((lane[2] for lane in lanes), default=0) + rng.randint(0, 1))
    else:
        kind = 1
        width = sum(1 + lane[2] for lane in lanes) + rng.randint(0, 6)
        if bucketed:
            width = next(t for t in TOKEN_BUCKETS if t >= width)
    return [
        "winner",
        kind,
        b_pad,
        width,
        prefill_request,
        prefill_tokens,
        lanes,
        0.0,
        0,
    ]


@pytest.mark.parametrize("graphs", [False, True], ids=["eager", "static-graph-buffers"])
def test_speculative_decoding_equals_plain_greedy_whatever_is_planned(
    torch: Any, graphs: bool
) -> None:
    from tracediff.models.specdec.live.engine import (
        DeviceOptions,
        GraphPool,
        graph_shapes,
        torch_settings,
    )
    from tracediff.models.specdec.live.executor import RoundExecutor
    from tracediff.models.specdec.live.model import ModelConfig, TinyTransformer
    from tracediff.models.specdec.live.oracle import greedy_decode

    workload = build(
        WorkloadOptions(
            requests=5,
            seed=11,
            max_new=(12, 40),
            grammar_share=0.4,
            host_stop_share=0.4,
            copy_share=0.5,
        )
    )
    with torch_settings(DeviceOptions(dtype="float64")):
        model = TinyTransformer(
            ModelConfig(seed=3), device=torch.device("cpu"), dtype=torch.float64
        )
        pool = GraphPool(model, eager={(0, 2, 3), (1, 4, 16)}) if graphs else None
        executor = RoundExecutor(model, workload, confidence=0.7, graphs=pool)
        if pool is not None:
            params = dataclasses.replace(workload.scenario.params, ragged=True)
            assert pool.capture_all(executor, graph_shapes(params)) > 40
        rng = random.Random(5)
        replayed = truncated = 0
        plan = 0
        verified = accepted = 0
        while not all(s.finished for s in executor.streams.values()):
            plan += 1
            round_row = _random_round(rng, executor, graphs)
            outcome = executor.execute(plan, round_row)
            replayed += outcome.graph
            for lane, result in zip(round_row[6], outcome.lanes, strict=True):
                request, v, a, tokens, _finished, _offer = result
                assert request == lane[0] and 0 <= a <= v <= lane[2] and 0 <= tokens <= 1 + a
                verified += v
                accepted += a
                stream = executor.streams[request]
                if lane[3] == 1 and stream.proposer == "mtp" and tokens and v < lane[2]:
                    truncated += 1  # the device verified fewer drafts than its ceiling
            assert plan < 2000
        assert accepted > 0 and accepted < verified  # drafts were both kept and rejected
        assert (replayed > 10) == graphs
        assert truncated > 0
        kinds = {(s.proposer, s.grammar, s.stop >= 0) for s in executor.streams.values()}
        assert len(kinds) >= 3  # several kinds of lane took part
        for spec in workload.scenario.requests:
            plain = greedy_decode(
                model,
                workload.prompts[spec.id],
                spec.max_new,
                grammar=spec.grammar,
                stop=workload.stops[spec.id],
            )
            assert plain.margin > SAFE_MARGIN  # equality below is exact, not luck
            assert executor.generated(spec.id) == plain.tokens, f"request {spec.id}"


def test_a_finished_request_frees_its_cache_slot(torch: Any) -> None:
    from tracediff.models.specdec.live.executor import RoundExecutor
    from tracediff.models.specdec.live.model import ModelConfig, TinyTransformer

    workload = build(WorkloadOptions(requests=1, seed=2, max_new=(3, 3), host_stop_share=0.0))
    model = TinyTransformer(ModelConfig(), device=torch.device("cpu"), dtype=torch.float64)
    executor = RoundExecutor(model, workload, confidence=0.5)
    prompt_len = workload.scenario.requests[0].prompt_len
    executor.execute(1, ["winner", 0, 0, 0, 0, prompt_len, [], 0.0, 0])
    assert executor.free_slots == []
    rows = []
    plan = 1
    while not executor.streams[0].finished:
        plan += 1
        rows = executor.execute(plan, ["winner", 0, 1, 0, -1, 0, [[0, 0, 0, 0]], 0.0, 0]).lanes
    assert rows[0][3] >= 1 and rows[0][4] is True
    assert executor.free_slots == [0]
    # A lane of a finished request (a round queued before the host heard) computes nothing.
    late = executor.execute(plan + 1, ["winner", 0, 1, 0, -1, 0, [[0, 0, 0, 0]], 0.0, 0])
    assert late.lanes == [[0, 0, 0, 0, True, 7]]


@pytest.mark.parametrize(
    ("impl", "allocation", "ragged", "queue"),
    [("reference", "device", False, 1), ("optimized", "mixed", True, 2)],
)
def test_a_live_trace_replays_with_identical_decisions(
    torch: Any, tmp_path: Path, impl: str, allocation: str, ragged: bool, queue: int
) -> None:
    from tracediff.project.impls import parse_impl
    from tracediff.replay import MATCH, replay
    from tracediff.trace import TraceReader

    path = tmp_path / "live.trace"
    args = [
        "live",
        "--requests",
        "4",
        "--seed",
        "3",
        "--impl",
        impl,
        "-o",
        str(path),
        "--allocation",
        allocation,
        "--queue-depth",
        str(queue),
        "--dtype",
        "float64",
        "--check-greedy",
        "--json",
        *(["--ragged"] if ragged else []),
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    summary = report["summary"]
    assert report["greedy"]["different"] == [] and report["greedy"]["equal"] == 4
    assert report["greedy"]["margin"] > SAFE_MARGIN
    assert summary["tokens"] > 0 and summary["plans"] >= summary["rounds"] > 0
    assert 0.0 < summary["busy_share"] <= 1.0
    assert summary["plan_max_us"] >= summary["plan_median_us"] > 0
    header = TraceReader(path).header
    live = header["live"]
    assert live["torch"] == torch.__version__ and live["device"] == "cpu"
    assert live["dtype"] == "float64" and live["deterministic_algorithms"] is True
    completions = [r for r in TraceReader(path).decoded_records() if r["t"] == "completion"]
    assert all(isinstance(c["observed_us"], int) and c["observed_us"] >= 1 for c in completions)
    assert any(lane[2] > 0 for c in completions for lane in c["lanes"])  # real acceptance
    shown = CliRunner().invoke(main, ["show", str(path)])
    assert shown.exit_code == 0 and "live engine" in shown.output
    for name in ("reference", "optimized"):
        replayed = replay(str(path), parse_impl(name))
        assert replayed.status == MATCH, replayed.to_dict()
        assert replayed.plans == summary["plans"]


class CutRoundScheduler(ReferenceScheduler):
    """Cuts every round it plans short (no lanes): the engine must refuse it. (Live runs are
    timed for real, so which plan first has a round varies; every one is cut.)"""

    def plan(self, now: int) -> dict[str, Any]:
        record = super().plan(now)
        if record["round"] is not None:
            record["round"] = record["round"][:3]
        return record


@pytest.mark.parametrize(
    ("impl", "seed", "says"),
    [
        ("tests.impls.raises:RaisingScheduler", 0, "deliberate failure at plan 5"),
        ("tests.test_live:CutRoundScheduler", 0, "malformed round: list index out of range"),
    ],
)
def test_a_failing_implementation_is_a_finding(
    torch: Any, tmp_path: Path, impl: str, seed: int, says: str
) -> None:
    path = tmp_path / "live.trace"
    args = ["live", "--requests", "3", "--seed", str(seed), "--impl", impl, "-o", str(path)]
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code == 1, result.output
    assert says in result.output and len(result.output.strip().splitlines()) == 1
    assert not path.exists()  # the trace is written atomically, only by a run that finished


def test_cuda_without_a_gpu_is_one_line_and_exit_2(torch: Any, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    result = CliRunner().invoke(main, ["live", "--device", "cuda", "-o", str(tmp_path / "t")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"tracediff: error: --device cuda: torch sees no CUDA device (this torch is "
        f"{torch.__version__}); use --device cpu"
    ]
