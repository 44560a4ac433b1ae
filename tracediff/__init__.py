"""tracediff: differential trace testing and replay for stateful decision engines.

A seeded scenario drives two (or more) implementations of a decision engine; every
decision is recorded into a canonical msgpack trace and the traces are compared byte
for byte. The command line (``tracediff --help``) covers the workflows; from Python, the
public API is what this module exports (docs/api.md)::

    import tracediff

    result = tracediff.compare_implementations("quick", ["reference", "mypkg.sched:Fast"])
    assert result.ok, result.explain()

The names load on first use, so that ``import tracediff`` stays cheap for the command line.
The scenario names (``Scenario``, ``generate``, ``load_profile``, the Hypothesis strategies)
are the default model's, the speculative-decoding scheduler's (tracediff.models.specdec).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from tracediff.api import ComparisonResult as ComparisonResult
    from tracediff.api import ScenarioComparison as ScenarioComparison
    from tracediff.api import compare_implementations as compare_implementations
    from tracediff.api import explanation_text as explanation_text
    from tracediff.api import regression_scenarios as regression_scenarios
    from tracediff.api import scenarios_of as scenarios_of
    from tracediff.compare.model import Divergence as Divergence
    from tracediff.compare.model import FieldChange as FieldChange
    from tracediff.errors import TracediffError as TracediffError
    from tracediff.project import Project as Project
    from tracediff.project import resolve as load_project
    from tracediff.project.config import Config as Config
    from tracediff.project.config import load_config as load_config

_EXPORTS = {
    "ComparisonResult": "tracediff.api",
    "ScenarioComparison": "tracediff.api",
    "compare_implementations": "tracediff.api",
    "explanation_text": "tracediff.api",
    "regression_scenarios": "tracediff.api",
    "Project": "tracediff.project",
    "load_project": "tracediff.project:resolve",
    "scenarios_of": "tracediff.api",
    "Divergence": "tracediff.compare.model",
    "FieldChange": "tracediff.compare.model",
    "TracediffError": "tracediff.errors",
    "Config": "tracediff.project.config",
    "load_config": "tracediff.project.config",
    "generate": "tracediff.models.specdec.scenario.generator",
    "RequestSpec": "tracediff.models.specdec.scenario.model",
    "Scenario": "tracediff.models.specdec.scenario.model",
    "SchedulerParams": "tracediff.models.specdec.scenario.model",
    "Profile": "tracediff.models.specdec.scenario.profiles",
    "load_profile": "tracediff.models.specdec.scenario.profiles",
    "request_specs": "tracediff.models.specdec.scenario.strategies",
    "scheduler_params": "tracediff.models.specdec.scenario.strategies",
    "scenario_strategy": "tracediff.models.specdec.scenario.strategies:scenarios",
}

__all__ = [
    "__version__",
    "ComparisonResult",
    "Config",
    "Divergence",
    "FieldChange",
    "Profile",
    "Project",
    "RequestSpec",
    "Scenario",
    "ScenarioComparison",
    "SchedulerParams",
    "TracediffError",
    "compare_implementations",
    "explanation_text",
    "generate",
    "load_config",
    "load_profile",
    "load_project",
    "regression_scenarios",
    "request_specs",
    "scenario_strategy",
    "scenarios_of",
    "scheduler_params",
]


def __getattr__(name: str) -> Any:
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'tracediff' has no attribute {name!r}")
    import importlib

    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr or name)
    globals()[name] = value
    return value
