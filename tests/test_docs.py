"""The documentation stays in step with the code: the generated CLI page and the scheduler spec."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tracediff.models.specdec.engine.driver import drive
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.scenario.strategies import scenarios
from tracediff.models.specdec.sched.reference import ReferenceScheduler
from tracediff.trace.codec import encode

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


def _anchors(markdown: str) -> set[str]:
    """The in-page anchors a Markdown renderer makes: explicit ids and heading slugs."""
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', markdown))
    for heading in re.findall(r"^#{1,6} (.+)$", markdown, flags=re.MULTILINE):
        text = heading.strip().lower().replace("`", "")
        anchors.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return anchors


def test_scheduler_md_names_every_clause_and_proves_the_unreachable_ones() -> None:
    from tracediff.models.specdec.sched.clauses import CLAUSES, NAMES

    text = (DOCS / "scheduler.md").read_text(encoding="utf-8")
    coverage = text.split("## Rule coverage", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \|", coverage, flags=re.MULTILINE)
    assert sorted(listed) == sorted(NAMES), "the clause tables must list clauses.NAMES exactly"
    anchors = _anchors(text)
    rows = {line.split("`")[1]: line for line in coverage.splitlines() if line.startswith("| `")}
    for clause in CLAUSES:
        row = rows[clause.name]
        if clause.proof:
            assert clause.proof in anchors, f"no proof anchor #{clause.proof}"
            assert f"(#{clause.proof})" in row and "**Never**" in row
        else:
            assert "**Never**" not in row, f"{clause.name} is required, not proved unreachable"


def test_scheduler_md_links_resolve() -> None:
    text = (DOCS / "scheduler.md").read_text(encoding="utf-8")
    anchors = _anchors(text)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        page, _, anchor = target.partition("#")
        if page:
            assert (DOCS / page).is_file(), f"scheduler.md links to missing {page}"
            if anchor:
                assert anchor in _anchors((DOCS / page).read_text(encoding="utf-8")), target
        else:
            assert anchor in anchors, f"scheduler.md links to missing anchor #{anchor}"
    profiles = (DOCS / "profiles.md").read_text(encoding="utf-8")
    for anchor in re.findall(r"scheduler\.md#([\w-]+)", profiles):
        assert anchor in anchors, f"profiles.md links to missing scheduler.md#{anchor}"


# Quick-profile seeds that, together, make every required rule clause decide (a greedy cover
# of `tracediff coverage --profile quick`), plus 56, the one quick seed where reading
# "stale" as "older than refresh_period" (not "as old or older") changes a plan: 1 to 64
# requests, every allocation, both graph modes, queue depths 0 to 2; 108 and 124 are
# exact-floats seeds (a stale candidate exactly at the tolerance, a probe costing exactly the
# credit). About a second of reference time.
SPEC_SEEDS = (11, 16, 30, 43, 45, 54, 56, 77, 85, 91, 96, 108, 124)


def _same_as_reference(scenario: Scenario, where: str) -> set[str]:
    """Drive the reference and the from-spec scheduler in lockstep; return the round sources."""
    from tests.impls.from_spec import FromSpecScheduler

    sources: set[str] = set()
    pairs = zip(
        drive(scenario, ReferenceScheduler(scenario)),
        drive(scenario, FromSpecScheduler(scenario)),
        strict=True,
    )
    for index, (expected, actual) in enumerate(pairs):
        if encode(actual) != encode(expected):
            key = next(k for k in expected if encode(actual.get(k)) != encode(expected[k]))
            raise AssertionError(
                f"{where}, record {index}, field {key!r}: the page's rules give "
                f"{actual.get(key)!r:.300}, the reference {expected[key]!r:.300}"
            )
        if expected.get("t") == "plan" and expected["round"] is not None:
            sources.add(expected["round"][0])
    return sources


def test_an_implementation_written_from_scheduler_md_matches_the_reference() -> None:
    """docs/scheduler.md is the whole spec: tests/impls/from_spec.py, written from the page
    alone (it imports nothing from tracediff.models.specdec.sched), records the reference's
    bytes."""
    profile = load_profile("quick")
    sources: set[str] = set()
    for seed in SPEC_SEEDS:
        sources |= _same_as_reference(generate(profile, seed), f"quick seed {seed}")
    assert sources == {"winner", "probe", "refresh"}


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(scenarios(max_requests=8))
def test_the_from_spec_implementation_matches_on_edge_case_scenarios(scenario: Scenario) -> None:
    """Budgets down to 1 token, refresh periods of 1 µs, zero credit, odd buckets, alpha 0."""
    _same_as_reference(scenario, f"scenario {scenario.to_dict()!r:.2000}")
