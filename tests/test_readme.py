"""The README's command examples run as written, in an empty directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"<!-- readme-commands -->\s*```sh\n(.*?)```\s*<!-- /readme-commands -->", re.S)


def _commands() -> list[tuple[str, int]]:
    """(command, expected exit status): 0 unless its comment starts with "exit N"."""
    (block,) = BLOCK.findall((ROOT / "README.md").read_text())
    found = []
    for line in filter(str.strip, block.splitlines()):
        command, _, comment = line.partition("  #")
        status = re.match(r"\s*exit (\d+)", comment)
        found.append((command.strip(), int(status.group(1)) if status else 0))
    return found


def test_the_readme_examples_run_as_written(tmp_path: Path) -> None:
    commands = _commands()
    assert len(commands) >= 8 and all(c.startswith("tracediff ") for c, _ in commands)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEDIFF_", "GITHUB_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    for command, status in commands:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == status, f"{command}\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "junit.xml").is_file() and (tmp_path / "summary.md").is_file()
    assert "[tool.tracediff]" in (tmp_path / "pyproject.toml").read_text()
