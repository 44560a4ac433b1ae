"""Implementations in other processes, for every model (docs/protocol.md).

The core owns the process protocol: the framing (:mod:`~tracediff.process.framing`), the
processes and their pipes, timeouts, stderr, CPU pinning and lifetime across scenarios
(:mod:`~tracediff.process.pipes`), the generic layout that runs any model's implementation
with no code from the model (:mod:`~tracediff.process.generic`), and the server that
answers it (:mod:`~tracediff.process.server`, ``tracediff serve``). A model with a layout
of its own (specdec) gives its client through ``exec_factory`` and its server through
``serve_impl``, built on the same machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_FACTORIES: dict[tuple[str, ...], Any] = {}


def exec_factory(
    model: Any,
    name: str,
    target: str,
    *,
    env: Mapping[str, str] | None = None,
    strict: bool = False,
) -> Any:
    """The factory of an ``exec:COMMAND`` implementation of ``model`` in the generic layout:
    one per process, model and command (its idle processes are shared by every caller in
    this process). ``env``: the process's environment (None: this one's); ``strict``: the
    server must run this tracediff version (one tracediff started itself)."""
    from tracediff.process.generic import GenericFactory
    from tracediff.process.pipes import parse_command

    argv = parse_command(target)
    key = (str(model.name), name, *argv, *sorted(f"{k}={v}" for k, v in (env or {}).items()))
    factory = _FACTORIES.get(key)
    if factory is None:
        factory = _FACTORIES[key] = GenericFactory(model, name, argv, env=env, strict=strict)
    return factory
