"""Seeds to windows: how a workload profile's seed picks the requests of its scenario.

The rule (docs/workloads.md, "Windows"): with ``F`` files, seed ``s`` reads file
``s mod F``; in it, window ``w = (s div F) mod W`` where ``W`` is the file's window count
``max(1, (count - window) div stride + 1)``; the window is the requests
``w*stride .. w*stride + window - 1`` (a file shorter than a window is one window of all
its requests). Every seed has a window, so any seed set works, and a seed beyond the
windows takes one again with other draws from the seed (the rest of the scenario).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from tracediff.errors import ScenarioError
from tracediff.workload.request import TraceRequest
from tracediff.workload.source import Workload, open_workload
from tracediff.workload.spec import WorkloadSpec

TAG_CHARS = 8  # of a workload's content digest, in its profile's name
MAX_NAME = 100  # characters of a profile name (the models' PROFILE_NAME)


@dataclass(frozen=True)
class WorkloadOrigin:
    """Where a scenario's requests came from, in its ``to_dict()`` under ``"workload"``:
    the file's name and content hash, the window, and the scales the model applied."""

    name: str
    sha256: str
    format: str
    start: int  # the window's first request, counted from 0 in the file
    length: int
    scales: tuple[tuple[str, float], ...] = ()  # (what, factor), in the model's order

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sha256": self.sha256,
            "format": self.format,
            "start": self.start,
            "length": self.length,
            "scales": {k: v for k, v in self.scales},
        }

    @classmethod
    def from_dict(cls, data: Any) -> WorkloadOrigin:
        try:
            if not isinstance(data, dict):
                raise TypeError(f"a {type(data).__name__}, expected a map")
            text = {k: data[k] for k in ("name", "sha256", "format")}
            ints = {k: data[k] for k in ("start", "length")}
            scales = data["scales"]
            if not all(isinstance(v, str) for v in text.values()):
                raise TypeError("name, sha256 and format must be strings")
            if not all(type(v) is int and v >= 0 for v in ints.values()):
                raise TypeError("start and length must be integers >= 0")
            if not isinstance(scales, dict) or not all(
                isinstance(k, str) and type(v) in (int, float) for k, v in scales.items()
            ):  # fmt: skip
                raise TypeError("scales must map names to numbers")
        except (KeyError, TypeError) as exc:
            raise ScenarioError(f"malformed scenario: workload: {exc}") from None
        return cls(**text, **ints, scales=tuple((k, float(v)) for k, v in scales.items()))


@dataclass(frozen=True)
class Window:
    """The requests of one seed's scenario, and where they came from."""

    workload: Workload
    start: int
    requests: tuple[TraceRequest, ...]

    def origin(self, scales: tuple[tuple[str, float], ...]) -> WorkloadOrigin:
        w = self.workload
        return WorkloadOrigin(w.name, w.sha256, w.format, self.start, len(self.requests), scales)


@dataclass(frozen=True)
class WorkloadSet:
    """A profile's workload files, opened (each read once, at the profile's load)."""

    spec: WorkloadSpec
    workloads: tuple[Workload, ...]

    @property
    def name(self) -> str:
        return "+".join(w.name for w in self.workloads)

    @property
    def tag(self) -> str:
        """TAG_CHARS hex digits of a sha256 of the files' contents and of how they are cut
        and scaled: what the scenarios depend on. Not of the paths: a checkout moved to
        another directory (CI's, a colleague's) keeps its golden manifests' names."""
        spec = self.spec
        text = json.dumps(
            {
                "files": [w.sha256 for w in self.workloads],
                "cut": [spec.window, spec.step, spec.block_tokens],
                "scales": [spec.time_scale, spec.input_scale, spec.output_scale],
            },
            sort_keys=True,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:TAG_CHARS]

    def profile_name(self, base: str) -> str:
        """The name of profile ``base`` over these files (``--workload FILE``):
        ``BASE+STEM-TAG``, e.g. ``quick+traffic-1a2b3c4d``. It names golden manifests and
        saved scenarios, so the stem alone is not enough: ``a/traffic.jsonl`` and
        ``b/traffic.jsonl`` would share one manifest (the tag keeps them apart, and names
        a rewritten file's scenarios apart from the old ones'). At most MAX_NAME characters,
        the tag always kept."""
        head = f"{base}+{self.name}"[: MAX_NAME - 1 - TAG_CHARS]
        return f"{head}-{self.tag}"

    def windows(self, workload: Workload) -> int:
        spec = self.spec
        if workload.count <= spec.window:
            return 1
        return (workload.count - spec.window) // spec.step + 1

    @property
    def total_windows(self) -> int:
        return sum(self.windows(w) for w in self.workloads)

    def window(self, seed: int) -> Window:
        workload = self.workloads[seed % len(self.workloads)]
        start = (seed // len(self.workloads)) % self.windows(workload) * self.spec.step
        return Window(workload, start, workload.read(start, self.spec.window))


def load(spec: WorkloadSpec) -> WorkloadSet:
    return WorkloadSet(spec, tuple(open_workload(f) for f in spec.files))
