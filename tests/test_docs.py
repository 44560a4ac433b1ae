"""The documentation that is generated from the code stays in step with it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_cli_md_matches_the_commands_help() -> None:
    spec = importlib.util.spec_from_file_location("generate_cli_md", DOCS / "generate_cli_md.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = module.render()
    assert (DOCS / "cli.md").read_text(encoding="utf-8") == expected, (
        "docs/cli.md is out of date: run `make docs`"
    )
    for command in ("run", "gate", "diff", "replay", "shrink", "golden", "bench", "coverage"):
        assert f"## `tracediff {command}`" in expected


def test_readme_shows_the_two_commands_first() -> None:
    readme = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    first_block = readme.split("```sh", 1)[1].split("```", 1)[0]
    assert "make run" in first_block and "make test" in first_block
