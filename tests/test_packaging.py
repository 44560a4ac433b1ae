"""The built wheel works on its own: installed into a fresh venv, run from an empty directory.

Nothing here uses the source tree at run time: the wheel must carry the built-in profiles,
the regression corpus and the golden digests as package data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject() -> None:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(data["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "tracediff").rglob("__init__.py")
    }
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def _clean_env(venv: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TRACEDIFF_", "PYTHON", "VIRTUAL_ENV", "GITHUB_"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "200"
    return env


@pytest.mark.packaging
def test_the_wheel_runs_the_quick_profile_from_an_empty_directory(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    # the README's recipe: built from a copy of the project's files, so that nothing (pip's
    # build/, an egg-info) is written into the checkout
    source = tmp_path / "source"
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    before = sorted(p.name for p in ROOT.iterdir())
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert sorted(p.name for p in ROOT.iterdir()) == before  # the checkout untouched
    (wheel,) = wheels.glob("tracediff_harness-*.whl")
    # A fresh venv; its dependencies come from this one's site-packages (offline, fast),
    # added after the venv's own, so that tracediff itself comes from the wheel only.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "deps-from-test.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _clean_env(venv)
    where = subprocess.run(
        [str(python), "-c", "import tracediff; print(tracediff.__file__)"],
        cwd=empty, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(purelib), where
    tool = str(venv / "bin" / "tracediff")
    run = subprocess.run(
        [tool, "run", "--profile", "quick", "--seeds", "0..2", "-j", "1", "--no-progress"],
        cwd=empty, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    corpus = len(list((ROOT / "scenarios" / "regressions").glob("*.json")))
    assert f"identical: {corpus + 3} scenarios" in run.stdout  # the packaged corpus, then 0..2
    gate = subprocess.run(
        [tool, "gate", "--seeds", "0..1", "-j", "1", "--junit", "j.xml"],
        cwd=empty, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    print(gate.stdout, gate.stderr)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    assert "golden: passed" in gate.stderr
    assert "quick.json in the built-in manifests" in gate.stderr
    assert str(Path("tracediff", "data", "golden")) in gate.stderr
    assert sorted(p.name for p in empty.iterdir()) == ["j.xml"]  # a passing gate keeps nothing
