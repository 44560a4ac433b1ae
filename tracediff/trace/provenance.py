"""A trace's provenance as text, every key and value bounded.

The provenance frame is whatever the file's writer put there: a hostile or broken one may
hold a 50 MB host name, a list of a million strings or a million keys, and a frame may be
256 MiB. Whatever tracediff prints or names of it (``show``, the names ``diff`` gives the two
sides, the model a trace names) goes through here, so the text is bounded by these limits
whatever the file holds, and building it costs no more than the file's decoding did.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any

MAX_TEXT = 200  # characters shown of one value
MAX_KEY = 24  # of one key (a column that does not wrap)
MAX_KEYS = 50  # keys shown; the rest are counted

_REPR = reprlib.Repr()
_REPR.maxlevel = 3
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 10
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = MAX_TEXT


def text(value: Any, limit: int = MAX_TEXT) -> str:
    """``value`` as text of at most about ``limit`` characters, saying how much was cut: a
    string as itself, anything else as a bounded repr (its parts cut before it is built)."""
    if isinstance(value, str):
        shown = value
    elif isinstance(value, bool | int | float) or value is None:
        shown = str(value)
    else:
        shown = _REPR.repr(value)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit]}... [{len(shown) - limit:,} more characters cut]"


def rows(provenance: Mapping[Any, Any] | None) -> list[tuple[str, str]]:
    """(key, value) of the provenance map for display, sorted by key, at most ``MAX_KEYS``
    of them and then one row counting the rest."""
    if not provenance:
        return []
    keys = sorted(provenance, key=str)
    shown = [(text(key, MAX_KEY), text(provenance[key])) for key in keys[:MAX_KEYS]]
    if len(keys) > MAX_KEYS:
        shown.append(("...", f"{len(keys) - MAX_KEYS:,} more keys not shown"))
    return shown
