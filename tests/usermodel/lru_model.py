"""A user's model written with the generator-only API: an LRU cache's eviction decisions.

Keys are accessed one at a time; on each access the implementation decides whether it is a
hit and, on a miss with the cache full, which key it evicts. The rule, its spec: evict the
least recently *used* key (an access, hit or miss, makes a key the most recent).

Only a generator is written (``generate_from``, against draws): no shrink passes and no fuzz
strategy. tracediff shrinks by reducing the generator's draws and fuzzes by letting
Hypothesis answer them (tracediff.draws). ``Fifo`` forgets to refresh a key on a hit, the
classic LRU bug: it evicts the least recently *inserted* key.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.errors import ScenarioError, SchedulerFault, UsageError
from tracediff.model import Clause, Draws, Record
from tracediff.models import BaseModel


@dataclass(frozen=True)
class LruScenario:
    profile: str
    seed: int
    capacity: int = 1
    accesses: tuple[tuple[int, int], ...] = ()  # (time, key)

    def features(self) -> str:
        keys = len({key for _t, key in self.accesses})
        return f"{len(self.accesses)} accesses of {keys} keys, capacity {self.capacity}"

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "seed": self.seed, "capacity": self.capacity,
                "accesses": [list(a) for a in self.accesses]}  # fmt: skip


@dataclass(frozen=True)
class LruProfile:
    name: str
    description: str
    seeds: tuple[int, ...]
    max_accesses: int


PROFILES = {
    "quick": LruProfile("quick", "40 short access sequences", tuple(range(40)), 16),
    "default": LruProfile("default", "200 longer ones", tuple(range(200)), 40),
}


class Lru:
    """The spec: an ordered map, the front the least recently used."""

    def __init__(self, scenario: LruScenario) -> None:
        self.capacity = scenario.capacity
        self.cache: OrderedDict[int, None] = OrderedDict()
        self.plans = 0

    def access(self, key: int, now: int) -> dict[str, Any]:
        self.plans += 1
        hit = key in self.cache
        evict = -1
        if hit:
            self.cache.move_to_end(key)
        else:
            if len(self.cache) >= self.capacity:
                evict = next(iter(self.cache))
                del self.cache[evict]
            self.cache[key] = None
        return {"t": "plan", "plan": self.plans, "now": now, "key": key, "hit": hit,
                "evict": evict}  # fmt: skip

    def state(self) -> dict[str, Any]:
        return {"order": list(self.cache)}


class Fifo(Lru):
    """Forgets to refresh a key on a hit: evicts the least recently inserted key."""

    def access(self, key: int, now: int) -> dict[str, Any]:
        if key in self.cache:
            self.plans += 1
            return {"t": "plan", "plan": self.plans, "now": now, "key": key, "hit": True,
                    "evict": -1}  # fmt: skip
        return super().access(key, now)


class LruModel(BaseModel):
    name = "lru"
    title = "an LRU cache's evictions (a generator-only user model, tests)"
    methods = ("access",)
    decide = "access"
    builtin_impls: Mapping[str, str] = {"reference": "lru_model:Lru", "fifo": "lru_model:Fifo"}
    default_impls = ("reference", "reference")
    size_unit = "access"
    choice_fields: Mapping[str, frozenset[str]] = {"plan": frozenset({"hit", "evict"})}

    def scenario_from_dict(self, data: Any) -> LruScenario:
        try:
            accesses = tuple((int(t), int(k)) for t, k in data["accesses"])
            return LruScenario(str(data["profile"]), int(data["seed"]), int(data["capacity"]),
                               accesses)  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"not an lru scenario: {type(exc).__name__}: {exc}") from None

    def load_profile(self, name: str) -> LruProfile:
        if name not in PROFILES:
            raise UsageError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}")
        return PROFILES[name]

    def profile_names(self) -> list[str]:
        return sorted(PROFILES)

    def generate_from(self, profile: LruProfile, seed: int, draws: Draws) -> LruScenario:
        capacity = draws.integer(1, 3)
        universe = capacity + draws.integer(1, 3)  # a little more than fits: evictions
        accesses, now = [], 0
        for _ in draws.many(1, profile.max_accesses, profile.max_accesses / 2):
            now += draws.choice((0, 1, 1, 5))
            accesses.append((now, draws.below(universe)))
        return LruScenario(profile.name, seed, capacity, tuple(accesses))

    def size(self, scenario: LruScenario) -> int:
        return len(scenario.accesses)

    def validate(self, scenario: LruScenario) -> None:
        times = [t for t, _k in scenario.accesses]
        if scenario.capacity < 1 or times != sorted(times) or any(t < 0 for t in times):
            raise ScenarioError("an lru scenario needs capacity >= 1 and ordered times >= 0")

    def drive(self, scenario: LruScenario, impl: Any, *, check: bool = True) -> Iterator[Record]:
        yield {"format": "lru-trace", "scenario": scenario.to_dict()}
        for plans, (now, key) in enumerate(scenario.accesses, start=1):
            record = impl.access(key, now)
            if check:
                self.check_record(record, plans)
            yield record

    def check_record(self, record: Record, number: int) -> None:
        if not isinstance(record, dict) or list(record) != ["t", "plan", "now", "key", "hit",
                                                            "evict"]:  # fmt: skip
            raise SchedulerFault(f"plan {number}: malformed plan record: {record!r:.80}")
        if record["plan"] != number:
            raise SchedulerFault(f"plan {number}: numbered {record['plan']!r}")

    # -- coverage
    features = ("hit", "evict")
    spec = "the lru model's docstring"

    clauses: Sequence[Clause] = (
        Clause("least-recent", "evict", "a full cache evicted its least recent key"),
    )

    def trace_coverage(self, records: Any) -> tuple[int, tuple[int, ...]]:
        plans = hits = evictions = 0
        for record in records:
            if isinstance(record, dict) and record.get("t") == "plan":
                plans += 1
                hits += bool(record["hit"])
                evictions += record["evict"] != -1
        return plans, (hits, evictions)

    def observed_coverage(self, scenario: LruScenario, impl: str) -> Any:
        if impl != "reference":
            return None
        plans, (hits, evictions) = self.trace_coverage(self.drive(scenario, Lru(scenario)))
        return plans, (hits, evictions), (evictions,)


MODEL = LruModel()
