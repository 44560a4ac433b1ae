"""``tracediff gate``: the CI entry point (CliRunner): steps in order, reports, exit codes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from junitparser import Failure, JUnitXml

from tracediff.cli import main
from tracediff.errors import ScenarioError, TraceFormatError
from tracediff.filenames import scenario_tag
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.corpus import load_corpus, save_scenario

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
    tag = scenario_tag(generate(load_profile("quick"), 37))  # the scenario's content
    assert kept == [
        f"quick-37-{tag}-reference.trace",
        f"quick-37-{tag}-tests.impls.stale_advance_StaleAdvanceScheduler.trace",
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
    # the corpus first; then the profile's one run, whose digests the golden step checks
    assert order == ["regressions", "regressions", "profile quick", "golden", "profile quick"]
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
        (["--regressions", "/nonexistent/corpus"], "does not exist"),
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


def test_a_missing_golden_dir_is_exit_2(tmp_path: Path) -> None:
    for flag in ("--golden-dir", "--golden"):  # --golden: the old name, still accepted
        result = _gate(tmp_path, "--seeds", "0", flag, str(tmp_path / "nonexistent"))
        assert result.exit_code == 2, result.output
        assert "does not exist" in result.output and "Traceback" not in result.output


def test_golden_is_not_configured_without_a_manifest(tmp_path: Path) -> None:
    empty = tmp_path / "golden"
    empty.mkdir()
    result = _gate(tmp_path, "--seeds", "0", "--golden-dir", str(empty))
    assert result.exit_code == 0, result.output
    assert "golden: not configured" in result.output


def _altered_manifest(tmp_path: Path, seeds: tuple[int, ...]) -> Path:
    """A copy of the repository's quick manifest whose digests of ``seeds`` are wrong."""
    source = Path(__file__).resolve().parents[1] / "golden" / "quick.json"
    data = json.loads(source.read_text())
    for row in data["scenarios"]:
        if row["seed"] in seeds:
            row["digest"] = "0" * 64
    directory = tmp_path / "golden"
    directory.mkdir()
    (directory / "quick.json").write_text(json.dumps(data))
    return directory


