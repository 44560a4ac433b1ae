"""What a profile says about its workload: the ``[workload]`` table, and ``--workload``.

A profile with a ``[workload]`` table takes its requests from request traces instead of
the generator (docs/workloads.md)::

    [workload]
    files = ["../workloads/mooncake_conversation.jsonl"]   # or file = "..."; relative to
    window = 16          # requests per scenario           # the profile's own file
    stride = 16          # requests between two windows' starts (default: window)
    time_scale = 0.1     # arrival gaps are multiplied by this
    input_scale = 1.0    # prompt lengths are multiplied by this, then clipped (the model's
    output_scale = 1.0   # bounds); output lengths by this
    block_tokens = 512   # tokens per hash_ids block of the trace (Mooncake's 512)

``--workload FILE`` builds such a profile on the fly over the command's profile: the profile
name ``quick@/abs/path/FILE`` (:func:`compose`) travels wherever a profile name does (worker
processes, golden, campaigns) and each model's ``load_profile`` takes it apart
(:func:`split`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracediff.errors import ProfileError, UsageError

MAX_WINDOW = 10_000  # requests in one scenario; a model may allow fewer
SEPARATOR = "@"  # between a profile's name and the workload file of --workload
KEYS = (
    "file", "files", "window", "stride", "time_scale", "input_scale", "output_scale",
    "block_tokens",
)  # fmt: skip


@dataclass(frozen=True)
class WorkloadSpec:
    files: tuple[str, ...]  # absolute paths
    window: int = 16
    stride: int = 0  # 0: the window's length (windows side by side)
    time_scale: float = 0.1
    block_tokens: int = 512
    input_scale: float = 1.0
    output_scale: float = 1.0

    @property
    def step(self) -> int:
        return self.stride or self.window

    def describe(self) -> str:
        names = ", ".join(Path(f).name for f in self.files)
        return f"windows of {self.window} requests of {names}"


def compose(profile: str, workload: str | os.PathLike[str]) -> str:
    """The profile name of ``--workload FILE`` over ``profile``."""
    return f"{profile}{SEPARATOR}{Path(workload).resolve()}"


def split(name: str) -> tuple[str, str | None]:
    """(the profile's own name, the workload file of --workload or None). The file is
    absolute (compose resolves it), so only ``@/`` joins the two: a profile path that holds
    ``@`` otherwise (``v@2/p.toml``) is a path; one that holds ``@/`` is refused where the
    user gives it (:func:`check_profile_name`)."""
    at = name.rfind(SEPARATOR + "/")
    return (name, None) if at <= 0 else (name[:at], name[at + 1 :])


def check_profile_name(name: str, where: str) -> None:
    """UsageError when a profile name a user gives (``where``: the flag or setting) would
    read as a profile joined with a --workload file: it must not hold ``@/``."""
    if SEPARATOR + "/" in name:
        raise UsageError(
            f"{where} {name[:100]!r}: a profile name or path may not hold '@/' (tracediff joins "
            "a profile and its --workload file so); give the workload with --workload FILE, "
            "or move the profile file"
        )


def for_file(path: str, window: int | None = None) -> WorkloadSpec:
    """The workload of ``--workload FILE``: one file, the defaults."""
    return WorkloadSpec((str(Path(path).resolve()),), window or WorkloadSpec.window)


def parse_table(
    table: Any, base: Path, where: Callable[[str | None], str], max_window: int = MAX_WINDOW
) -> WorkloadSpec:
    """The ``[workload]`` table of a profile; ProfileError naming ``where(key)``. Relative
    file names are relative to ``base`` (the profile's directory)."""
    if not isinstance(table, dict):
        raise ProfileError(f"{where(None)}: must be a table ([workload]), got {table!r:.40}")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise ProfileError(f"{where(unknown[0])}: unknown key; allowed: {list(KEYS)}")
    if ("file" in table) == ("files" in table):
        raise ProfileError(f'{where(None)}: give file = "PATH" or files = [PATHS], one of them')
    files = [table["file"]] if "file" in table else table["files"]
    key = "file" if "file" in table else "files"
    if not isinstance(files, list) or not files or not all(isinstance(f, str) and f.strip()
                                                           for f in files):  # fmt: skip
        raise ProfileError(f"{where(key)}: must name workload files (strings), got {files!r:.60}")
    resolved = tuple(str((base / f).resolve()) for f in files)
    window = _integer(table, "window", WorkloadSpec.window, 1, max_window, where)
    stride = _integer(table, "stride", 0, 1, MAX_WINDOW * 100, where)
    block_tokens = _integer(table, "block_tokens", WorkloadSpec.block_tokens, 1, 1 << 20, where)
    time_scale, input_scale, output_scale = (
        _scale(table, key, getattr(WorkloadSpec, key), where)
        for key in ("time_scale", "input_scale", "output_scale")
    )
    return WorkloadSpec(
        resolved, window, stride, time_scale, block_tokens, input_scale, output_scale
    )


def _scale(
    table: dict[str, Any], key: str, default: float, where: Callable[[str | None], str]
) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
        math.isfinite(value) and 0 < value <= 1000
    ):  # fmt: skip
        raise ProfileError(f"{where(key)}: must be a number above 0, at most 1000")
    return float(value)


def _integer(
    table: dict[str, Any], key: str, default: int, low: int, high: int,
    where: Callable[[str | None], str],
) -> int:  # fmt: skip
    value = table.get(key, default)
    if key not in table:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ProfileError(f"{where(key)}: must be an integer from {low} to {high:,}")
    return value
