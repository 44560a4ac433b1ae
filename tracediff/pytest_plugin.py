"""The pytest plugin: check your implementation against the reference in your own test suite.

Installed with tracediff (a ``pytest11`` entry point), inert until asked:

* ``pytest --tracediff-profile quick [--tracediff-impl mypkg.sched:Fast] [--tracediff-seeds
  0..15]`` adds one test per scenario of the profile, named ``tracediff[quick:7]``; a test
  fails with the explanation of the divergence and the command that reproduces it.
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
    configured = tracediff.load_config().impls
    return tuple(configured) or ("reference", "optimized")


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
        return self.path, None, self.name


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """With --tracediff-profile, add the profile's scenarios as tests (before -k and -m
    select among all tests)."""
    profile = config.getoption("tracediff_profile")
    if not profile:
        return
    impls = _impls(config)
    timeout = config.getoption("tracediff_timeout")
    try:
        scenarios = tracediff.scenarios_of(profile, config.getoption("tracediff_seeds"))
    except tracediff.TracediffError as exc:
        raise pytest.UsageError(f"--tracediff-profile {profile}: {exc}") from None
    for scenario in scenarios:
        items.append(
            ScenarioItem.from_parent(
                session,
                name=f"tracediff[{scenario.profile}:{scenario.seed}]",
                scenario=scenario,
                impls=impls,
                timeout=timeout,
            )
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
