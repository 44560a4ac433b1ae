"""File names made from data, and the check that every write stays in its directory.

Profile names, scenario labels, seeds and implementation names come from files (a scenario
JSON, a profile TOML, a trace header) and from the command line; some of them end up in the
names of files tracediff writes (``<profile>-<seed>-<impl>.trace``). A name such as
``../../x`` must not turn into a path outside the directory it was meant for, so every such
name goes through :func:`component`, and every path built from one through :func:`inside`,
which also refuses a directory that a symbolic link leads elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from tracediff.errors import OutputError

MAX_COMPONENT = 120  # characters; file systems allow 255 bytes, and names should stay readable
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def component(*parts: object) -> str:
    """One file-name component from ``parts`` joined by ``-``: every run of characters other
    than ASCII letters, digits and ``._+-`` becomes ``_``, leading dots are dropped (no hidden
    files, no ``..``), and the result is never empty and at most MAX_COMPONENT characters.

    Plain names pass unchanged: ``component("quick", 12, "reference") == "quick-12-reference"``.
    """
    text = "-".join(str(part) for part in parts)
    name = _UNSAFE.sub("_", text).lstrip(".")[:MAX_COMPONENT]
    return name or "_"


TAG_CHARS = 8


def scenario_tag(scenario: Any) -> str:
    """Eight hex digits of the sha256 of a scenario's canonical JSON: in the name of what a
    finding keeps, so that two findings whose scenarios share a profile and a seed (two
    shrunk repros of one seed in the corpus, scenario files, fuzz finds) never overwrite each
    other's files, while the same scenario always gets the same name."""
    text = json.dumps(scenario.to_dict(), sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:TAG_CHARS]


def inside(directory: str | os.PathLike[str], *names: str, what: str = "output") -> Path:
    """``directory`` joined with ``names`` (each one plain component), checked to resolve
    inside ``directory`` even through symbolic links; :class:`OutputError` otherwise.

    ``what`` names the flag or file kind in the message.
    """
    root = Path(directory)
    for name in names:
        if name != component(name):
            # a caller's mistake, not the user's: names from data go through component()
            raise ValueError(f"{name!r} is not a plain file name; pass it through component()")
    target = root.joinpath(*names)
    base = root.resolve()
    resolved = target.resolve()
    if resolved != base and base not in resolved.parents:
        raise OutputError(
            f"{what} {target}: resolves to {resolved}, outside {base} (a symbolic link?); "
            "refusing to write there"
        )
    return target
