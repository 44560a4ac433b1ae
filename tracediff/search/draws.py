"""Shrinking and fuzzing from a model's generator (``generate_from``, :mod:`tracediff.draws`).

A scenario drawn through :class:`~tracediff.draws.Draws` is remembered with the choices that
made it (:func:`remember`). The shrink passes here reduce those choices instead of the
scenario, as Hypothesis's reducer does, and rebuild each candidate by replaying them through
the same generator, so every candidate is a valid scenario by construction and no model needs
to know how to delete a request or lower a length:

* ``draws: delete`` removes runs of choices (8, 4, 2 and 1 long, from the end): an element a
  list drew with :meth:`~tracediff.draws.Draws.many` goes with its choices;
* ``draws: zero`` sets runs of choices to 0, each draw's simplest answer;
* ``draws: lower`` bisects each choice towards 0 (a count, a length, a gap).

Candidates that replay to the best scenario itself, or to one already tried, are not run
again. A scenario that was not drawn here (a file from the corpus) is first regenerated
from its profile and seed; if that does not give it back, the passes have nothing to reduce.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.draws import Draws, TooManyDraws, hypothesis_draws
from tracediff.model import Shrinking, ShrinkPass

MEMO_SIZE = 4096  # scenarios remembered with their choices (a shrink keeps its best few)
RUNS = (8, 6, 4, 3, 2, 1)  # an element of a list is often 2 or 3 draws (more?, fields)


@dataclass(frozen=True)
class Drawn:
    """How a scenario was drawn: the profile and seed it was generated for, its choices."""

    profile: Any
    seed: int
    choices: tuple[int, ...]
    streams: tuple[tuple[str, tuple[int, ...]], ...] = ()


_MEMO: OrderedDict[str, Drawn] = OrderedDict()


def key(scenario: Any) -> str:
    """A scenario's identity: its canonical JSON (to_dict, keys sorted)."""
    return json.dumps(scenario.to_dict(), sort_keys=True, separators=(",", ":"), default=repr)


def remember(scenario: Any, drawn: Drawn) -> None:
    k = key(scenario)
    _MEMO[k] = drawn
    _MEMO.move_to_end(k)
    while len(_MEMO) > MEMO_SIZE:
        _MEMO.popitem(last=False)


def recall(scenario: Any) -> Drawn | None:
    return _MEMO.get(key(scenario))


def seed_text(model_name: str, profile_name: str, seed: int) -> str:
    """The text a generator's random stream is seeded with for ``(profile, seed)``."""
    return f"{model_name}:{profile_name}:{seed}"


def generate_seeded(model: Any, profile: Any, seed: int) -> Any:
    """``model.generate_from`` for one seed, remembered with its choices."""
    draws = Draws.seeded(seed_text(model.name, profile.name, seed))
    scenario = model.generate_from(profile, seed, draws)
    choices, streams = draws.recorded()
    remember(scenario, Drawn(profile, seed, choices, tuple(sorted(streams.items()))))
    return scenario


def replay(model: Any, drawn: Drawn, label: Any) -> tuple[Any, Drawn] | None:
    """The scenario ``drawn``'s choices make, labelled as ``label`` (profile and seed); None
    when the generator refuses them (it may raise on a replay it cannot make)."""
    draws = Draws.replaying(drawn.choices, dict(drawn.streams))
    try:
        scenario = model.generate_from(drawn.profile, drawn.seed, draws)
    except (TooManyDraws, ValueError):
        return None
    if (scenario.profile, scenario.seed) != (label.profile, label.seed):
        scenario = model.relabel(scenario, label.profile)
        if scenario.seed != label.seed:
            import dataclasses

            scenario = dataclasses.replace(scenario, seed=label.seed)
    # what was consumed: a longer sequence than the generator read is the shorter one
    used, streams = draws.recorded()
    made = Drawn(drawn.profile, drawn.seed, used, tuple(sorted(streams.items())))
    remember(scenario, made)
    return scenario, made


def _drawn_of(model: Any, scenario: Any) -> Drawn | None:
    found = recall(scenario)
    if found is not None:
        return found
    try:  # a scenario from its profile and seed (the shrink of `shrink --seed S`)
        from tracediff.project.profiles import load_profile

        profile = load_profile(model, scenario.profile)
        again = generate_seeded(model, profile, scenario.seed)
    except Exception:  # noqa: BLE001 - not regenerable here: nothing for these passes
        return None
    return recall(scenario) if key(again) == key(scenario) else None


