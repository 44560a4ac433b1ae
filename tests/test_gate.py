"""``tracediff gate``: the CI entry point (CliRunner): steps in order, reports, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from junitparser import Failure, JUnitXml

from tracediff.cli import main
from tracediff.cli.gate import golden_step
from tracediff.errors import ScenarioError, TraceFormatError
from tracediff.impls import parse_impl
from tracediff.regressions import load_corpus, save_scenario
from tracediff.scenario.generator import generate
from tracediff.scenario.profiles import load_profile

STALE = "tests.impls.stale_advance:StaleAdvanceScheduler"


@pytest.fixture(autouse=True)
def _no_step_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under GitHub Actions the variable is set: these tests must not write to it."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


def _gate(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    corpus = tmp_path / "corpus"
    corpus.mkdir(exist_ok=True)
    base = ["gate", "-j", "1", "--regressions", str(corpus)]
    base += ["--artifacts", str(tmp_path / "artifacts")]
    return CliRunner().invoke(main, [*base, *args], env=env)


def test_all_good_exits_0_and_writes_the_reports(tmp_path: Path) -> None:
    junit, md, page = tmp_path / "j.xml", tmp_path / "s.md", tmp_path / "r.html"
    summary = tmp_path / "step-summary.md"
    summary.write_text("earlier step\n")
    result = _gate(
        tmp_path,
        "--seeds", "0,1",
        "--impl", "reference", "--impl", "reference",
        "--junit", str(junit), "--markdown", str(md), "--html", str(page),
        env={"GITHUB_STEP_SUMMARY": str(summary)},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "golden: passed" in result.output  # the repository's golden/quick.json, seeds 0, 1
    assert "all good: 2 scenarios" in result.output
    xml = JUnitXml.fromfile(str(junit))
    cases = [case for suite in xml for case in suite]
    assert {c.name for c in cases} >= {"quick:0", "quick:1", "golden"}
    assert md.read_text().startswith("## tracediff: ✅ all good")
    # appended to GitHub's step summary, after what was there
    assert summary.read_text().startswith("earlier step\n## tracediff: ✅ all good")
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert not (tmp_path / "artifacts").exists()  # nothing to keep


def test_findings_exit_1_with_explanations_and_artifacts(tmp_path: Path) -> None:
    junit, md = tmp_path / "j.xml", tmp_path / "s.md"
    result = _gate(
        tmp_path,
        "--seeds", "37,40",
        "--impl", "reference", "--impl", STALE,
        "--junit", str(junit), "--markdown", str(md),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "decision · plan: round.lanes[*].prefix" in result.output
    xml = JUnitXml.fromfile(str(junit))
    cases = {case.name: case for suite in xml for case in suite}
    (failure,) = cases["quick:37"].result
    assert isinstance(failure, Failure) and failure.type == "decision"
    assert cases["quick:40"].is_passed
    assert "| decision | `plan: round.lanes[*].prefix` | 1 | quick:37" in md.read_text()
    kept = sorted(p.name for p in (tmp_path / "artifacts" / "quick").iterdir())
    assert kept == [
        "quick-37-reference.trace",
        "quick-37-tests.impls.stale_advance_StaleAdvanceScheduler.trace",
    ]
    # the kept report reads back, and the kept traces explain the same way
    report = tmp_path / "artifacts" / "report.json"
    loaded = CliRunner().invoke(main, ["diff", "--load", str(report)])
    assert loaded.exit_code == 1 and "plan: round.lanes[*].prefix" in loaded.output
    traces = [str(tmp_path / "artifacts" / "quick" / name) for name in kept]
    again = CliRunner().invoke(main, ["diff", *traces, "--format", "json"])
    (outcome,) = json.loads(again.stdout)["outcomes"]
    assert outcome["divergence"]["signature"] == "decision · plan: round.lanes[*].prefix"


def test_the_regression_corpus_runs_first(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    save_scenario(generate(load_profile("quick"), 37), corpus)
    junit = tmp_path / "j.xml"
    result = _gate(
        tmp_path, "--seeds", "40", "--impl", "reference", "--impl", STALE, "--junit", str(junit)
    )
    assert result.exit_code == 1, result.output
    order = [line.split(":")[1].strip() for line in result.output.splitlines()
             if line.startswith("gate: ") and line.count(":") >= 2]  # fmt: skip
    assert order[:3] == ["regressions", "regressions", "golden"]
    assert "profile quick" in order
    suites = {suite.name: suite for suite in JUnitXml.fromfile(str(junit))}
    assert suites["tracediff.regressions"].failures == 1
    assert suites["tracediff.quick"].failures == 0
    assert (tmp_path / "artifacts" / "regressions").is_dir()
    stopped = _gate(
        tmp_path, "--seeds", "40", "--impl", "reference", "--impl", STALE, "--fail-fast"
    )
    assert stopped.exit_code == 1
    assert "profile quick" not in stopped.output


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("{not json", "not valid JSON (line 1"),
        ("[1, 2]", "expected a scenario object"),
        ('{"profile": "quick"}', "malformed scenario"),
    ],
)
def test_a_bad_corpus_file_is_exit_2_naming_it(tmp_path: Path, content: str, needle: str) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "broken.json").write_text(content)
    result = _gate(tmp_path, "--seeds", "0")
    assert result.exit_code == 2, result.output
    assert "broken.json" in result.output and needle in result.output
    assert "Traceback" not in result.output


def test_load_corpus(tmp_path: Path) -> None:
    assert load_corpus(tmp_path / "absent", missing_ok=True) == []
    scenarios = [generate(load_profile("quick"), seed) for seed in (5, 3)]
    for scenario in scenarios:
        save_scenario(scenario, tmp_path)
    assert load_corpus(tmp_path) == sorted(scenarios, key=lambda s: f"quick-{s.seed}.json")
    (tmp_path / "zz.json").write_text('"text"')
    with pytest.raises(ScenarioError, match="zz.json"):
        load_corpus(tmp_path)
    (tmp_path / "zz.json").write_text("")
    with pytest.raises(TraceFormatError, match="zz.json"):
        load_corpus(tmp_path)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--regressions", "/nonexistent/corpus"], "is not a directory"),
        (["--junit", "/nonexistent/dir/j.xml"], "--junit"),
        (["--impl", "reference"], "at least two"),
        (["--profile", "nope"], "unknown profile 'nope'"),
        (["--context", "-2"], "--context"),
        (["--timeout", "0"], "--timeout"),
    ],
)
def test_bad_input_is_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(main, ["gate", "--seeds", "0", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output and "Traceback" not in result.output


def test_golden_step_is_a_no_op_without_a_manifest(tmp_path: Path) -> None:
    empty = tmp_path / "golden"
    empty.mkdir()
    step, outcomes = golden_step(
        "quick", (parse_impl("reference"),), str(empty), 1, str(tmp_path / "a"), seeds=[0]
    )
    assert (step.name, step.status, outcomes) == ("golden", "not configured", [])


def test_golden_step_checks_every_implementation_against_the_manifest(tmp_path: Path) -> None:
    golden = Path(__file__).resolve().parents[1] / "golden"
    specs = (parse_impl("reference"), parse_impl(STALE))
    step, outcomes = golden_step("quick", specs, str(golden), 1, str(tmp_path / "a"), seeds=[3, 37])
    assert step.status == "failed", step.detail
    # the reference matches its accepted digests; the stale pending advance does not (seed 37)
    assert [(o.suite, o.seed, o.status) for o in outcomes] == [("golden", 37, "diverged")]
    assert "reference matches all 2 digests" in step.detail
