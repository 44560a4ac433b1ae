"""Where the built-in data lives: profiles, the regression corpus, golden digests.

The tool ships the data its own scheduler model needs to run ``--profile quick`` (and the
gate) from anywhere. In a source checkout (or an editable install) that data is the
repository's editable source (``scenarios/``, ``scenarios/regressions/``, ``golden/``); a
built wheel carries copies of the same files as package data under ``tracediff/data/``
(pyproject.toml maps those directories into the package). Callers ask for a kind and get
whichever exists, the packaged copy first.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent

# kind -> (directory inside the package, directory in a source checkout)
_KINDS = {
    "profiles": ("data/profiles", "scenarios"),
    "regressions": ("data/regressions", "scenarios/regressions"),
    "golden": ("data/golden", "golden"),
    "workloads": ("data/workloads", "workloads"),
}
# what the files of each kind are called (any other kind: JSON files)
_PATTERNS = {"profiles": ("*.toml",), "workloads": ("*.jsonl", "*.csv")}


def builtin_dir(kind: str) -> Path | None:
    """The built-in directory of ``kind`` ("profiles", "regressions" or "golden"), or
    None when neither the packaged copy nor the checkout's source is there."""
    packaged, source = _KINDS[kind]
    for candidate in (_PACKAGE / packaged, _PACKAGE.parent / source):
        if candidate.is_dir() and holds_data(candidate, kind):
            return candidate
    return None


def holds_data(directory: Path, kind: str) -> bool:
    """Whether ``directory`` holds files of this kind (profiles: ``*.toml``, workloads:
    ``*.jsonl`` or ``*.csv``, else ``*.json``)."""
    # A checkout's parent directory might hold an unrelated "golden/" or "scenarios/": only a
    # directory with the files this kind is made of counts.
    return any(any(directory.glob(p)) for p in _PATTERNS.get(kind, ("*.json",)))
