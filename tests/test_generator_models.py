"""A model written with the generator-only API (tests/usermodel/lru_model.py: an LRU cache,
``generate_from`` against draws, no shrink passes, no fuzz strategy) shrinks and fuzzes as
well as hand-written passes do; the toy model's draws alone shrink to within one job of its
hand-written passes. Every run here is a fresh process with the models on its path, as a
user's installed distributions would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
PATH = os.pathsep.join([str(TESTS / "usermodel"), str(TESTS / "toymodel")])
# quick seeds on which fifo (no refresh on a hit) diverges from the reference LRU
DIVERGING = (8, 13, 25)


def td(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=PATH, COLUMNS="200")
    env.pop("TRACEDIFF_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "tracediff", "--model", "lru", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_lru_model_has_no_hand_written_search() -> None:
    source = (TESTS / "usermodel" / "lru_model.py").read_text(encoding="utf-8")
    assert "def generate_from" in source
    for member in ("def generate(", "def shrink_passes", "def fuzz_strategy", "def size_key"):
        assert member not in source


@pytest.mark.parametrize("seed", DIVERGING)
def test_its_draws_shrink_to_within_one_access_of_the_minimum(tmp_path: Path, seed: int) -> None:
    """The bug needs a full cache of two keys, a hit on the older one and a miss: 4 accesses
    (capacity 1 evicts on every miss, refreshed or not)."""
    done = td(tmp_path, "shrink", "--seed", str(seed), "--impl", "reference", "--impl", "fifo",
              "--json", "s.json")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads((tmp_path / "s.json").read_text())
    shrunk = report["regression"]
    assert 4 <= len(shrunk["accesses"]) == report["after"]["requests"] <= 5, shrunk
    again = td(tmp_path, "shrink", "--seed", str(seed), "--impl", "reference", "--impl", "fifo",
               "--json", "t.json")  # fmt: skip
    assert again.returncode == 1
    assert json.loads((tmp_path / "t.json").read_text())["regression"] == shrunk


def test_its_generator_fuzzes_and_finds_the_bug(tmp_path: Path) -> None:
    done = td(tmp_path, "fuzz", "--impl", "reference", "--impl", "fifo", "--max-examples", "400",
              "--seed", "3")  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "DIVERGED" in done.stdout and "decision" in done.stdout


TOY_SHRINK = """
import sys, json
import toy_model
from tracediff.models import BaseModel
from tracediff.project.impls import parse_impl
from tracediff.search.shrink import shrink

model = toy_model.MODEL
profile = model.load_profile("quick")
specs = (parse_impl("reference"), parse_impl("optimized"))
sizes = {}
for seed in (int(s) for s in sys.argv[1:]):
    scenario = model.generate(profile, seed)
    hand = shrink(scenario, specs).shrunk
    toy_model.ToyModel.shrink_passes = BaseModel.shrink_passes  # the draws alone
    drawn = shrink(scenario, specs).shrunk
    del toy_model.ToyModel.shrink_passes
    sizes[seed] = [len(hand.jobs), len(drawn.jobs)]
print(json.dumps(sizes))
"""


def test_the_toys_draws_alone_shrink_within_one_job_of_its_hand_written_passes(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracediff]\nmodel = "toy"\n')
    env = dict(os.environ, PYTHONPATH=PATH)
    env.pop("TRACEDIFF_MODEL", None)
    done = subprocess.run(
        [sys.executable, "-c", TOY_SHRINK, "1", "7", "11", "16", "17", "19"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sizes = json.loads(done.stdout)
    assert sizes and all(drawn <= hand + 1 for hand, drawn in sizes.values()), sizes


def test_every_report_of_the_lru_model_speaks_its_words_not_the_schedulers(
    tmp_path: Path,
) -> None:
    """The second user model's reports (run, gate's JUnit/Markdown/HTML/JSON, diff, show,
    replay --state, coverage) hold none of the speculative-decoding scheduler's words."""
    import re

    from tests.test_toy_model import SPECDEC_WORDS

    bug = ("--impl", "reference", "--impl", "fifo")
    for impl, name in (("reference", "a.trace"), ("fifo", "b.trace")):
        assert td(tmp_path, "record", "--seed", "8", "--impl", impl, "-o", name).returncode == 0
    outputs = [
        td(tmp_path, "run", *bug, "--json", "run.json"),
        td(tmp_path, "gate", *bug, "--junit", "j.xml", "--markdown", "s.md", "--html", "r.html",
           "--json", "g.json"),
        td(tmp_path, "diff", "a.trace", "b.trace"),
        td(tmp_path, "diff", "a.trace", "b.trace", "--all"),
        td(tmp_path, "show", "a.trace"),
        td(tmp_path, "replay", "a.trace", "--impl", "fifo", "--state"),
        td(tmp_path, "coverage", "--json", "c.json"),
    ]  # fmt: skip
    assert outputs[0].returncode == 1 and outputs[2].returncode == 1
    texts = [done.stdout + done.stderr for done in outputs]
    for name in ("run.json", "j.xml", "s.md", "r.html", "g.json", "c.json"):
        text = (tmp_path / name).read_text(encoding="utf-8")
        texts.append(re.sub(r"<(style|script)\b.*?</\1>", "", text, flags=re.S))
    for text in texts:
        text = re.sub(r"Dask\s+scheduler", "", text)
        found = sorted({m.group(0).lower() for m in SPECDEC_WORDS.finditer(text)})
        assert not found, f"speaks of {found}:\n{text[:3000]}"
