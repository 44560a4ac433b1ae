"""Implementations served from elsewhere (tracediff.project.elsewhere): ``NAME@PYTHON``
runs NAME in another interpreter, ``git:REV:TARGET`` runs TARGET as at another revision;
both make the traces they make in process, and a server of another tracediff version is
refused before the run (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tracediff import __version__

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "toymodel"


def td(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TOY)
    env.pop("TRACEDIFF_REGRESSIONS", None)
    env.pop("TRACEDIFF_MODEL", None)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "tracediff", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _digests(path: Path) -> list[list[str]]:
    results = json.loads(path.read_text())["results"]
    return [[impl["digest"] for impl in result["impls"]] for result in results]


@pytest.fixture(scope="module")
def other_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A second environment: a venv of this interpreter without pip (a tenth of a second),
    seeing this environment's packages through a .pth file (``--system-site-packages``
    would see the base interpreter's, where tracediff is not)."""
    where = tmp_path_factory.mktemp("other") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    mine = sysconfig.get_paths()["purelib"]
    Path(purelib, "parent.pth").write_text(f"import site; site.addsitedir({mine!r})\n")
    return python


def test_an_implementation_in_another_interpreter_runs_identically(
    tmp_path: Path, other_python: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.tracediff]\nmodel = "kvbatch"\n\n[tool.tracediff.envs]\nother = "{other_python}"\n'
    )
    seeds = ("--seeds", "0..5", "--no-progress")
    here = td(tmp_path, "run", *seeds, "--json", "a.json")
    assert here.returncode == 0, here.stdout + here.stderr
    for spec in (f"optimized@{other_python}", "optimized@other"):
        there = td(
            tmp_path, "run", *seeds, "--impl", "reference", "--impl", spec, "--json", "b.json"
        )
        assert there.returncode == 0, there.stdout + there.stderr
        assert "identical: 6 scenarios" in there.stdout and f"vs {spec}" in there.stdout
        assert _digests(tmp_path / "a.json") == _digests(tmp_path / "b.json")
    unknown = td(tmp_path, "run", *seeds, "--impl", "reference", "--impl", "optimized@nope")
    assert unknown.returncode == 2
    assert "no interpreter named 'nope' (other)" in unknown.stderr


def test_a_server_of_another_tracediff_version_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import runpy, sys\n"
        "import tracediff\n"
        "tracediff.__version__ = '9.9.9'  # as an environment with another tracediff says\n"
        "sys.argv = ['tracediff', *sys.argv[3:]]  # after -m tracediff\n"
        "runpy.run_module('tracediff', run_name='__main__')\n"
    )
    fake.chmod(0o755)
    for model in ("kvbatch", "specdec"):
        done = td(tmp_path, "--model", model, "run", "--seeds", "0", "--impl", f"optimized@{fake}")
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"the server runs tracediff 9.9.9 and this is tracediff {__version__}" in done.stderr
        assert f"install tracediff {__version__} where it runs" in done.stderr


def test_the_fingerprint_of_a_served_implementation_has_its_environment(
    other_python: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracediff.model import get
    from tracediff.process import pipes
    from tracediff.project.impls import ImplSpec, load
    from tracediff.running.fingerprint import impl_code

    monkeypatch.setenv("TRACEDIFF_MODEL", "kvbatch")
    monkeypatch.setattr(pipes, "HELLOS", {})
    command = f"{other_python} -m tracediff serve --model kvbatch optimized"
    spec = ImplSpec(f"optimized@{other_python}", f"exec:{command}", origin="x")
    unseen = impl_code(spec)
    assert get("kvbatch").name == "kvbatch"
    load(spec)  # the probe: its hello names the environment's versions
    seen = pipes.served_environment(command.split())
    assert seen is not None and seen["tracediff"] == __version__
    assert seen["packages"]["tracediff"] == __version__ and "python" in seen["packages"]
    assert impl_code(spec) != unseen


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


BUGGY = """from toy_model import Reference


class Impl(Reference):
    def plan(self, now):  # ties to the higher id: the planted bug
        self.plans += 1
        pick = min(self.waiting, key=lambda j: (self.waiting[j], -j))
        del self.waiting[pick]
        return {"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}
"""


def test_an_implementation_at_another_revision(tmp_path: Path) -> None:
    repo = tmp_path
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "pyproject.toml").write_text(
        '[tool.tracediff]\nmodel = "toy"\ngit_build = "echo built > built.txt"\n'
    )
    (repo / "mytoy.py").write_text(
        "from toy_model import Reference\n\n\nclass Impl(Reference):\n    pass\n"
    )
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "right")
    (repo / "mytoy.py").write_text(BUGGY)
    _git(repo, "commit", "-qam", "planted bug")
    (repo / "mytoy.py").write_text(BUGGY + "# a local edit\n")
    before = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout

    good = td(
        repo, "run", "--no-progress", "--impl", "reference", "--impl", "git:HEAD~1:mytoy:Impl"
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert "identical: 20 scenarios" in good.stdout
    bad = td(repo, "run", "--no-progress", "--impl", "reference", "--impl", "git:HEAD:mytoy:Impl")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "(reference vs git:HEAD:mytoy:Impl)" in bad.stdout
    # the working tree and its status are as they were; each revision was built once
    after = subprocess.run(
        ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout
    assert after == before == " M mytoy.py\n"
    assert (repo / "mytoy.py").read_text().endswith("# a local edit\n")
    cached = sorted((repo / ".tracediff" / "cache" / "git").iterdir())
    assert len(cached) == 2 and all((c / "built.txt").read_text() == "built\n" for c in cached)

    missing = td(repo, "run", "--impl", "reference", "--impl", "git:nope:mytoy:Impl")
    assert missing.returncode == 2 and "no such revision" in missing.stderr
