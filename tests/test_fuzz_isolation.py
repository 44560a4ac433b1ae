"""fuzz explains what it found the way it searched: in isolated worker processes under the
per-scenario time limit, so an implementation that kills its process is a finding, never
the end of tracediff (it was exit 137: the explanation ran it in tracediff's own process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_fuzz_survives_an_implementation_that_kills_its_process(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tracediff", "fuzz", "--impl", "reference",
         "--impl", "tests.impls.fuzz_hostile:KillsItsProcess", "--max-examples", "3",
         "--seed", "1", "--budget", "20", "--no-progress"],
        cwd=tmp_path, env=subprocess_env, capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "killed by SIGKILL" in done.stdout and "DIVERGED" in done.stdout
    assert "reproduce: tracediff run --scenario" in done.stdout  # the explanation ran
