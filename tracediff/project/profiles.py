"""Loading a profile by name, for every command: the model's own profile, and the workload
that ``--workload FILE`` put over it.

A command names its profile by a string (it travels to worker processes, names golden
manifests, is written in journals). ``--workload FILE`` makes that string
``PROFILE@/abs/FILE`` (:func:`tracediff.workload.compose`); this is the one place it is
taken apart: the model loads ``PROFILE`` and puts the workload over it
(``DecisionModel.with_workload``), so every command takes a workload without knowing it.
"""

from __future__ import annotations

import shlex
from typing import Any

from tracediff import workload
from tracediff.model import DecisionModel


def load_profile(model: DecisionModel, name: str) -> Any:
    """The profile ``name`` of ``model``, with its ``--workload`` file when it names one."""
    base, path = workload.split(name)
    profile = model.load_profile(base)
    if path is None:
        return profile
    return model.with_workload(profile, workload.load(workload.for_file(path)))


def profile_options(name: str) -> str:
    """The command-line options that name profile ``name`` again (for the commands a
    message tells the user to run): ``--profile P``, and ``--workload FILE`` with it when
    ``name`` carries one."""
    base, path = workload.split(name)
    options = f"--profile {shlex.quote(base)}"
    return options if path is None else f"{options} --workload {shlex.quote(path)}"
