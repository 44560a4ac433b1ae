"""The JUnit XML presenter: one test case per scenario, for CI test-result views.

Layout: ``<testsuites>`` holding one ``<testsuite>`` per suite (``regressions``, the
profile, ``golden``, ``diff``) and one for the gate's steps (``tracediff.gate``). In a gate
every scenario is one test case, in exactly one suite: the corpus's in
``tracediff.regressions``, a profile scenario whose implementations agree with one another
but not with the accepted golden digests in ``tracediff.golden``, every other profile
scenario in ``tracediff.<profile>``. Each failure's body ends with the command that
reproduces it. A diverged scenario is a ``<failure>``
whose ``type`` is the divergence kind and whose message names the signature and the place;
an implementation that raised or hung is an ``<error>``. The body is the explanation as
plain text. Written with the standard library's ElementTree, so every string is escaped.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterable

from tracediff.compare.model import (
    EMPTY,
    ERROR,
    FAILED,
    NOT_CONFIGURED,
    TIMEOUT,
    DiffReport,
    Divergence,
    ScenarioOutcome,
    StepOutcome,
)
from tracediff.report import describe

# XML 1.0 cannot carry most control characters, even escaped.
_FORBIDDEN = {c: None for c in range(32) if c not in (9, 10, 13)}


def _clean(text: str) -> str:
    return text.translate(_FORBIDDEN)


def render(report: DiffReport) -> str:
    root = ET.Element("testsuites", name="tracediff")
    suites: dict[str, list[ScenarioOutcome]] = {}
    for outcome in report.outcomes:
        suites.setdefault(outcome.suite, []).append(outcome)
    total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, outcomes in suites.items():
        counts = _suite(root, name, outcomes)
        for key in total:
            total[key] += counts[key]
    if report.steps:
        # Every failed step is a failing test case of its own, beside its findings: a CI view
        # that lists failed tests then shows which step of the gate failed, too.
        counts = _steps(root, report.steps)
        for key in total:
            total[key] += counts[key]
    for key, value in total.items():
        # JUnit's schema (junit-10.xsd, as Jenkins and pytest's own tests read it) has no
        # ``skipped`` on <testsuites>: skips are counted on each <testsuite> only.
        if key != "skipped":
            root.set(key, str(value))
    root.set("time", f"{report.wall_seconds:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _suite(root: ET.Element, name: str, outcomes: Iterable[ScenarioOutcome]) -> dict[str, int]:
    suite = ET.SubElement(root, "testsuite", name=f"tracediff.{name}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    seconds = 0.0
    for outcome in outcomes:
        counts["tests"] += 1
        seconds += outcome.seconds
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"tracediff.{name}",
            name=_clean(outcome.label),
            time=f"{outcome.seconds:.3f}",
        )
        d = outcome.divergence
        if not outcome.finding:
            continue
        failure = outcome.status not in (ERROR, TIMEOUT)
        counts["failures" if failure else "errors"] += 1
        element = ET.SubElement(
            case,
            "failure" if failure else "error",
            type=d.kind if d else outcome.status,
            message=_clean(_message(outcome, d)),
        )
        body = _body(d) if d else (outcome.explanation or outcome.status)
        if d is not None and outcome.explanation:
            body += f"\nnote: {outcome.explanation}"
        if outcome.reproduce:
            body += f"\nreproduce: {outcome.reproduce}"
        element.text = _clean(body)
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("time", f"{seconds:.3f}")
    return counts


def _steps(root: ET.Element, steps: Iterable[StepOutcome]) -> dict[str, int]:
    suite = ET.SubElement(root, "testsuite", name="tracediff.gate")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for step in steps:
        counts["tests"] += 1
        case = ET.SubElement(suite, "testcase", classname="tracediff.gate", name=step.name)
        if step.status == FAILED:
            counts["failures"] += 1
            ET.SubElement(case, "failure", type="gate", message=_clean(step.detail))
        elif step.status in (NOT_CONFIGURED, EMPTY):
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_clean(f"{step.status}: {step.detail}"))
    for key, value in counts.items():
        suite.set(key, str(value))
    return counts


def _message(outcome: ScenarioOutcome, d: Divergence | None) -> str:
    if d is None:
        return f"{outcome.label}: {outcome.explanation or outcome.status}"
    return f"{d.signature} at {d.location} ({describe.where(d)})"


def _body(d: Divergence) -> str:
    a, b = d.impls
    lines = [
        f"scenario:  {describe.scenario_line(d)}",
        f"compared:  A = {a}, B = {b}",
        f"where:     {describe.where(d)}",
        f"field:     {d.location}",
        f"kind:      {describe.kind_line(d)}",
        f"signature: {d.signature}",
    ]
    if d.state is not None or d.state_note:
        lines.append(f"state:     {describe.state_line(d)}")
    if d.later:
        lines.append(f"then:      {d.later}")
    for change in d.changes[:10]:
        ulps = f"  ({describe.ulps_text(change)})" if change.ulps is not None else ""
        shown_a, shown_b = describe.short_pair(change.a, change.b)
        lines.append(f"  {change.location}: A {shown_a}  B {shown_b}{ulps}")
    if d.total_changes > 10:
        lines.append(f"  ... and {d.total_changes - 10} more fields")
    if d.message:
        lines += ["", d.message]
    lines += [f"note: {note}" for note in d.notes]
    return "\n".join(lines)
