"""Models installed the way a user installs theirs, for tests: modules in a folder with the
dist-info `pip install` would write beside them (its ``tracediff.models`` entry points), and
the command line run in a fresh interpreter that finds them on ``PYTHONPATH``. A fresh
process because entry points are read once per process and a model's import may exit it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

TOY = Path(__file__).resolve().parent / "toymodel"  # toy_model.py, the base of most plug-ins


def install(root: Path, name: str, modules: Mapping[str, str], models: Mapping[str, str]) -> Path:
    """Write ``modules`` (file name -> source) into ``root`` with a distribution ``name``
    whose entry points register ``models`` (model name -> ``module:OBJECT``)."""
    root.mkdir(parents=True, exist_ok=True)
    for filename, source in modules.items():
        (root / filename).write_text(source)
    info = root / f"{name}-1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
    lines = "".join(f"{model} = {target}\n" for model, target in models.items())
    (info / "entry_points.txt").write_text(f"[tracediff.models]\n{lines}")
    return root


def tracediff(
    cwd: Path, *args: str, path: tuple[Path, ...] = (), timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m tracediff ARGS`` in ``cwd`` with ``path`` (and the toy model) importable,
    no model chosen by the environment, and a wide terminal (one-line messages stay one)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (*path, TOY))
    env.pop("TRACEDIFF_MODEL", None)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
