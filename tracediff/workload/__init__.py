"""Workloads: public LLM request traces as the requests of scenarios (docs/workloads.md).

The core's side of "scenarios from real traffic": reading request traces and cutting them
into windows, knowing no model. A model maps a window's requests into its own scenario
(``DecisionModel.with_workload``, which turns a profile into one whose seed ``s`` maps
``WorkloadSet.window(s)``); nothing here imports one.

    formats.py   the formats, told apart by content: Mooncake and tracediff JSON lines
                 (jsonl.py), Azure LLM inference and BurstGPT CSVs (csvs.py)
    numbers.py   counts and times, read exactly (integer microseconds)
    request.py   TraceRequest, what every reader gives
    source.py    Workload: one file opened once (checked, hashed, indexed), windows read
    spec.py      WorkloadSpec: a profile's [workload] table; --workload's profile names
    windows.py   seeds to windows (WorkloadSet), and WorkloadOrigin, a scenario's record
                 of where its requests came from
    profiles.py  a model's profile over workloads: over (--workload), over_samples (the
                 shipped samples)

Damaged input is a :class:`tracediff.errors.WorkloadError` naming ``file:line`` (exit 2).
"""

from __future__ import annotations

from tracediff.workload.profiles import SAMPLES, over, over_samples
from tracediff.workload.request import TraceRequest
from tracediff.workload.source import Workload, open_workload
from tracediff.workload.spec import (
    WorkloadSpec,
    check_profile_name,
    compose,
    for_file,
    parse_table,
    split,
)
from tracediff.workload.windows import TAG_CHARS, Window, WorkloadOrigin, WorkloadSet, load

__all__ = [
    "SAMPLES",
    "TAG_CHARS",
    "TraceRequest",
    "Window",
    "Workload",
    "WorkloadOrigin",
    "WorkloadSet",
    "WorkloadSpec",
    "check_profile_name",
    "compose",
    "for_file",
    "load",
    "open_workload",
    "over",
    "over_samples",
    "parse_table",
    "split",
]