class _Reducer:
    """One pass's view of the shrink: the best scenario's choices, candidates tried."""

    def __init__(self, model: Any, shrink: Shrinking) -> None:
        self.model = model
        self.shrink = shrink
        self.tried: set[tuple[int, ...]] = set()

    def current(self) -> Drawn | None:
        return _drawn_of(self.model, self.shrink.best)

    def attempt(self, choices: Sequence[int]) -> bool:
        """Replay ``choices``; run the scenario unless it is the best or was tried."""
        drawn = self.current()
        if drawn is None:
            return False
        wanted = tuple(choices)
        if wanted in self.tried or wanted == drawn.choices:
            return False
        self.tried.add(wanted)
        made = replay(self.model, Drawn(drawn.profile, drawn.seed, wanted, drawn.streams),
                      self.shrink.best)  # fmt: skip
        if made is None:
            return False
        scenario, used = made
        if key(scenario) == key(self.shrink.best) or used.choices in self.tried - {wanted}:
            return False
        self.tried.add(used.choices)
        try:
            self.model.validate(scenario)
        except Exception:  # noqa: BLE001 - the generator made something the model refuses
            return False
        return bool(self.shrink.consider(scenario))

    def out_of_budget(self) -> bool:
        return self.shrink.attempts >= self.shrink.budget


Edit = Callable[[tuple[int, ...], int, int], "tuple[int, ...] | None"]


def _over_runs(model: Any, edit: Edit) -> Callable[[Shrinking], None]:
    """A pass that tries ``edit(choices, start, size)`` on every run of the best's choices,
    runs of each size in RUNS, from the end (where a generator's last elements are), on the
    best as it stands after each kept candidate; ``edit`` None: nothing to try there."""

    def run(shrink: Shrinking) -> None:
        reducer = _Reducer(model, shrink)
        for size in RUNS:
            drawn = reducer.current()
            if drawn is None:
                return
            start = len(drawn.choices) - size
            while start >= 0 and not reducer.out_of_budget():
                drawn = reducer.current()
                if drawn is None:
                    return
                if start + size <= len(drawn.choices):
                    candidate = edit(drawn.choices, start, size)
                    if candidate is not None:
                        reducer.attempt(candidate)
                start -= 1

    return run


def _deleted(choices: tuple[int, ...], start: int, size: int) -> tuple[int, ...]:
    return choices[:start] + choices[start + size :]


def _zeroed(choices: tuple[int, ...], start: int, size: int) -> tuple[int, ...] | None:
    if not any(choices[start : start + size]):
        return None  # already the simplest
    return choices[:start] + (0,) * size + choices[start + size :]


def _delete(model: Any) -> Callable[[Shrinking], None]:
    return _over_runs(model, _deleted)


def _zero(model: Any) -> Callable[[Shrinking], None]:
    return _over_runs(model, _zeroed)


def _lower(model: Any) -> Callable[[Shrinking], None]:
    def run(shrink: Shrinking) -> None:
        reducer = _Reducer(model, shrink)
        index = 0
        while not reducer.out_of_budget():
            drawn = reducer.current()
            if drawn is None or index >= len(drawn.choices):
                return
            value = drawn.choices[index]
            if value > 0:

                def works(v: int, at: int = index) -> bool:
                    now = reducer.current()
                    if now is None or at >= len(now.choices):
                        return False
                    if now.choices[at] == v:
                        return True
                    return reducer.attempt(now.choices[:at] + (v,) + now.choices[at + 1 :])

                shrink.minimize(value, 0, works)
            index += 1

    return run


def shrink_passes(model: Any) -> tuple[ShrinkPass, ...]:
    """The passes that reduce a drawn scenario's choices (see the module)."""
    return (
        ("draws: delete", _delete(model)),
        ("draws: zero", _zero(model)),
        ("draws: lower", _lower(model)),
    )


FUZZ_PROFILE = "fuzz"


def fuzz_strategy(model: Any, profile: Any, max_size: int) -> Any:
    """A Hypothesis strategy of the scenarios ``model.generate_from`` makes for ``profile``
    (at most ``max_size`` in ``model.size``), Hypothesis answering every draw. Each is
    labelled profile ``fuzz`` with a seed taken from its choices, so two found scenarios
    never share a name (nor the files named after them)."""
    from hypothesis import strategies as st

    @st.composite
    def scenarios(draw: Any) -> Any:
        draws = hypothesis_draws(draw)
        scenario = model.generate_from(profile, 0, draws)
        choices, streams = draws.recorded()
        digest = hashlib.sha256(repr((choices, sorted(streams.items()))).encode()).digest()
        seed = int.from_bytes(digest[:6], "big")
        scenario = model.relabel(scenario, FUZZ_PROFILE)
        import dataclasses

        scenario = dataclasses.replace(scenario, seed=seed)
        remember(scenario, Drawn(profile, seed, choices, tuple(sorted(streams.items()))))
        return scenario

    return scenarios().filter(lambda s: model.size(s) <= max(1, max_size))


def drawn_of(model: Any, scenario: Any) -> Drawn | None:
    """How ``scenario`` was drawn (remembered, or regenerated from its profile and seed), or
    None when it was not drawn through ``model``'s generator."""
    return _drawn_of(model, scenario)
