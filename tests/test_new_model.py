"""``tracediff new-model NAME`` writes a model that runs identical at once, with a planted
bug that is caught, explained and shrunk, tests that pass, and code that lints clean."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from tracediff.cli import main

BIN = Path(sys.executable).parent


def _registered(root: Path, name: str) -> dict[str, str]:
    """The entry point `pip install -e` would register, as a dist-info beside the module."""
    info = root / f"{name}_model-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}-model\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[tracediff.models]\n{name} = {name}_model:MODEL\n")
    env = dict(os.environ, PYTHONPATH=str(root), COLUMNS="200")
    env.pop("TRACEDIFF_MODEL", None)
    env.pop("TRACEDIFF_REGRESSIONS", None)
    return env


def test_new_model_runs_identical_and_catches_its_planted_bug(tmp_path: Path) -> None:
    done = CliRunner().invoke(main, ["new-model", "shop", "--dir", str(tmp_path / "shop")])
    assert done.exit_code == 0, done.output
    root = tmp_path / "shop"
    names = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert names == ["README.md", "pyproject.toml", "shop_model.py", "shop_model_bugs.py",
                     "tests/test_shop.py"]  # fmt: skip
    env = _registered(root, "shop")

    def td(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tracediff", *args], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300, check=False)  # fmt: skip

    same = td("run")  # the pyproject's [tool.tracediff] picks the model and the pair
    assert same.returncode == 0, same.stdout + same.stderr
    assert "identical: 40 scenarios" in same.stdout and "reference vs fast" in same.stdout
    bug = ("--impl", "reference", "--impl", "shop_model_bugs:ByArrival")
    found = td("run", *bug, "--json", "r.json")
    assert found.returncode == 1 and "decision" in found.stdout
    results = json.loads((root / "r.json").read_text())["results"]
    seed = next(r["seed"] for r in results if r["status"] == "diverged")
    shrunk = td("shrink", "--seed", str(seed), *bug)
    assert shrunk.returncode == 1, shrunk.stdout + shrunk.stderr
    assert "shrunk scenario: 3 items" in shrunk.stdout
    assert td("coverage").returncode == 0
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "tests"], cwd=root, env=env, capture_output=True, text=True,
                           timeout=300, check=False)  # fmt: skip
    assert tests.returncode == 0 and "2 passed" in tests.stdout, tests.stdout + tests.stderr
    lint = subprocess.run([str(BIN / "ruff"), "check", "--no-cache", "--isolated", "."],
                          cwd=root, capture_output=True, text=True, check=False)  # fmt: skip
    assert lint.returncode == 0, lint.stdout


def test_new_model_refuses_a_bad_name_or_a_used_directory(tmp_path: Path) -> None:
    for bad in ("Shop", "1shop", "class", "a-b"):
        done = CliRunner().invoke(main, ["new-model", bad, "--dir", str(tmp_path / "x")])
        assert done.exit_code == 2 and "lower-case letters" in done.output
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "keep.txt").write_text("mine")
    done = CliRunner().invoke(main, ["new-model", "shop", "--dir", str(tmp_path / "used")])
    assert done.exit_code == 2 and "not an empty directory" in done.output
    assert (tmp_path / "used" / "keep.txt").read_text() == "mine"
