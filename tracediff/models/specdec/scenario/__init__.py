"""Scenarios: the data that drives a run, described apart from the engine that runs it."""

from tracediff.models.specdec.scenario.model import RequestSpec, Scenario

__all__ = ["RequestSpec", "Scenario"]
