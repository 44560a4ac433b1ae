"""The public Python API: compare implementations from your own code and tests.

Everything here is re-exported by :mod:`tracediff` and documented in docs/api.md; the rest
of the package may change between versions. The pytest plugin
(:mod:`tracediff.pytest_plugin`) is written against this module only.

    import tracediff

    result = tracediff.compare_implementations("quick", ["reference", "mypkg.sched:Fast"],
                                               seeds="0..7")
    assert result.ok, result.explain()
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tracediff.compare.model import DEFAULT_CONTEXT, Divergence
from tracediff.models.specdec.scenario.model import Scenario
from tracediff.models.specdec.scenario.profiles import Profile, load_profile, parse_seeds

if TYPE_CHECKING:
    from tracediff.project import Project

from tracediff.outcomes import Status  # noqa: E402 - the one status vocabulary

IDENTICAL, DIVERGED, ERROR, TIMEOUT = (
    Status.IDENTICAL,
    Status.DIVERGED,
    Status.ERROR,
    Status.TIMEOUT,
)
DEFAULT_IMPLS = ("reference", "optimized")
MAX_FIELDS = 10


@dataclass(frozen=True)
class ScenarioComparison:
    """One scenario driven through every implementation in lockstep.

    ``status`` is ``"identical"``, ``"diverged"``, ``"error"`` (an implementation raised)
    or ``"timeout"``. A finding has a ``divergence`` (where, what kind, which fields) and
    ``explanation``, the same as plain text; ``reproduce`` is the command line that shows
    it again.
    """

    scenario: Scenario
    impls: tuple[str, ...]
    status: str
    divergence: Divergence | None = None
    explanation: str = ""
    reproduce: str = ""

    @property
    def label(self) -> str:
        """``profile:seed``, as every report names the scenario."""
        return f"{self.scenario.profile}:{self.scenario.seed}"

    @property
    def ok(self) -> bool:
        return self.status == IDENTICAL


@dataclass(frozen=True)
class ComparisonResult:
    """Every scenario's comparison, in input order."""

    impls: tuple[str, ...]
    comparisons: tuple[ScenarioComparison, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.comparisons)

    @property
    def findings(self) -> tuple[ScenarioComparison, ...]:
        return tuple(c for c in self.comparisons if not c.ok)

    def explain(self) -> str:
        """Every finding's explanation, as text (empty when all are identical)."""
        return "\n\n".join(f"{c.label}: {c.explanation}" for c in self.findings)


def scenarios_of(
    profile: str | Profile, seeds: str | Iterable[int] | None = None
) -> list[Scenario]:
    """The scenarios of a profile (a name, a .toml path or a loaded :class:`Profile`), for
    ``seeds`` (``"0..7"``, ``[3, 7]``) or else the profile's own seed set."""
    from tracediff.models.specdec.scenario.generator import generate

    loaded = load_profile(profile) if isinstance(profile, str) else profile
    if seeds is None:
        chosen: Sequence[int] = loaded.seeds
    elif isinstance(seeds, str):
        chosen = parse_seeds(seeds)
    else:
        chosen = sorted(set(seeds))
    return [generate(loaded, seed) for seed in chosen]


def regression_scenarios(
    impls: Sequence[str] | None = None, project: Project | None = None
) -> tuple[str, list[tuple[Path, Scenario]]]:
    """The project's regression corpus (what ``shrink --save`` and ``fuzz --save`` wrote,
    what ``gate`` replays) for comparing ``impls``: a label saying which corpus it is, and
    each file with its scenario, in the order the gate replays them."""
    from tracediff.project import resolve
    from tracediff.project.corpus import corpus_files, load_scenario
    from tracediff.project.impls import parse_impl

    project = project or resolve()
    chosen = tuple(impls) if impls else project.impls
    source = project.corpus(tuple(parse_impl(name).target for name in chosen))
    if source.path is None:
        return source.label, []
    return source.label, [(path, load_scenario(path)) for path in corpus_files(source.path)]


