"""A model's profile over workloads: what every model that maps windows does alike.

A model's profile that takes workloads is a dataclass with ``name``, ``description`` and
``workload`` (a :class:`WorkloadSet` or None) fields, its generator mapping
``workload.window(seed)`` when there is one. Two ways make such a profile, the same for
every model, so they are here rather than copied into each (docs/models.md, "Workloads"):

* :func:`over`: a profile over the files of ``--workload FILE`` (or a profile file's
  ``[workload]`` table), which is what ``DecisionModel.with_workload`` returns;
* :func:`over_samples`: a built-in profile over the traffic samples tracediff ships
  (``workloads/``), read when the profile is loaded.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, TypeVar

from tracediff.errors import UsageError
from tracediff.resources import builtin_dir
from tracediff.workload.spec import WorkloadSpec
from tracediff.workload.windows import WorkloadSet, load

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    P = TypeVar("P", bound=DataclassInstance)
else:
    P = TypeVar("P")

# The shipped samples (workloads/, docs/workloads.md): with three files, seed s reads
# sample s mod 3.
SAMPLES = ("mooncake_conversation.jsonl", "azure_code.csv", "burstgpt_synthetic.csv")


def over(profile: P, workloads: WorkloadSet) -> P:
    """``profile`` over ``workloads`` (``--workload FILE``): its seeds and bounds, the
    requests from the windows; named ``PROFILE+FILE-TAG`` (:meth:`WorkloadSet.profile_name`)
    and described with the files it reads."""
    name: str = getattr(profile, "name")  # noqa: B009 - a field of the model's dataclass
    description: str = getattr(profile, "description")  # noqa: B009 - likewise
    return dataclasses.replace(
        profile,
        name=workloads.profile_name(name),
        description=f"{description} ({workloads.spec.describe()})",
        workload=workloads,
    )


def over_samples(
    profile: P, *, window: int = 16, time_scale: float = 0.1, output_scale: float = 0.25
) -> P:
    """``profile``, under its own name, over the shipped samples (:data:`SAMPLES`):
    ``window`` requests a scenario, arrival gaps times ``time_scale``, outputs times
    ``output_scale`` (the samples' outputs are long for a small scenario's bounds).
    UsageError when the samples are not installed."""
    directory = builtin_dir("workloads")
    if directory is None:
        raise UsageError("the workload profile's samples are not installed (workloads/)")
    spec = WorkloadSpec(
        tuple(str(directory / name) for name in SAMPLES),
        window=window,
        time_scale=time_scale,
        output_scale=output_scale,
    )
    return dataclasses.replace(profile, workload=load(spec))
