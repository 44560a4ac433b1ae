"""The pytest plugin: check your implementation against the reference in your own test suite.

Installed with tracediff (a ``pytest11`` entry point), inert until asked:

* ``pytest --tracediff-profile quick [--tracediff-impl mypkg.sched:Fast] [--tracediff-seeds
  0..15]`` collects one test per scenario of the profile, and one per saved regression of
  the project's corpus (what ``tracediff shrink --save`` wrote; ``--tracediff-no-regressions``
  leaves them out). They hang from the project's ``pyproject.toml``, so they are ordinary
  items: counted in "collected N items", selected with ``-k``, rerun by node id
  (``pytest 'pyproject.toml::quick::7' --tracediff-profile quick``), with ``--lf``/``--ff``,
  ``-x`` and pytest-xdist's ``-n``, and reported in JUnit XML with the class name
  ``pyproject.toml.quick`` (or ``.regressions``). A test fails with the explanation of the
  divergence and the command that reproduces it.
* ``@pytest.mark.tracediff(profile="quick", seeds="0..7", impls=[...])`` on a test that
  takes ``tracediff_scenario`` parametrizes it with those scenarios; the
  ``tracediff_compare`` fixture compares one scenario and fails the test with the
  explanation.

Implementations: ``--tracediff-impl`` (repeat; one alone is compared with ``reference``),
else the marker's ``impls``, else the project's ``[tool.tracediff] impls``, else reference
and optimized. Only the public API (:mod:`tracediff`) is used here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import tracediff

MARKER = "tracediff"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tracediff", "differential trace testing (tracediff)")
    group.addoption(
        "--tracediff-profile",
        metavar="NAME",
        default=None,
        help="Add one test per scenario of this profile (built-in name, configured, or .toml).",
    )
    group.addoption(
        "--tracediff-impl",
        action="append",
        default=[],
        metavar="SPEC",
        help="Implementation to compare (package.module:attr or built-in name); repeat. One "
        "alone is compared with reference. Default: [tool.tracediff] impls.",
    )
    group.addoption(
        "--tracediff-seeds",
        metavar="SEEDS",
        default=None,
        help="Seeds instead of the profile's: 0..15, 3,7.",
    )
    group.addoption(
        "--tracediff-no-regressions",
        action="store_true",
        default=False,
        help="Do not add the project's saved regressions (tracediff shrink --save) as tests.",
    )
    group.addoption(
        "--tracediff-timeout",
        type=float,
        metavar="SECONDS",
        default=None,
        help="Per-scenario time limit; a hang is a failure.",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(profile='quick', seeds=None, impls=None): parametrize the test's "
        "tracediff_scenario argument with the profile's scenarios",
    )


def _impls(config: pytest.Config, marker_impls: Sequence[str] | None = None) -> tuple[str, ...]:
    given: list[str] = config.getoption("tracediff_impl") or []
    if given:
        return tuple(given) if len(given) > 1 else ("reference", *given)
    if marker_impls:
        return tuple(marker_impls)
    return tracediff.load_project(config.rootpath).impls


class TracediffFinding(Exception):
    """A scenario on which the implementations differ; carries the comparison."""

    def __init__(self, comparison: tracediff.ScenarioComparison) -> None:
        super().__init__(comparison.label)
        self.comparison = comparison


def _failure_text(comparison: tracediff.ScenarioComparison) -> str:
    return (
        f"{comparison.label} {comparison.status}: "
        f"{' vs '.join(comparison.impls)}\n{comparison.explanation}\n"
        f"reproduce: {comparison.reproduce}"
    )


class ScenarioItem(pytest.Item):
    """One scenario of the profile, compared when the test runs."""

    def __init__(
        self,
        *,
        scenario: tracediff.Scenario,
        impls: tuple[str, ...],
        timeout: float | None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.impls = impls
        self.timeout = timeout

    def runtest(self) -> None:
        result = tracediff.compare_implementations(self.scenario, self.impls, timeout=self.timeout)
        for comparison in result.findings:
            raise TracediffFinding(comparison)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | Any:
        if isinstance(excinfo.value, TracediffFinding):
            return _failure_text(excinfo.value.comparison)
        if isinstance(excinfo.value, tracediff.TracediffError):
            return f"tracediff: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"tracediff[{self.scenario.profile}:{self.scenario.seed}]"


_ANCHOR = pytest.StashKey[Path | None]()


def _anchor(config: pytest.Config) -> Path | None:
    """The file the scenario tests hang from (so their node ids name a real path and can be
    passed back to pytest): the project's ``pyproject.toml`` with ``[tool.tracediff]``,
    else pytest's own configuration file."""
    if _ANCHOR not in config.stash:
        project = tracediff.load_project(config.rootpath)
        found = project.config.path or config.inipath
        config.stash[_ANCHOR] = Path(found).resolve() if found is not None else None
    return config.stash[_ANCHOR]


