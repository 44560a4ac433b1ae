"""Shrink-pass builders for a model whose scenario is a dataclass holding a tuple of items
(requests, jobs) as dataclasses: the passes every such model writes alike, built from a
field's name (docs/models.md, "Shrink passes").

Each builder returns what a :data:`tracediff.model.ShrinkPass` runs: a function of the
shrink in progress (:class:`tracediff.model.Shrinking`). A pass reads ``shrink.best`` again
after every step, since each candidate kept replaces it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from tracediff.model import Shrinking

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    S = TypeVar("S", bound=DataclassInstance)
else:
    S = TypeVar("S")

Pass = Callable[[Shrinking], None]
Build = Callable[[Any, int, int], Any]  # (scenario, item index, value) -> candidate


def replace_item(scenario: S, index: int, items: str = "requests", **changes: Any) -> S:
    """``scenario`` with item ``index`` of its tuple ``items`` changed by ``changes``."""
    held = list(getattr(scenario, items))
    held[index] = dataclasses.replace(held[index], **changes)
    return dataclasses.replace(scenario, **{items: tuple(held)})


def delete_items(items: str = "requests") -> Pass:
    """Adaptive deletion of runs of the items (:meth:`Shrinking.delete_runs`)."""

    def run(shrink: Shrinking) -> None:
        shrink.delete_runs(
            lambda s: getattr(s, items),
            lambda kept: dataclasses.replace(shrink.best, **{items: kept}),
        )

    return run


def lower_field(field: str, least: Callable[[Any], int]) -> Pass:
    """The scenario's integer ``field`` lowered towards ``least(scenario)``
    (:meth:`Shrinking.minimize`), where it is above it."""

    def run(shrink: Shrinking) -> None:
        value = getattr(shrink.best, field)
        bound = least(shrink.best)
        if value > bound:

            def works(v: int) -> bool:
                return shrink.holds(dataclasses.replace(shrink.best, **{field: v}))

            shrink.minimize(value, bound, works)

    return run


def lower_each(
    value: str | Callable[[Any], int],
    least: int,
    build: Build | None = None,
    items: str = "requests",
) -> Pass:
    """Each item's ``value`` (a field's name, or what it reads of the item) lowered towards
    ``least``, item by item in order, where it is above it; ``build(scenario, index, v)``
    makes the candidate (by default: the field set to ``v``, :func:`replace_item`)."""
    read = (lambda item: getattr(item, value)) if isinstance(value, str) else value
    if build is None:
        if not isinstance(value, str):
            raise TypeError("lower_each: a value read by a function needs its build")
        field = value

        def build(s: Any, i: int, v: int) -> Any:
            return replace_item(s, i, items, **{field: v})

    make: Build = build

    def run(shrink: Shrinking) -> None:
        for index in range(len(getattr(shrink.best, items))):
            # an earlier step of this pass may have made the items fewer
            if index >= len(getattr(shrink.best, items)):
                return
            current = read(getattr(shrink.best, items)[index])
            if current > least:

                def works(v: int, i: int = index) -> bool:
                    return shrink.holds(make(shrink.best, i, v))

                shrink.minimize(current, least, works)

    return run
