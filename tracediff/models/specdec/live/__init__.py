"""The live engine: a real speculative decoder in torch that executes every planned round.

It drives any scheduler through the driver interface (``arrive``, ``plan``, ``complete``),
executes each planned round on a tiny decoder-only transformer (drafting, one batched
verification forward, greedy acceptance, the bonus token) and records a trace in the
ordinary format, whose completion records carry the measured durations and the real
acceptance. ``tracediff replay`` re-drives any implementation from such a trace.

torch is an optional extra: nothing outside this package imports it, and this package
imports it lazily through :func:`require_torch`, so ``import tracediff.models.specdec.live`` works
without
it. The modules that need torch at import time (``model``, ``executor``, ``engine``,
``oracle``) are only imported once :func:`require_torch` has succeeded.
"""

from __future__ import annotations

import warnings
from types import ModuleType

from tracediff.errors import LiveUnavailable

EXTRA = "pip install 'tracediff-harness[live]'"


def require_torch() -> ModuleType:
    """Import torch, or raise :class:`LiveUnavailable` naming the extra to install."""
    try:
        with warnings.catch_warnings():
            # The CPU wheel warns when numpy is absent; the live engine never uses numpy.
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
            import torch
    except ImportError:
        raise LiveUnavailable(
            f"the live engine needs torch, which is not installed: {EXTRA} "
            "(or 'make live-setup' in a checkout)"
        ) from None
    return torch