def test_each_finding_is_counted_once_with_its_explanation_and_reproduction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Known numbers: the corpus's seed-37 scenario and profile seed 37 diverge under the
    stale pending advance (2 findings); the manifest's digests of seeds 37 and 40 are wrong,
    so seed 40, on which both implementations agree, is a golden finding (1) and seed 37,
    already a profile finding, is not counted again. 3 scenarios, 3 findings."""
    corpus = tmp_path / "corpus"
    save_scenario(generate(load_profile("quick"), 37), corpus)
    golden_dir = _altered_manifest(tmp_path, (37, 40))
    junit, md, page = tmp_path / "j.xml", tmp_path / "s.md", tmp_path / "r.html"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    result = _gate(
        tmp_path,
        "--seeds", "37,40", "--impl", "reference", "--impl", STALE,
        "--golden-dir", str(golden_dir),
        "--junit", str(junit), "--markdown", str(md), "--html", str(page),
    )  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "FINDINGS: 3 of 3 scenarios" in result.output
    xml = JUnitXml.fromfile(str(junit))
    suites = {suite.name: suite for suite in xml}
    # 3 scenarios + 3 steps, and each failed step is a failing test case of its own
    assert (xml.tests, xml.failures, xml.errors) == (3 + 3, 3 + 3, 0)
    steps = {case.name: case for case in suites["tracediff.gate"]}
    assert all(steps[name].result for name in ("regressions", "golden", "profile quick"))
    assert [c.name for c in suites["tracediff.regressions"]] == ["regression:quick:37"]
    assert [c.name for c in suites["tracediff.golden"]] == ["quick:40"]
    assert [c.name for c in suites["tracediff.quick"]] == ["quick:37"]
    bodies = {
        case.name: case.result[0].text
        for suite in xml
        if suite.name != "tracediff.gate"
        for case in suite
        if case.result
    }
    assert "tracediff run --scenario" in bodies["regression:quick:37"]
    assert "reproduce: tracediff run --profile quick --seeds 37" in bodies["quick:37"]
    assert "golden: " in bodies["quick:37"]  # the golden mismatch, noted, not counted
    assert "all implementations agree" in bodies["quick:40"]
    assert "tracediff golden check --profile quick --seeds 40" in bodies["quick:40"]
    text = md.read_text()
    assert text.startswith("## tracediff: ❌ 3 findings")
    rows = [line for line in text.splitlines() if line.startswith("| regression:") or
            line.startswith("| quick:")]  # fmt: skip
    # the explained findings first, the golden mismatch (one sentence) last
    assert [row.split(" | ")[0] for row in rows][-1] == "| quick:40"
    assert "plan 22: round.lanes[0].prefix" in rows[0]
    html = page.read_text()
    assert html.index("regression:quick:37") < html.index("all implementations agree")
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert len(annotations) == 3
    assert annotations[0].startswith("::error title=tracediff regressions%3A regression%3A")
    # every reproduce command runs as written and shows its finding again (exit 1)
    for name, body in bodies.items():
        command = body.rsplit("reproduce: ", 1)[1].strip()
        again = CliRunner().invoke(main, shlex.split(command)[1:])
        assert again.exit_code == 1, (name, command, again.output)


def test_a_passing_gate_from_a_subdirectory_uses_the_project_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    corpus = project / "corpus"
    save_scenario(generate(load_profile("quick"), 3), corpus)
    golden_dir = _altered_manifest(project, ())
    (project / "pyproject.toml").write_text(
        '[tool.tracediff]\nregressions = "corpus"\ngolden = "golden"\nartifacts = "art"\n'
        'impls = ["reference", "reference"]\n'
    )
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS")
    monkeypatch.chdir(project / "docs")
    result = CliRunner().invoke(main, ["gate", "-j", "1", "--seeds", "0"])
    assert result.exit_code == 0, result.output
    assert "regressions: passed: 1 scenario identical" in result.output
    assert "match all 1 digest of quick.json in golden (" in result.output
    assert golden_dir.name == "golden" and "corpus (" in result.output
    assert not (project / "art").exists() and not (project / "docs" / "artifacts").exists()
    (project / "pyproject.toml").write_text('[tool.tracediff]\ngolden = "missing"\n')
    missing = CliRunner().invoke(main, ["gate", "-j", "1", "--seeds", "0"])
    assert missing.exit_code == 2, missing.output
    assert "[tool.tracediff] golden" in missing.output and "does not exist" in missing.output


def test_every_scenario_and_re_run_of_the_gate_goes_through_its_executor(tmp_path: Path) -> None:
    """Seed 37 diverges (run, then explained); seed 40's digest is wrong in the manifest
    while both implementations agree (its reference change is re-run): all on the executor
    the caller gave, none in this process behind its back."""
    from collections.abc import Callable, Iterable
    from typing import Any

    from tracediff.executor.base import Outcome, Task
    from tracediff.executor.inline import InlineExecutor
    from tracediff.gate import GateOptions, run_gate
    from tracediff.project.impls import parse_impl

    seen: list[tuple[str, int]] = []

    class Recording(InlineExecutor):
        def stream(
            self,
            task: Task,
            items: Iterable[tuple[int, Any]],
            on_outcome: Callable[[Outcome], None],
            **kwargs: Any,
        ) -> None:
            items = list(items)
            seen.append((getattr(task, "__name__", "?"), len(items)))
            super().stream(task, items, on_outcome, **kwargs)

    profile = load_profile("quick")
    options = GateOptions(
        profile="quick",
        scenarios=(generate(profile, 37), generate(profile, 40)),
        impls=(parse_impl("reference"), parse_impl(STALE)),
        seeds_given=True,
        golden_dir=_altered_manifest(tmp_path, (40,)),
        artifacts=str(tmp_path / "artifacts"),
    )
    with Recording() as executor:
        result = run_gate(options, lambda _line: None, executor=executor)
    assert [(o.label, o.suite) for o in result.report.findings] == [
        ("quick:37", "quick"),
        ("quick:40", "golden"),
    ]
    tasks = dict(seen)
    assert tasks["run_task"] == 2  # each scenario once
    assert tasks["explain_task"] == 1  # seed 37's divergence
    assert tasks["_reference_change_task"] == 1  # seed 40's golden mismatch
