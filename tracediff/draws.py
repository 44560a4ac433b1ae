"""Draws: one source of every random choice a model's generator makes.

A model may write its generator once, against a :class:`Draws` (the way a Hypothesis
strategy draws from its data): ``generate_from(profile, seed, draws)``. tracediff then gets
three things from that one function:

* **generation**: ``Draws.seeded(text)`` answers from ``random.Random(text)``, call for call
  as the same calls on the ``Random`` would (``integer`` is ``randint``, ``choice`` is
  ``choice``, ``shuffle`` is ``shuffle``, ``random`` is ``random``), so a generator moved
  from ``rng.randint(...)`` to ``draws.integer(...)`` makes the very scenarios it made;
* **shrinking** (:mod:`tracediff.search.draws`): every draw is recorded as a non-negative
  integer, its *choice*, with 0 the simplest answer (the low end of a range, the first
  option, no swap in a shuffle, ``False``, 0.0). A scenario is replayed from a shorter or
  smaller choice sequence, and whatever the sequence, the generator makes a valid scenario
  by construction: the approach of Hypothesis's internal reducer, which shrinks the choices
  behind a test case rather than the test case;
* **fuzzing**: the same calls answered by Hypothesis (:func:`hypothesis_draws`), so a fuzz
  search reaches every scenario the generator can make, orderings included.

A replayed choice beyond a draw's range is clamped into it; a sequence that runs out answers
0 from then on. A generator must draw nothing from anywhere else (its ``seed`` only labels
the scenario), or a replay would not make the scenario it recorded.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

FLOAT_STEPS = 1 << 53  # a float in [0, 1) is recorded as an integer of 53 bits
MAX_DRAWS = 1_000_000  # a generator drawing more than this is not making a test scenario


class TooManyDraws(Exception):
    """A generator drew more than :data:`MAX_DRAWS` choices (it does not stop)."""


class Draws:
    """The random choices of one generated scenario (see the module).

    ``choices`` is what was drawn so far, each as its choice (0 simplest); ``streams`` the
    named sub-streams (:meth:`sub`)."""

    def __init__(
        self,
        source: Callable[[int], int],
        rng: random.Random | None = None,
        seed_text: str = "",
        replay: dict[str, Sequence[int]] | None = None,
        biased: Callable[[float], bool] | None = None,
    ) -> None:
        self._source = source  # choice in [0, n) -> the answer's choice
        self._rng = rng  # generation: answers come from it, exactly as Random's own methods
        self._biased = biased  # True with probability p (fuzzing), else a plain choice of 2
        self._seed_text = seed_text
        self._replay = replay
        self.choices: list[int] = []
        self.streams: dict[str, Draws] = {}

    # -- making one -------------------------------------------------------------------------
    @classmethod
    def seeded(cls, text: str) -> Draws:
        """Draws from ``random.Random(text)``: generation, recorded as it goes."""
        rng = random.Random(text)
        return cls(rng.randrange, rng, text)

    @classmethod
    def replaying(
        cls, choices: Sequence[int], streams: dict[str, Sequence[int]] | None = None
    ) -> Draws:
        """Draws that answer ``choices`` in order (clamped into each draw's range, 0 once
        they run out); named sub-streams answer from ``streams``."""
        answers = iter(choices)

        def source(n: int) -> int:
            return min(max(next(answers, 0), 0), n - 1)

        return cls(source, replay=dict(streams or {}))

    # -- the draws --------------------------------------------------------------------------
    def _take(self, n: int) -> int:
        if len(self.choices) >= MAX_DRAWS:
            raise TooManyDraws(f"the generator drew more than {MAX_DRAWS:,} choices")
        value = self._source(n)
        self.choices.append(value)
        return value

    def integer(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``; simplest: ``low``."""
        if high < low:
            raise ValueError(f"integer({low}, {high}): an empty range")
        if self._rng is not None:
            value = self._rng.randint(low, high)
            self.choices.append(value - low)
            return value
        return low + self._take(high - low + 1)

    def below(self, n: int) -> int:
        """An integer in ``[0, n)`` (``Random.randrange(n)``); simplest: 0."""
        if n < 1:
            raise ValueError(f"below({n}): an empty range")
        return self._take(n)

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options``; simplest: the first."""
        if not options:
            raise ValueError("choice() of no options")
        return options[self._take(len(options))]

    def random(self) -> float:
        """A float in ``[0, 1)``; simplest: 0.0."""
        if self._rng is not None:
            value = self._rng.random()
            self.choices.append(int(value * FLOAT_STEPS))
            return value
        return self._take(FLOAT_STEPS) / FLOAT_STEPS

    def boolean(self, p: float = 0.5) -> bool:
        """True with probability ``p`` (``random() < p``); simplest: False."""
        if self._rng is not None:
            value = self._rng.random() < p
            self.choices.append(int(value))
            return value
        if self._biased is not None:
            value = self._biased(p)
            self.choices.append(int(value))
            return value
        return self._take(2) == 1

    def shuffle(self, items: MutableSequence[Any]) -> None:
        """Shuffle in place, as ``Random.shuffle``; simplest: the order as given (each swap's
        choice is how far back it reaches, 0 for none)."""
        for i in reversed(range(1, len(items))):
            if self._rng is not None:
                j = self._rng.randrange(i + 1)
                self.choices.append(i - j)
            else:
                j = i - self._take(i + 1)
            items[i], items[j] = items[j], items[i]

    def many(self, low: int, high: int, average: float) -> Iterator[int]:
        """Yields 0, 1, ... for a list of ``low`` to ``high`` elements, ``average`` of them
        on average: after ``low``, each further element is drawn as a "more?" boolean, so
        that deleting an element's choices deletes the element; simplest: ``low``."""
        extra = max(average - low, 0.0)
        more = extra / (extra + 1.0)
        for index in range(high):
            if index >= low and not self.boolean(more):
                return
            yield index

    def sub(self, name: str) -> Draws:
        """A named stream of its own (``Random(f"{seed}:{name}")`` when seeded), so that
        draws added to a generator later leave the main stream, and so the scenarios it made
        before, as they were. Replayed as recorded; shrinking reduces the main stream."""
        if name in self.streams:
            return self.streams[name]
        if self._rng is not None:
            stream = Draws.seeded(f"{self._seed_text}:{name}")
        elif self._replay is not None and name in self._replay:
            stream = Draws.replaying(self._replay[name])
        else:
            stream = Draws(self._source, biased=self._biased)
        self.streams[name] = stream
        return stream

    def recorded(self) -> tuple[tuple[int, ...], dict[str, tuple[int, ...]]]:
        """What was drawn: the main stream's choices and each sub-stream's."""
        return tuple(self.choices), {n: tuple(s.choices) for n, s in self.streams.items()}


def hypothesis_draws(draw: Callable[[Any], Any]) -> Draws:
    """Draws answered by Hypothesis (inside ``@st.composite``, ``draw`` is its draw), so a
    fuzz search, and Hypothesis's own shrinking, work on the generator's choices."""
    from hypothesis import strategies as st

    def source(n: int) -> int:
        value: int = draw(st.integers(0, n - 1))
        return value

    def biased(p: float) -> bool:
        # 0 (where Hypothesis shrinks to) is False; True for the top p of 1024 values
        threshold = round((1.0 - min(max(p, 0.0), 1.0)) * 1024)
        return bool(draw(st.integers(0, 1023)) >= threshold)

    return Draws(source, biased=biased)
