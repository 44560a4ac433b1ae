"""The toy model (tests/toymodel/toy_model.py) plugged in as a user would: an installed
distribution's ``tracediff.models`` entry point, found on the import path, selected by the
project's ``[tool.tracediff] model``. Every command runs on it in a project of its own, in
a fresh process, with nothing of the speculative-decoding scheduler in its scenarios.

The toy's ``optimized`` breaks ties by arrival instead of by id, so it diverges from the
reference on some seeds; ``fast`` decides exactly as the reference.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

TOY = Path(__file__).resolve().parent / "toymodel"
PYPROJECT = """\
[tool.tracediff]
model = "toy"
impls = ["reference", "fast"]
"""
DIVERGING = ["--impl", "reference", "--impl", "optimized"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
    return tmp_path


def td(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TOY)  # the toy's module and its dist-info (the entry point)
    env.pop("TRACEDIFF_REGRESSIONS", None)  # the project's own corpus
    env.pop("TRACEDIFF_MODEL", None)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_entry_point_registers_the_model_and_the_project_selects_it(project: Path) -> None:
    done = td(project, "models", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["toy"]["in_effect"] and not rows["specdec"]["in_effect"]
    assert rows["toy"]["impls"] == "reference, fast, optimized"
    bad = td(project, "--model", "nope", "run")
    assert bad.returncode == 2 and "unknown model 'nope'" in bad.stderr
    # --model after the command means the same; another model's defaults then apply
    guest = td(project, "run", "--seeds", "0..1", "--model", "specdec")
    assert guest.returncode == 0, guest.stdout + guest.stderr
    assert "reference vs optimized" in guest.stdout
    missing = td(project, "run", "--model")
    assert missing.returncode == 2 and "requires an argument" in missing.stderr


def test_run_is_identical_for_fast_and_finds_the_tie_break_of_optimized(project: Path) -> None:
    same = td(project, "run", "--json", "a.json")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical: 20 scenarios" in same.stdout
    again = td(project, "run", "--json", "b.json")
    assert again.returncode == 0
    digests = [
        [
            [i["digest"] for i in s["impls"]]
            for s in json.loads((project / n).read_text())["results"]
        ]
        for n in ("a.json", "b.json")
    ]
    assert digests[0] == digests[1]  # same inputs, same bytes
    diverged = td(project, "run", *DIVERGING)
    assert diverged.returncode == 1
    assert "FINDINGS: 6 of 20 scenarios" in diverged.stdout
    assert "pick" in diverged.stdout and "decision" in diverged.stdout


def test_record_diff_show_and_replay_read_the_toy_trace(project: Path) -> None:
    for impl, name in (("reference", "a.trace"), ("optimized", "b.trace")):
        done = td(project, "record", "--seed", "1", "--impl", impl, "-o", name)
        assert done.returncode == 0, done.stderr
    diff = td(project, "diff", "a.trace", "b.trace")
    assert diff.returncode == 1
    assert "first difference at record 9 (plan 3): decision" in diff.stdout
    # the trace names its model: it reads as a toy trace whatever model is in effect
    show = td(project, "--model", "specdec", "show", "a.trace")
    assert show.returncode == 0, show.stderr
    assert "toy_model:Reference" in show.stdout and "plan records" in show.stdout
    plan = td(project, "show", "a.trace", "--plan", "2")
    assert json.loads(plan.stdout) == {"t": "plan", "plan": 2, "now": 5, "pick": 3, "left": 1}
    assert td(project, "replay", "a.trace", "--impl", "fast").returncode == 0
    mismatch = td(project, "replay", "a.trace", "--impl", "optimized")
    assert mismatch.returncode == 1
    assert "MISMATCH at record 9 (plan 3" in mismatch.stdout and "pick" in mismatch.stdout


def test_shrink_saves_a_toy_regression_that_the_gate_replays(project: Path) -> None:
    done = td(project, "shrink", "--seed", "1", *DIVERGING, "--save")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "shrunk scenario: 3 jobs" in done.stdout
    saved = list((project / "scenarios" / "regressions").glob("*.json"))
    assert len(saved) == 1
    document = json.loads(saved[0].read_text())
    assert document["model"] == "toy" and len(document["jobs"]) == 3
    failing = td(project, "gate", *DIVERGING)
    assert failing.returncode == 1
    assert "regressions" in failing.stdout and "FAIL" in failing.stdout.upper()
    passing = td(project, "gate")
    assert passing.returncode == 0, passing.stdout
    assert "1 scenario identical" in passing.stdout


def test_golden_digests_of_the_toy_are_written_checked_and_gated(project: Path) -> None:
    assert td(project, "golden", "update").returncode == 0
    assert td(project, "golden", "accept").returncode == 0
    manifest = json.loads((project / "golden" / "quick.json").read_text())
    assert len(manifest["scenarios"]) == 20 and manifest["impl"] == "fast"
    ok = td(project, "golden", "check")
    assert ok.returncode == 0 and "matches all 20 digests" in ok.stdout
    assert td(project, "golden", "check", "--impl", "optimized").returncode == 1
    gate = td(project, "gate")
    assert gate.returncode == 0, gate.stdout
    assert "all good" in gate.stdout


def test_coverage_counts_the_toy_features_and_clauses(project: Path) -> None:
    done = td(project, "coverage", "--json", "c.json", "--min", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((project / "c.json").read_text())
    features = {f["name"]: f["scenarios"] for f in report["features"]}
    clauses = {c["name"]: c["scenarios"] for c in report["clauses"]}
    assert set(features) == {"queue", "tie"} and set(clauses) == {"shortest", "lowest-id"}
    assert all(count >= 3 for count in (*features.values(), *clauses.values()))
    assert report["min_scenarios"] == 3 and report["missing"] == []


def test_a_campaign_and_fuzz_find_the_divergence(project: Path) -> None:
    campaign = td(project, "campaign", "--out", "c", "--seeds", "0..30", *DIVERGING)
    assert campaign.returncode == 1
    assert "FINDINGS: 12 of 31 scenarios" in campaign.stdout
    assert td(project, "campaign", "--out", "d", "--seeds", "0..30").returncode == 0
    fuzz = td(project, "fuzz", *DIVERGING)
    assert fuzz.returncode == 1 and "DIVERGED" in fuzz.stdout


def test_the_toy_model_uses_only_the_public_seam() -> None:
    """What a user's model may import of tracediff: the seam, the model base, the errors."""
    tree = ast.parse((TOY / "toy_model.py").read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tracediff")
    }
    assert imported == {"tracediff.model", "tracediff.models", "tracediff.errors"}


