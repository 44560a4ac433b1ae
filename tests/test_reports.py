"""Presenters: terminal (fixed width), JSON (round trip, --load), JUnit (junitparser reads
it back), Markdown, and HTML (well-formed, self-contained, rendered by headless Chromium)."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from io import StringIO
from pathlib import Path

import pytest
from click.testing import CliRunner
from junitparser import Error, Failure, JUnitXml
from rich.console import Console

from tracediff.cli import main
from tracediff.compare import json_report
from tracediff.compare.model import DiffReport, ScenarioOutcome, StepOutcome
from tracediff.errors import TraceFormatError
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.project.impls import parse_impl
from tracediff.report import html, junit, markdown
from tracediff.report.terminal import DivergenceView, report_renderable
from tracediff.running.explain import explain, outcome
from tracediff.running.runner import IDENTICAL, run_scenario, write_trace

SUMMATION = "tests.impls.summation:ReversedSumScheduler"
RAISES = "tests.impls.raises:RaisingScheduler"
PRUNE = "tests.impls.eager_prune:EagerPruneScheduler"
WIDTH = 100


def _outcome(impl: str, seed: int, suite: str = "quick") -> ScenarioOutcome:
    scenario = generate(load_profile("quick"), seed)
    specs = (parse_impl("reference"), parse_impl(impl))
    result = run_scenario(scenario, specs)
    divergence = None if result.status == IDENTICAL else explain(scenario, specs, result)
    return outcome(result, divergence, suite)


@pytest.fixture(scope="module")
def report() -> DiffReport:
    outcomes = (
        _outcome(PRUNE, 1, "regressions"),
        _outcome(SUMMATION, 1),  # one request: identical
        _outcome(SUMMATION, 12),
        _outcome(RAISES, 0),
        _outcome(PRUNE, 5),
    )
    return DiffReport(
        title="tracediff gate --profile quick",
        impls=("reference", "broken"),
        outcomes=outcomes,
        steps=(
            StepOutcome("regressions", "failed", "1 of 1 scenarios: 1 decision"),
            StepOutcome("golden", "not configured", "no golden digests"),
            StepOutcome("profile quick", "failed", "3 of 4 scenarios"),
        ),
        wall_seconds=1.5,
    )


def _render(renderable: object, width: int = WIDTH) -> str:
    console = Console(width=width, file=StringIO(), color_system=None)
    console.print(renderable)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(text, str)
    return text


# -- terminal -------------------------------------------------------------------------------
def test_terminal_divergence_at_a_fixed_width(report: DiffReport) -> None:
    d = report.outcomes[2].divergence
    assert d is not None
    text = _render(DivergenceView(d))
    assert all(len(line) <= WIDTH for line in text.splitlines())
    assert "first divergence · quick:12" in text
    assert "record 46 · plan 18 · clock 188,568 µs" in text
    assert "plan 18: candidates[21].expected" in text
    assert "rounding · plan: candidates[*].expected" in text
    assert "by 1 ULP" in text and "1.26e-16" in text
    assert "14.066666666666665" in text and "14.066666666666666" in text  # every digit shown
    assert "≡ same" in text and "≠ 46" in text


def test_terminal_report_lists_signatures_and_verdict(report: DiffReport) -> None:
    text = _render(report_renderable(report))
    assert "signatures (3)" in text
    assert "plan: pruned[*]" in text
    assert "2 │ quick:1 (1 request, 12 plans)" in text
    assert "error · plan(): raised RuntimeError" in text
    assert "RuntimeError: deliberate failure at plan 5" in text
    assert "not configured" in text
    assert "FINDINGS: 4 of 5 scenarios" in text


def test_terminal_renders_at_narrow_width_too(report: DiffReport) -> None:
    text = _render(report_renderable(report, explained=5), width=60)
    assert all(len(line) <= 60 for line in text.splitlines())


# -- JSON -----------------------------------------------------------------------------------
def test_json_round_trip(report: DiffReport) -> None:
    text = json_report.dumps(report)
    data = json.loads(text)
    assert (data["format"], data["version"]) == ("tracediff-diff-report", 1)
    assert [g["path"] for g in data["groups"]][0] == "plan: pruned[*]"
    assert json_report.loads(text) == report


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda d: d.update(format="something-else"), "not a tracediff report"),
        (lambda d: d.update(version=99), "reads version 1, the file has 99"),
        (lambda d: d["outcomes"][2].update(seed="twelve"), "outcomes[2].seed: expected int"),
        (lambda d: d["outcomes"][2]["divergence"].pop("kind"), "missing field 'kind'"),
    ],
)
def test_json_reader_names_what_is_wrong(report: DiffReport, mutate: object, needle: str) -> None:
    data = json.loads(json_report.dumps(report))
    mutate(data)  # type: ignore[operator]
    with pytest.raises(TraceFormatError, match=None) as info:
        json_report.loads(json.dumps(data), "r.json")
    assert needle in str(info.value) and "r.json" in str(info.value)


def test_diff_load_presents_the_same_report(tmp_path: Path) -> None:
    scenario = generate(load_profile("quick"), 12)
    a, b = (write_trace(scenario, parse_impl(n), str(tmp_path)) for n in ("reference", SUMMATION))
    runner = CliRunner()
    direct = runner.invoke(main, ["diff", a, b])
    assert direct.exit_code == 1, direct.output
    assert "first difference at record 46" in direct.output
    saved = tmp_path / "report.json"
    written = runner.invoke(main, ["diff", a, b, "--format", "json", "-o", str(saved)])
    assert written.exit_code == 1
    loaded = runner.invoke(main, ["diff", "--load", str(saved)])
    assert loaded.exit_code == 1
    assert loaded.stdout == direct.stdout
    html_out = runner.invoke(main, ["diff", "--load", str(saved), "--format", "html"])
    assert html_out.stdout.startswith("<!DOCTYPE html>")


def test_diff_identical_and_bad_input(tmp_path: Path) -> None:
    scenario = generate(load_profile("quick"), 2)
    a = write_trace(scenario, parse_impl("reference"), str(tmp_path), str(tmp_path / "a.trace"))
    b = write_trace(scenario, parse_impl("reference"), str(tmp_path), str(tmp_path / "b.trace"))
    runner = CliRunner()
    same = runner.invoke(main, ["diff", a, b])
    assert same.exit_code == 0 and "identical" in same.output
    same_json = runner.invoke(main, ["diff", a, b, "--format", "json"])
    assert same_json.exit_code == 0 and json.loads(same_json.stdout)["outcomes"][0]["status"] == (
        "identical"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for args, needle in (
        (["diff", "--load", str(bad)], "not a JSON report"),
        (["diff", a], "needs two trace files"),
        (["diff", a, b, "--load", str(bad)], "not both"),
        (["diff", a, str(tmp_path / "missing.trace")], "missing.trace"),
        (["diff", a, b, "--context", "-1"], "--context"),
    ):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
        assert needle in result.output and "Traceback" not in result.output


# -- JUnit ----------------------------------------------------------------------------------
def test_junit_reads_back_one_case_per_scenario(report: DiffReport, tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(junit.render(report), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"tracediff.regressions", "tracediff.quick", "tracediff.gate"}
    cases = {case.name: case for case in suites["tracediff.quick"]}
    assert set(cases) == {"quick:1", "quick:12", "quick:0", "quick:5"}
    assert cases["quick:1"].is_passed
    (value,) = cases["quick:12"].result
    assert isinstance(value, Failure) and value.type == "rounding"
    assert "rounding · plan: candidates[*].expected" in (value.message or "")
    assert "ULP" in (value.text or "")
    (error,) = cases["quick:0"].result
    assert isinstance(error, Error) and "deliberate failure at plan 5" in (error.text or "")
    assert suites["tracediff.quick"].failures == 2 and suites["tracediff.quick"].errors == 1
    gate = {case.name: case for case in suites["tracediff.gate"]}
    assert gate["golden"].is_skipped


# -- Markdown -------------------------------------------------------------------------------
def test_markdown_summary(report: DiffReport) -> None:
    text = markdown.render(report)
    assert text.startswith("## tracediff: ❌ 4 findings (reference vs broken)")
    assert "| bookkeeping | `plan: pruned[*]` | 2 | quick:1 (1 request, 12 plans) |" in text
    assert "<details><summary><b>rounding · plan: candidates[*].expected</b>" in text
    assert "| golden | not configured |" in text
    assert len(text.encode()) < 1024 * 1024
    # every table row has the same number of unescaped cells as its header
    for block in text.split("\n\n"):
        rows = [line for line in block.splitlines() if line.startswith("|")]
        if rows:
            widths = {line.replace("\\|", "").count("|") for line in rows}
            assert len(widths) == 1, block


# -- HTML -----------------------------------------------------------------------------------
def _svg(tag: str) -> str:
    return "{http://www.w3.org/2000/svg}" + tag


def test_html_is_well_formed_and_self_contained(report: DiffReport) -> None:
    page = html.render(report)
    root = ET.fromstring(page.split("\n", 1)[1])  # after the doctype
    assert root.tag == "html"
    svgs = root.findall(f".//{_svg('svg')}")
    assert len(svgs) == 3  # one timeline per signature
    bands = svgs[0].findall(f"./{_svg('g')}[@class='band']")
    assert [b.get("data-impl") for b in bands] == ["A", "B"]
    assert all(b.findall(f".//{_svg('rect')}") for b in bands)
    markers = [e for e in svgs[0].iter() if e.get("class") == "divergence-marker"]
    assert markers
    # eager pruning (the first signature) changes the rounds after its divergence
    differs = [e for e in svgs[0].iter() if "differs" in (e.get("class") or "").split()]
    first = report.outcomes[0].divergence
    assert first is not None and first.plan is not None
    assert differs and all(int(e.get("data-plan") or 0) > first.plan for e in differs)
    for needle in ("<script", "<link", "src=", "@import", "url(", 'href="http'):
        assert needle not in page
    assert "quick:12" in page and "plan 18: candidates[21].expected" in page


def test_html_escapes_what_it_shows(report: DiffReport) -> None:
    hostile = DiffReport(title="<script>alert(1)</script> & co", impls=("a<b", "c&d"))
    page = html.render(hostile)
    assert "<script>" not in page
    ET.fromstring(page.split("\n", 1)[1])


def _png_is_not_blank(data: bytes) -> bool:
    """Decode a PNG's pixels (8-bit RGB/RGBA, non-interlaced) and look for two colours."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks, header = 8, [], b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels + 1
    seen: set[bytes] = set()
    for row in range(0, height, max(1, height // 50)):
        line = raw[row * stride + 1 : (row + 1) * stride]  # filtered bytes: enough for variety
        seen.update(line[i : i + channels] for i in range(0, len(line), channels * 7))
        if len(seen) > 16:
            return True
    return False


def test_html_timeline_renders_in_headless_chromium(report: DiffReport, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not on PATH (CI's .ci/run installs Debian's chromium)")
    page = tmp_path / "report.html"
    page.write_text(html.render(report), encoding="utf-8")
    shot = tmp_path / "shot.png"
    common = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--window-size=1200,800",
    ]
    env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
    url = page.as_uri()
    dom = subprocess.run(
        [*common, "--dump-dom", url], capture_output=True, text=True, timeout=90, env=env
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('class="timeline"') == 3
    assert 'class="band" data-impl="B"' in dom.stdout
    assert 'class="round' in dom.stdout and 'class="divergence-marker"' in dom.stdout
    subprocess.run([*common, f"--screenshot={shot}", url], capture_output=True, timeout=90, env=env)
    assert shot.is_file() and shot.stat().st_size > 2000
    assert _png_is_not_blank(shot.read_bytes())


def test_at_80_columns_no_field_name_is_cut() -> None:
    """With a long implementation name squeezing the columns, the signatures table wraps
    the signature's field path and the state field where the implementations first
    disagreed at a narrow terminal, never cuts them."""
    stale = "tests.impls.stale_advance:StaleAdvanceScheduler"
    report = DiffReport(
        title="tracediff run", impls=("reference", stale), outcomes=(_outcome(stale, 37),)
    )
    text = _render(report_renderable(report, explained=5), width=80)
    table = text.split("╭", 1)[0]  # the signatures table, before the first panel
    assert "…" not in table, table
    rows = [line.split("│")[1:-1] for line in table.splitlines() if line.startswith("│")]
    columns = ["".join(cells[k].strip() for cells in rows) for k in range(len(rows[0]))]
    assert "plan:round.lanes[*].prefix" in columns, table
    assert "requests[*].pending_advance" in columns, table