@pytest.hookimpl(tryfirst=True)
def pytest_collection(session: pytest.Session) -> None:
    """With --tracediff-profile, collect the anchor file too (once: pytest-xdist's workers
    run this hook again on the controller's arguments)."""
    config = session.config
    if not config.getoption("tracediff_profile"):
        return
    anchor = _anchor(config)
    if anchor is None:
        raise pytest.UsageError(
            "--tracediff-profile: no pyproject.toml or pytest configuration file to attach "
            "the scenario tests to; run `tracediff init` in the project's root"
        )
    for arg in config.args:
        if Path(arg.split("::", 1)[0]).resolve() == anchor:
            return
    config.args.append(str(anchor))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if not config.getoption("tracediff_profile"):
        return None
    if file_path.resolve() != _anchor(config):
        return None
    return ProjectFile.from_parent(parent, path=file_path)


class ProjectFile(pytest.File):
    """The project's scenario tests: its saved regressions, then the profile's scenarios,
    each a class of its own in reports (``pyproject.toml::regressions::quick-37``,
    ``pyproject.toml::quick::7``)."""

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        config = self.config
        profile = config.getoption("tracediff_profile")
        impls = _impls(config)
        timeout = config.getoption("tracediff_timeout")
        try:
            label, regressions = tracediff.regression_scenarios(impls)
            scenarios = tracediff.scenarios_of(profile, config.getoption("tracediff_seeds"))
        except tracediff.TracediffError as exc:
            raise pytest.UsageError(f"--tracediff-profile {profile}: {exc}") from None
        if regressions and not config.getoption("tracediff_no_regressions"):
            yield Suite.from_parent(
                self,
                name="regressions",
                entries=tuple((path.stem, s) for path, s in regressions),
                impls=impls,
                timeout=timeout,
                label=label,
            )
        if scenarios:
            yield Suite.from_parent(
                self,
                name=scenarios[0].profile,
                entries=tuple((str(s.seed), s) for s in scenarios),
                impls=impls,
                timeout=timeout,
                label=f"profile {scenarios[0].profile}",
            )


class Suite(pytest.Collector):
    """One group of scenarios (a profile, or the regression corpus)."""

    def __init__(
        self,
        *,
        entries: tuple[tuple[str, tracediff.Scenario], ...],
        impls: tuple[str, ...],
        timeout: float | None,
        label: str,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.entries = entries
        self.impls = impls
        self.timeout = timeout
        self.label = label

    def collect(self) -> Iterator[pytest.Item]:
        for name, scenario in self.entries:
            yield ScenarioItem.from_parent(
                self, name=name, scenario=scenario, impls=self.impls, timeout=self.timeout
            )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None or "tracediff_scenario" not in metafunc.fixturenames:
        return
    profile = marker.kwargs.get("profile", marker.args[0] if marker.args else "quick")
    scenarios = tracediff.scenarios_of(profile, marker.kwargs.get("seeds"))
    metafunc.parametrize(
        "tracediff_scenario",
        scenarios,
        ids=[f"{s.profile}:{s.seed}" for s in scenarios],
    )


@pytest.fixture
def tracediff_compare(
    request: pytest.FixtureRequest,
) -> Iterator[Callable[..., tracediff.ScenarioComparison]]:
    """``tracediff_compare(scenario, impls=None)``: compare one scenario (e.g. one drawn by
    ``tracediff.scenario_strategy()`` under ``@given``) and fail the test, with the
    explanation, when the implementations differ."""
    marker = request.node.get_closest_marker(MARKER)
    default = _impls(request.config, marker.kwargs.get("impls") if marker else None)
    timeout = request.config.getoption("tracediff_timeout")

    def compare(
        scenario: tracediff.Scenario, impls: Sequence[str] | None = None
    ) -> tracediff.ScenarioComparison:
        result = tracediff.compare_implementations(
            scenario, tuple(impls) if impls else default, timeout=timeout
        )
        (comparison,) = result.comparisons
        if not comparison.ok:
            pytest.fail(_failure_text(comparison), pytrace=False)
        return comparison

    yield compare