def test_another_models_data_lives_in_a_subdirectory_named_after_it(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's data is its configured model's; a model chosen for one command reads
    and writes the corpus and the manifests in a subdirectory named after it."""
    from tracediff import model as models
    from tracediff.project import resolve

    monkeypatch.syspath_prepend(str(TOY))
    monkeypatch.delenv("TRACEDIFF_REGRESSIONS", raising=False)
    models._entry_points.cache_clear()
    models.get.cache_clear()
    try:
        monkeypatch.delenv("TRACEDIFF_MODEL", raising=False)
        own = resolve(project)
        assert own.model == "toy" and own.golden.path == project / "golden"
        assert own.regressions.path == project / "scenarios" / "regressions"
        monkeypatch.setenv("TRACEDIFF_MODEL", "specdec")
        guest = resolve(project)
        assert guest.model == "specdec" and guest.impls == ("reference", "optimized")
        assert guest.golden.path == project / "golden" / "specdec"
        assert guest.regressions.path == project / "scenarios" / "regressions" / "specdec"
    finally:
        models._entry_points.cache_clear()
        models.get.cache_clear()


# The speculative-decoding scheduler's vocabulary: none of it may reach another model's
# reports (the core takes its wording from the model in effect).
SPECDEC_WORDS = re.compile(
    r"\b(scheduler|acceptance|credit|lanes?|drafts?|prefill\w*|rounds?|probe|plan counter)\b",
    re.IGNORECASE,
)


def test_every_report_of_the_toy_speaks_its_words_not_the_schedulers(project: Path) -> None:
    for impl, name in (("reference", "a.trace"), ("optimized", "b.trace")):
        assert td(project, "record", "--seed", "1", "--impl", impl, "-o", name).returncode == 0
    outputs = {
        "run": td(project, "run", *DIVERGING, "--json", "run.json"),
        "gate": td(
            project,
            "gate",
            *DIVERGING,
            "--junit",
            "j.xml",
            "--markdown",
            "s.md",
            "--html",
            "r.html",
            "--json",
            "g.json",
        ),  # fmt: skip
        "diff": td(project, "diff", "a.trace", "b.trace"),
        "show": td(project, "show", "a.trace"),
        "replay": td(project, "replay", "a.trace", "--impl", "optimized", "--state"),
        "replay-until": td(
            project, "replay", "a.trace", "--impl", "fast", "--until", "2", "--state"
        ),
        "pair": td(
            project,
            "replay",
            "a.trace",
            "--impl",
            "reference",
            "--impl",
            "optimized",
            "--until",
            "3",
            "--state",
        ),  # fmt: skip
        "coverage": td(project, "coverage", "--json", "c.json"),
        "coverage-help": td(project, "coverage", "--help"),
    }
    assert outputs["replay-until"].returncode == 0, outputs["replay-until"].stderr
    # the toy's state, laid out in no model's words
    assert "fast before plan 2\nwaiting: [(3, 2), (5, 4)]" in outputs["replay-until"].stdout
    texts = {name: done.stdout + done.stderr for name, done in outputs.items()}
    for name in ("run.json", "j.xml", "s.md", "r.html", "g.json", "c.json"):
        path = project / name
        assert path.exists(), f"{name} was not written"
        text = path.read_text(encoding="utf-8")
        if name.endswith(".html"):  # the page's text, not its styles and scripts
            text = re.sub(r"<(style|script)\b.*?</\1>", "", text, flags=re.S)
        texts[name] = text
    for name, text in texts.items():
        text = re.sub(r"Dask\s+scheduler", "", text)  # Dask's own word for its server
        found = sorted({m.group(0).lower() for m in SPECDEC_WORDS.finditer(text)})
        assert not found, f"{name} speaks of {found}:\n{text[:3000]}"


def test_the_projects_profile_files_reach_a_users_model(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "pyproject.toml").write_text(PYPROJECT + 'profiles = "prof"\n', encoding="utf-8")
    (project / "prof").mkdir()
    (project / "prof" / "wide.toml").write_text("seeds = 5\nmax_jobs = 30\n", encoding="utf-8")
    done = td(project, "run", "--profile", "wide")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "identical: 5 scenarios" in done.stdout
    # $TRACEDIFF_PROFILES comes first
    (project / "env").mkdir()
    (project / "env" / "wide.toml").write_text("seeds = 3\n", encoding="utf-8")
    monkeypatch.setenv("TRACEDIFF_PROFILES", str(project / "env"))
    assert "identical: 3 scenarios" in td(project, "run", "--profile", "wide").stdout
    monkeypatch.delenv("TRACEDIFF_PROFILES")
    bad = project / "prof" / "bad.toml"
    bad.write_text("max_jobs = 'x'\n", encoding="utf-8")
    refused = td(project, "run", "--profile", "bad")
    assert refused.returncode == 2 and "bad.toml: seeds and max_jobs" in refused.stderr
    # another model chosen for one command finds its files in a subdirectory named after it,
    # with a [workload] table read through the public workload API
    samples = Path(__file__).resolve().parent.parent / "workloads"
    (project / "prof" / "kvbatch").mkdir()
    (project / "prof" / "kvbatch" / "traffic.toml").write_text(
        f'seeds = "0..3"\n[workload]\nfile = "{samples / "azure_code.csv"}"\nwindow = 6\n',
        encoding="utf-8",
    )
    guest = td(project, "--model", "kvbatch", "run", "--profile", "traffic")
    assert guest.returncode == 0, guest.stdout + guest.stderr
    assert "identical: 4 scenarios" in guest.stdout
    show = td(project, "--model", "kvbatch", "record", "--profile", "traffic", "--seed", "1",
              "-o", "k.trace")  # fmt: skip
    assert show.returncode == 0, show.stderr
    header = json.loads(td(project, "show", "k.trace", "--jsonl").stdout.splitlines()[0])
    origin = header["scenario"]["workload"]
    assert origin["name"] == "azure_code" and origin["length"] == 6


def test_the_example_package_installs_and_registers_the_model(tmp_path: Path) -> None:
    """examples/toy-model is the model as a user ships one: its wheel holds the module the
    tests load and the entry point, and installed (here with --target, built from a copy so
    that the checkout gets no build/) it is a registered model with no PYTHONPATH trick."""
    import shutil

    example = Path(__file__).resolve().parents[1] / "examples" / "toy-model"
    copy = tmp_path / "src"
    shutil.copytree(example, copy, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), "."],
        cwd=copy, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("toy_model-0.1-*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    assert (site / "toy_model.py").read_bytes() == (TOY / "toy_model.py").read_bytes()
    env = dict(os.environ, PYTHONPATH=str(site), COLUMNS="200")
    env.pop("TRACEDIFF_MODEL", None)
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tracediff", "--model", "toy", "models", "--json"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["toy"]["in_effect"] and rows["toy"]["impls"] == "reference, fast, optimized"