def compare_implementations(
    what: str | Profile | Scenario | Iterable[Scenario],
    impls: Sequence[str] | None = None,
    *,
    seeds: str | Iterable[int] | None = None,
    timeout: float | None = None,
    context: int = DEFAULT_CONTEXT,
    jobs: int = 1,
) -> ComparisonResult:
    """Drive ``impls`` (built-in names or ``package.module:attr``; the first is the baseline;
    default: the project's ``[tool.tracediff] impls``, else reference and optimized)
    through scenarios in lockstep and explain every difference.

    ``what`` is a profile (name, .toml path or :class:`Profile`, with ``seeds`` optionally
    narrowing it), one :class:`Scenario` (e.g. drawn by :func:`scenario_strategy` in a
    Hypothesis test) or several. ``timeout`` (seconds per scenario) makes a hang a finding;
    ``jobs`` > 1 runs scenarios in worker processes. Raises a
    :class:`~tracediff.errors.TracediffError` for bad input (an unknown profile or
    implementation); what an implementation does is never raised, it is the result.
    """
    from tracediff.compare.explain import explain_many
    from tracediff.project.impls import load, parse_impl
    from tracediff.running.runner import RunOptions, run_scenarios

    if isinstance(what, Scenario):
        chosen = [what]
    elif isinstance(what, str | Profile):
        chosen = scenarios_of(what, seeds)
    else:
        chosen = list(what)
    if impls is None:
        from tracediff.project import resolve

        impls = resolve().impls  # the project's configured implementations, as the CLI's
    specs = tuple(parse_impl(name) for name in impls)
    if len(specs) < 2:
        raise ValueError("compare_implementations needs at least two implementations")
    for spec in specs:
        load(spec)
    options = RunOptions(impls=specs, jobs=max(1, jobs), timeout_s=timeout)
    # One executor for the run and its explanations (a local pool when isolated or jobs > 1).
    with options.open_executor(len(chosen)) as executor:
        summary = run_scenarios(chosen, options, executor=executor)
        pairs = list(zip(chosen, summary.results, strict=False))
        found = iter(
            explain_many(
                [(s, r) for s, r in pairs if r.status != IDENTICAL],
                specs,
                context=context,
                executor=executor,
                timeout_s=timeout,
                deadline_s=options.kill_after_s,
            )
        )
    names = tuple(spec.name for spec in specs)
    out = []
    for scenario, result in pairs:
        if result.status == IDENTICAL:
            out.append(ScenarioComparison(scenario, names, IDENTICAL))
            continue
        divergence = next(found)
        out.append(
            ScenarioComparison(
                scenario,
                names,
                result.status,
                divergence,
                explanation_text(divergence),
                _reproduce(scenario, names),
            )
        )
    return ComparisonResult(names, tuple(out))


def _reproduce(scenario: Scenario, impls: Sequence[str]) -> str:
    args = " ".join(f"--impl {shlex.quote(name)}" for name in impls)
    if scenario.profile in ("hypothesis",) or "/" in scenario.profile:
        return f"tracediff shrink --scenario <scenario.json> {args}  (save the scenario first)"
    return f"tracediff run --profile {shlex.quote(scenario.profile)} --seeds {scenario.seed} {args}"


def explanation_text(d: Divergence) -> str:
    """A divergence as plain text: where, what kind, the fields that differ, the records
    before it side by side, and an implementation's failure when it raised."""
    from tracediff.report import describe

    a, b = d.impls
    lines = [
        f"{d.signature} at {d.location}",
        f"scenario:  {describe.scenario_line(d)}",
        f"compared:  A = {a}, B = {b}",
        f"where:     {describe.where(d)}",
        f"kind:      {describe.kind_line(d)}",
    ]
    for change in d.changes[:MAX_FIELDS]:
        ulps = f"  ({describe.ulps_text(change)})" if change.ulps is not None else ""
        lines.append(
            f"  {change.location}: A {describe.short(change.a)}  B {describe.short(change.b)}{ulps}"
        )
    if d.total_changes > MAX_FIELDS:
        lines.append(f"  ... and {d.total_changes - MAX_FIELDS} more fields")
    if d.context:
        lines.append("records before it (A | B):")
        for row in d.context:
            mark = "≠" if not row.same else " "
            left = describe.record_summary(row.a, row.index)
            right = "≡" if row.same else describe.record_summary(row.b, row.index)
            lines.append(f" {mark}{row.index:>5}  {left} | {right}")
    if d.message:
        lines += ["", d.message]
    lines += [f"note: {note}" for note in d.notes]
    return "\n".join(lines)
