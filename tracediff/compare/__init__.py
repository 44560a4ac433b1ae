"""Comparison beyond bytes: explain a divergence, classify it, group findings by signature.

Compare first, explain after, present last: this package finds and describes; the
presenters in :mod:`tracediff.report` render what it produced and never decide anything.
It never imports ``report`` (nor rich, nor click).

- :mod:`~tracediff.compare.model`: the data (Divergence, FieldChange, DiffReport, ...).
- :mod:`~tracediff.running.explain`: re-run or re-read up to the divergence; ``explain``
  (imported from there: it loads deepdiff and the runner, which the model does not need).
- :mod:`~tracediff.compare.fields`: deepdiff of two records, named paths, classification.
- :mod:`~tracediff.compare.floats`: ULP distance and relative error.
- :mod:`~tracediff.compare.signature`: grouping by (kind, normalised path).
- :mod:`~tracediff.compare.timeline`: rounds for the timeline picture.
"""

from tracediff.compare.model import (
    DECISION,
    DEFAULT_CONTEXT,
    DIVERGED,
    ERROR,
    IDENTICAL,
    KINDS,
    STRUCTURE,
    TIMEOUT,
    VALUE,
    ContextRow,
    DiffReport,
    Divergence,
    FieldChange,
    RoundMark,
    ScenarioOutcome,
    Signature,
    SignatureGroup,
    StepOutcome,
    normalise_path,
)
from tracediff.compare.signature import group_signatures

__all__ = [
    "DECISION",
    "DEFAULT_CONTEXT",
    "DIVERGED",
    "ERROR",
    "IDENTICAL",
    "KINDS",
    "STRUCTURE",
    "TIMEOUT",
    "VALUE",
    "ContextRow",
    "DiffReport",
    "Divergence",
    "FieldChange",
    "RoundMark",
    "ScenarioOutcome",
    "Signature",
    "SignatureGroup",
    "StepOutcome",
    "group_signatures",
    "normalise_path",
]
