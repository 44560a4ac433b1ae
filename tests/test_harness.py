"""The spine: seeds -> scenarios -> implementations -> traces -> byte comparison -> verdict."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.impls.skewed import SKEW_AT
from tracediff.cli import main
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile, parse_seeds
from tracediff.project.impls import parse_impl
from tracediff.running.runner import DIVERGED, IDENTICAL, RunOptions, run_scenario, run_scenarios
from tracediff.trace import TraceReader, first_difference


def test_one_scenario_gives_the_same_bytes_in_two_processes(
    tmp_path: Path, python: str, subprocess_env: dict[str, str]
) -> None:
    outputs = []
    for name in ("a", "b"):
        out = tmp_path / f"{name}.trace"
        subprocess.run(
            [
                python,
                "-m",
                "tracediff.cli",
                "record",
                "--profile",
                "quick",
                "--seed",
                "40",
                "-o",
                str(out),
            ],
            check=True,
            env=subprocess_env,
            capture_output=True,
        )
        outputs.append(out)
    assert first_difference(outputs[0], outputs[1]) is None
    # Provenance (host, wall time) may differ; the compared body may not.
    assert TraceReader(outputs[0]).verify() == TraceReader(outputs[1]).verify()


def test_same_inputs_same_digest_twice_in_one_process() -> None:
    profile = load_profile("quick")
    scenario = generate(profile, 17)
    specs = (parse_impl("reference"), parse_impl("reference"))
    first = run_scenario(scenario, specs)
    second = run_scenario(generate(profile, 17), specs)
    assert first.status == IDENTICAL
    assert first.impls[0].digest == second.impls[0].digest
    assert first.impls[0].plans > 0


def test_a_different_implementation_diverges_at_the_right_record() -> None:
    scenario = generate(load_profile("quick"), 12)
    result = run_scenario(
        scenario, (parse_impl("reference"), parse_impl("tests.impls.skewed:SkewedScheduler"))
    )
    assert result.status == DIVERGED
    assert result.record_type == "plan"
    assert result.plan == SKEW_AT
    # The record index counts the header as 0: find plan SKEW_AT's index independently.
    from tracediff.running.runner import trace_records

    for index, record in enumerate(trace_records(scenario, parse_impl("reference"))):
        if record.get("t") == "plan" and record["plan"] == SKEW_AT:
            assert result.divergence == index
            break
    else:  # pragma: no cover
        pytest.fail("the scenario has too few plans")


def test_cli_run_exits_1_on_divergence_and_names_the_record() -> None:
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "run",
            "--seeds",
            "12",
            "--impl",
            "reference",
            "--impl",
            "tests.impls.skewed:SkewedScheduler",
            "-j",
            "1",
            "--no-progress",
        ],
    )
    assert result.exit_code == 1, result.output
    assert "1 diverged" in result.output
    assert "quick:12" in result.output


def test_cli_run_identical_exits_0() -> None:
    result = CliRunner().invoke(
        main, ["run", "--seeds", "0..3", "--impl", "reference", "--impl", "reference", "-j", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "identical: 4 scenarios" in result.output


def test_run_in_worker_processes_matches_in_process() -> None:
    profile = load_profile("quick")
    scenarios = [generate(profile, s) for s in range(6)]
    specs = (parse_impl("reference"), parse_impl("reference"))
    serial = run_scenarios(scenarios, RunOptions(impls=specs, jobs=1))
    parallel = run_scenarios(scenarios, RunOptions(impls=specs, jobs=2))
    assert [r.seed for r in parallel.results] == list(range(6))
    assert [r.impls[0].digest for r in serial.results] == [
        r.impls[0].digest for r in parallel.results
    ]


def test_kept_artifacts_and_diff(tmp_path: Path) -> None:
    scenario = generate(load_profile("quick"), 12)
    specs = (parse_impl("reference"), parse_impl("tests.impls.skewed:SkewedScheduler"))
    result = run_scenario(scenario, specs, artifacts=str(tmp_path))
    assert len(result.artifacts) == 2
    a, b = result.artifacts
    assert first_difference(a, b) == result.divergence
    cli = CliRunner().invoke(main, ["diff", a, b])
    assert cli.exit_code == 1
    assert f"first difference at record {result.divergence}" in cli.output
    assert f"plan {SKEW_AT}" in cli.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "--profile", "nope"], "unknown profile 'nope'"),
        (["run", "--seeds", "5..2"], "bad seed range"),
        (["run", "--seeds", "x"], "bad seed set"),
        (["run", "--impl", "bogus", "--impl", "reference"], "unknown implementation 'bogus'"),
        (["run", "--impl", "nosuchmod:X", "--impl", "reference", "--seeds", "0"], "cannot import"),
        (["run", "--impl", "reference"], "at least two"),
        (["run", "-j", "0"], "at least 1"),
        (["show", "/nonexistent.trace"], "nonexistent.trace"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert "Traceback" not in result.output


def test_seed_syntax() -> None:
    assert parse_seeds("0..3,7, 9-10") == (0, 1, 2, 3, 7, 9, 10)


def test_record_show_jsonl_roundtrip(tmp_path: Path) -> None:
    import json

    from tracediff.models.specdec.scenario.generator import generate
    from tracediff.models.specdec.scenario.profiles import load_profile
    from tracediff.models.specdec.sched.record import COLUMNS, rows_view
    from tracediff.models.specdec.schema import COMPLETION_LANE_COLUMNS
    from tracediff.project.impls import parse_impl
    from tracediff.running.runner import trace_records

    out = tmp_path / "t.trace"
    runner = CliRunner()
    assert runner.invoke(main, ["record", "--seed", "3", "-o", str(out)]).exit_code == 0
    result = runner.invoke(main, ["show", str(out), "--jsonl"])
    assert result.exit_code == 0
    lines = [json.loads(line) for line in result.output.splitlines()]
    assert lines[0]["t"] == "header"
    assert lines[0]["scenario"]["seed"] == 3
    # every record, in order, with every table row an object keyed by its column names
    live = [
        rows_view(r)
        for r in trace_records(generate(load_profile("quick"), 3), parse_impl("reference"))
    ]
    assert [line["t"] for line in lines] == [r.get("t", "header") for r in live]
    plans = [rec for rec in lines if rec["t"] == "plan"]
    wide = next(p for p in plans if p["candidates"] and p["pruned"] and p["round"]["lanes"])
    record = next(r for r in live if r.get("t") == "plan" and r["plan"] == wide["plan"])
    # what `jq '.candidates[] | .value'` reads: the recorded values, column by column
    assert [c["value"] for c in wide["candidates"]] == [row[10] for row in record["candidates"]]
    assert [list(c) for c in wide["candidates"]] == [list(COLUMNS["candidates"])] * len(
        record["candidates"]
    )
    assert wide["pruned"] == [
        dict(zip(COLUMNS["pruned"], row, strict=True)) for row in record["pruned"]
    ]
    assert wide["eligible"][0]["curve"] == record["eligible"][0][6]  # f64[7]: a list of 7 floats
    assert len(wide["eligible"][0]["curve"]) == 7
    assert isinstance(wide["candidates"][0]["prefill"], bool)
    assert wide["round"]["source"] == record["round"][0]
    assert wide["round"]["lanes"][0] == dict(
        zip(COLUMNS["lanes"], record["round"][6][0], strict=True)
    )
    lanes = next(rec["lanes"] for rec in lines if rec["t"] == "completion" and rec["lanes"])
    assert list(lanes[0]) == list(COMPLETION_LANE_COLUMNS)
    shown = runner.invoke(main, ["show", str(out), "--plan", str(wide["plan"])])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output) == wide  # --plan: the same labelled record, indented


def test_run_replays_the_regression_corpus_first(tmp_path: Path) -> None:
    from tracediff.project.corpus import load_corpus

    repo_corpus = Path(__file__).resolve().parents[1] / "scenarios" / "regressions"
    saved = load_corpus(repo_corpus)
    assert saved, "the repository keeps shrunk regressions"
    out = tmp_path / "summary.json"
    result = CliRunner().invoke(
        main,
        ["run", "--seeds", "0", "-j", "1", "--regressions", str(repo_corpus), "--json", str(out)],
    )
    assert result.exit_code == 0, result.output
    import json

    labels = [f"{r['profile']}:{r['seed']}" for r in json.loads(out.read_text())["results"]]
    assert labels[: len(saved)] == [f"regression:{s.profile}:{s.seed}" for s in saved]
    assert labels[len(saved) :] == ["quick:0"]
    skipped = CliRunner().invoke(
        main,
        ["run", "--seeds", "0", "-j", "1", "--regressions", str(repo_corpus), "--no-regressions"],
    )
    assert "identical: 1 scenario," in skipped.output
