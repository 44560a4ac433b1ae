"""Rule coverage: the observed reference, the clause table, and the bugs it exists to catch.

``DecidingReference`` must be the reference byte for byte (its observations never enter a
record). Each one-clause bug of ``tests/impls/mutants.py`` (and ``tests/impls/tiebreak.py``)
must be caught by the quick profile: to keep this fast, each is run only on quick seeds
where its clause decides. That the clause decides there is asserted first, so a generator
change that moves the ties elsewhere fails with "update the seeds" instead of passing
without testing anything.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from tracediff.campaign.clauses import coverage
from tracediff.cli import main
from tracediff.models.specdec.engine.driver import drive
from tracediff.models.specdec.scenario.generator import generate
from tracediff.models.specdec.scenario.profiles import load_profile
from tracediff.models.specdec.sched.clauses import CLAUSES
from tracediff.models.specdec.sched.decided import DecidingReference
from tracediff.project.impls import parse_impl
from tracediff.report.coverage import coverage_renderable
from tracediff.running.runner import DIVERGED, run_scenario, trace_records
from tracediff.trace import encode

QUICK = load_profile("quick")
REFERENCE = parse_impl("reference")
UNREACHABLE = {"winner.b_pad", "winner.kind", "winner.prefill", "prune.tie_b_pad"}


def _decided(seed: int) -> dict[str, int]:
    scenario = generate(QUICK, seed)
    observed = DecidingReference(scenario)
    for _record in drive(scenario, observed):
        pass
    return observed.decided


@pytest.mark.parametrize("seed", [0, 16, 56, 78])
def test_the_observed_reference_writes_the_reference_bytes(seed: int) -> None:
    scenario = generate(QUICK, seed)
    observed = DecidingReference(scenario)
    ours = [encode(r) for r in drive(scenario, observed)]
    assert ours == [encode(r) for r in trace_records(scenario, REFERENCE)]
    assert sum(observed.decided.values()) > 0  # it observed something on the way


# (implementation, clause that must decide, quick seeds where the bug then shows)
MUTANTS = [
    ("tests.impls.mutants:SwappedTieBreakScheduler", "winner.duration", (78, 82)),
    ("tests.impls.mutants:FirstAtBestValueScheduler", "winner.duration", (78, 82)),
    ("tests.impls.mutants:WidthBeforeDurationScheduler", "winner.duration", (78,)),
    ("tests.impls.tiebreak:TieBreakScheduler", "winner.duration", (0,)),
    ("tests.impls.mutants:FreshAtPeriodScheduler", "boundary.refresh_period", (56,)),
    ("tests.impls.mutants:ProbeTrialsOffByOneScheduler", "boundary.probe_trials", (6,)),
    ("tests.impls.mutants:PruneKeepsEqualScheduler", "prune.duration", (26,)),
    ("tests.impls.mutants:TableTruncatesScheduler", "table.down_floor", (3,)),
    # float comparisons met with equality: only the exact-floats seeds (108..125) make them
    ("tests.impls.boundaries:UnfundedAtCreditScheduler", "boundary.probe_funded", (123,)),
    ("tests.impls.boundaries:StrictToleranceScheduler", "boundary.refresh_tolerance", (108,)),
]


@pytest.mark.parametrize(
    ("impl", "clause", "seeds"), [pytest.param(*m, id=m[0].split(":")[1]) for m in MUTANTS]
)
def test_the_quick_profile_catches_each_one_clause_bug(
    impl: str, clause: str, seeds: tuple[int, ...]
) -> None:
    specs = (REFERENCE, parse_impl(impl))
    for seed in seeds:
        assert _decided(seed)[clause] > 0, (
            f"update the seeds: {clause} no longer decides on quick seed {seed}; "
            "`tracediff coverage --profile quick --json F` lists where it does"
        )
        result = run_scenario(generate(QUICK, seed), specs)
        assert result.status == DIVERGED, f"{impl} survives quick seed {seed}"


def test_the_exact_floats_regime_leaves_the_other_seeds_as_they_were() -> None:
    import dataclasses

    without = dataclasses.replace(
        QUICK, generator=dataclasses.replace(QUICK.generator, exact_floats_seeds="")
    )
    assert QUICK.generator.exact_floats_seeds == "108..125,127,146,148,149"
    for seed in (0, 55, 107, 126):
        assert generate(QUICK, seed) == generate(without, seed)
    exact = generate(QUICK, 108)
    assert exact != generate(without, 108) and generate(QUICK, 149) != generate(without, 149)
    assert exact.params.alpha == 1.0 and exact.truth.duration_drift == 0.0
    assert all(r.accept_base == r.accept_decay == 1.0 for r in exact.requests)


def test_coverage_exits_1_naming_a_required_clause_that_never_decided(tmp_path: Path) -> None:
    out = tmp_path / "cov.json"
    # Quick seed 0 is one request: no two candidates of different width ever tie in E and d.
    assert _decided(0)["prune.tie_width"] == 0
    result = CliRunner().invoke(
        main, ["coverage", "--profile", "quick", "--seeds", "0", "-j", "1", "--json", str(out)]
    )
    assert result.exit_code == 1, result.output
    verdict = result.output[result.output.index("MISSING") :]
    assert "prune.tie_width" in verdict
    missing = json.loads(out.read_text(encoding="utf-8"))["missing"]
    assert "prune.tie_width" in missing and "winner.value" not in missing
    assert not UNREACHABLE & set(missing)  # proved unreachable: never required


def test_coverage_min_asks_each_clause_to_decide_in_that_many_scenarios(tmp_path: Path) -> None:
    """--min N: a clause that decided in fewer than N scenarios is missing too, named with
    its count (CI's gate asks 3)."""
    out = tmp_path / "cov.json"
    args = ["coverage", "--profile", "quick", "--seeds", "0..2", "-j", "1", "--json", str(out)]
    once = CliRunner().invoke(main, [*args, "--min", "1"])
    twice = CliRunner().invoke(main, [*args, "--min", "3"])
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["min_scenarios"] == 3
    thin = [c for c in report["clauses"] if c["required"] and 0 < c["scenarios"] < 3]
    assert thin, "seeds 0..2 decide some clause in one or two scenarios only"
    assert twice.exit_code == 1 and thin[0]["name"] in report["missing"]
    verdict = twice.output[twice.output.index("MISSING") :]
    assert "fewer than 3 scenarios" in verdict
    assert f"{thin[0]['name']} ({thin[0]['scenarios']})" in " ".join(verdict.split())
    assert once.exit_code in (0, 1) and thin[0]["name"] not in once.output.split("MISSING")[-1]


def test_the_clause_table_renders_at_a_fixed_width_with_the_proofs() -> None:
    report = coverage(QUICK, (0,))
    proved = {c.name for c in CLAUSES if not c.required}
    assert proved == UNREACHABLE
    texts = []
    for width in (100, 160, 100):
        console = Console(file=io.StringIO(), width=width, color_system=None, highlight=False)
        console.print(coverage_renderable(report))
        text = console.file.getvalue()  # type: ignore[attr-defined]
        assert max(len(line) for line in text.splitlines()) <= width
        texts.append(text)
    assert texts[0] == texts[2]  # the same report, the same bytes
    wide = texts[1]
    for clause in CLAUSES:
        assert clause.name in wide
        marker = f"{clause.name} (never: see docs/scheduler.md#{clause.proof})"
        assert (marker in wide) == (clause.name in UNREACHABLE), clause.name
    rows = {line.split("│")[1].strip(): line for line in wide.splitlines() if "│" in line}
    for clause in CLAUSES:
        if clause.name in UNREACHABLE:
            row = rows[f"{clause.name} (never: see docs/scheduler.md#{clause.proof})"]
            assert row.rstrip("│ ").endswith(" 0")  # it never decided, and is not missing
