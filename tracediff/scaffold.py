"""``tracediff new-model NAME``: the files of a new model that runs identical at once.

A new model is a distribution of its own: a module with the model (scenarios written by a
generator against draws, a driver, a reference and a second implementation), a
``pyproject.toml`` that registers it in the ``tracediff.models`` entry point group, tests
that run it through tracediff, and a README that says what to replace. The engine it
starts from is the smallest one worth comparing: items arrive, and whenever the engine is
free it picks the next item to serve (the spec: the smallest cost first, ties to the lower
id). Nothing here is written over: every file is new, or the command stops.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from tracediff.errors import UsageError

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")

MODEL = '''"""The {name} model: {title}.

Written by `tracediff new-model {name}`. Items arrive with a cost; whenever the server is
free and items wait, the implementation's `plan(now)` picks the next one. The rule, its
spec: the smallest cost first, ties to the lower id. Replace the engine with yours: the
scenario (what a run is given), `generate_from` (how a seed becomes one), `drive` (the
engine's loop, which calls the implementation), `Reference` (your spec) and `Fast` (the
implementation you want to prove equal to it).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.errors import ScenarioError, SchedulerFault
from tracediff.model import Clause, Draws, Record
from tracediff.models import BaseModel


@dataclass(frozen=True)
class Item:
    id: int
    arrival: int
    cost: int


@dataclass(frozen=True)
class Scenario:
    """The whole input of a run: a pure value, plain JSON in `to_dict`."""

    profile: str
    seed: int
    items: tuple[Item, ...] = ()

    def features(self) -> str:
        return f"{{len(self.items)}} items, costs {{sorted({{i.cost for i in self.items}})}}"

    def to_dict(self) -> dict[str, Any]:
        return {{"profile": self.profile, "seed": self.seed,
                "items": [[i.id, i.arrival, i.cost] for i in self.items]}}  # fmt: skip


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    seeds: tuple[int, ...]
    max_items: int


PROFILES = {{
    "quick": Profile("quick", "40 short queues", tuple(range(40)), 8),
    "default": Profile("default", "400 longer queues", tuple(range(400)), 24),
}}


class Reference:
    """The spec, as written: the smallest cost first, ties to the lower id."""

    def __init__(self, scenario: Scenario) -> None:
        self.waiting: dict[int, int] = {{}}  # id -> cost
        self.plans = 0

    def arrive(self, item: int, cost: int, now: int) -> None:
        self.waiting[item] = cost

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        pick = min(self.waiting, key=lambda i: (self.waiting[i], i))
        del self.waiting[pick]
        return {{"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}}  # fmt: skip

    def state(self) -> dict[str, Any]:
        return {{"waiting": sorted(self.waiting.items())}}


class Fast(Reference):
    """The same decisions from a heap: what `tracediff run` proves equal to the reference."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.heap: list[tuple[int, int]] = []

    def arrive(self, item: int, cost: int, now: int) -> None:
        super().arrive(item, cost, now)
        heapq.heappush(self.heap, (cost, item))

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        _cost, pick = heapq.heappop(self.heap)
        del self.waiting[pick]
        return {{"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}}  # fmt: skip


class {cls}(BaseModel):
    name = "{name}"
    title = "{title}"
    methods = ("arrive", "plan")  # the driver interface: what drive() calls
    decide = "plan"  # the method that returns a decision record
    builtin_impls: Mapping[str, str] = {{
        "reference": "{module}:Reference",
        "fast": "{module}:Fast",
    }}
    default_impls = ("reference", "fast")
    size_unit = "item"
    choice_fields: Mapping[str, frozenset[str]] = {{"plan": frozenset({{"pick"}})}}
    spec = "{module}.py's docstring"
    profiles: Mapping[str, Profile] = PROFILES  # BaseModel's load_profile and profile_names

    # -- scenarios
    def scenario_from_dict(self, data: Any) -> Scenario:
        try:
            items = tuple(Item(int(i), int(a), int(c)) for i, a, c in data["items"])
            return Scenario(str(data["profile"]), int(data["seed"]), items)
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"not a {name} scenario: {{type(exc).__name__}}: {{exc}}") from None

    def generate_from(self, profile: Profile, seed: int, draws: Draws) -> Scenario:
        """Every random choice through `draws`: tracediff seeds it per (profile, seed),
        shrinks a failing scenario by reducing its draws and fuzzes by letting Hypothesis
        answer them, so no shrink pass or fuzz strategy needs writing."""
        items: list[tuple[int, int]] = []
        ids: list[int] = []  # arrival indices in id order
        at = 0
        for k in draws.many(1, profile.max_items, profile.max_items - 2):
            at += draws.choice((0, 0, 1, 3))
            items.append((at, draws.choice((1, 2, 2, 4))))
            ids.insert(k - draws.below(k + 1), k)  # ids in any order of arrival
        rank = {{k: i for i, k in enumerate(ids)}}
        return Scenario(profile.name, seed,
                        tuple(Item(rank[k], a, c) for k, (a, c) in enumerate(items)))  # fmt: skip

    def size(self, scenario: Scenario) -> int:
        return len(scenario.items)

    def validate(self, scenario: Scenario) -> None:
        ids = [i.id for i in scenario.items]
        if len(set(ids)) != len(ids) or any(i.cost < 1 or i.arrival < 0 for i in scenario.items):
            raise ScenarioError("items need distinct ids, costs >= 1 and arrivals >= 0")

    # -- running: the engine's loop
    def drive(self, scenario: Scenario, impl: Any, *, check: bool = True) -> Iterator[Record]:
        yield {{"format": "{name}-trace", "scenario": scenario.to_dict()}}
        pending = sorted(scenario.items, key=lambda i: (i.arrival, i.id))
        costs = {{i.id: i.cost for i in scenario.items}}
        waiting: set[int] = set()
        now = index = plans = 0
        free_at = 0
        while index < len(pending) or waiting:
            while index < len(pending) and pending[index].arrival <= now:
                item = pending[index]
                index += 1
                impl.arrive(item.id, item.cost, now)
                waiting.add(item.id)
                yield {{"t": "arrival", "now": now, "item": item.id}}
            if waiting and free_at <= now:
                plans += 1
                record = impl.plan(now)
                if check:
                    self.check_record(record, plans)
                if record["pick"] not in waiting:
                    picked = record["pick"]
                    raise SchedulerFault(f"plan {{plans}}: picked {{picked!r}}, not waiting")
                waiting.discard(record["pick"])
                free_at = now + costs[record["pick"]]
                yield record
            times = [t for t in (free_at if waiting else None,
                                 pending[index].arrival if index < len(pending) else None)
                     if t is not None and t > now]  # fmt: skip
            if not times:
                if waiting:
                    continue
                return
            now = min(times)

    def check_record(self, record: Record, number: int) -> None:
        if not isinstance(record, dict) or list(record) != ["t", "plan", "now", "pick", "left"]:
            raise SchedulerFault(f"plan {{number}}: malformed plan record: {{record!r:.80}}")
        if record["plan"] != number:
            raise SchedulerFault(f"plan {{number}}: numbered {{record['plan']!r}}")

    def replay_input(self, impl: Any, record: Record, scenario: Scenario) -> list[Record] | None:
        if record["t"] != "arrival":
            return None
        item = next(i for i in scenario.items if i.id == record["item"])
        impl.arrive(item.id, item.cost, record["now"])
        return []

    # -- coverage: which rule clause decided each plan
    features = ("queue", "tie")
    clauses: Sequence[Clause] = (
        Clause("smallest", "pick", "a unique smallest cost decided the pick"),
        Clause("lowest-id", "pick", "equal costs tied; the lower id decided"),
    )

    def trace_coverage(self, records: Any) -> tuple[int, tuple[int, ...]]:
        plans, features, _clauses = _coverage(records)
        return plans, features

    def observed_coverage(self, scenario: Scenario, impl: str) -> Any:
        if impl != "reference":
            return None
        return _coverage(self.drive(scenario, Reference(scenario)))


def _coverage(records: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    iterator = iter(records)
    header = next(iterator)
    costs = {{i[0]: i[2] for i in header["scenario"]["items"]}}
    waiting: set[int] = set()
    plans = queue = tie = 0
    for record in iterator:
        if record["t"] == "arrival":
            waiting.add(record["item"])
        elif record["t"] == "plan":
            plans += 1
            smallest = min(costs[i] for i in waiting)
            queue += len(waiting) > 1
            tie += sum(costs[i] == smallest for i in waiting) > 1
            waiting.discard(record["pick"])
    return plans, (queue, tie), (plans - tie, tie)


MODEL = {cls}()
'''

PYPROJECT = """[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{title}: a tracediff model"
requires-python = ">=3.11"
dependencies = ["tracediff-harness"]

[project.entry-points."tracediff.models"]
{name} = "{module}:MODEL"

[tool.setuptools]
py-modules = ["{module}"]

[tool.tracediff]
model = "{name}"
impls = ["reference", "fast"]
"""

TESTS = '''"""The {name} model under tracediff: written by `tracediff new-model {name}`."""

from __future__ import annotations

import tracediff


def test_fast_decides_as_the_reference() -> None:
    result = tracediff.compare_implementations("quick", ["reference", "fast"])
    assert result.ok, result.explain()


def test_a_planted_bug_is_found_and_explained() -> None:
    result = tracediff.compare_implementations("quick", ["reference", "{module}_bugs:ByArrival"])
    assert not result.ok and "pick" in result.explain()
'''

BUGS = '''"""A planted bug, to see tracediff catch one: ties go to the earlier arrival, not the
lower id (right whenever ids follow arrival order)."""

from __future__ import annotations

from typing import Any

from {module} import Reference


class ByArrival(Reference):
    def __init__(self, scenario: Any) -> None:
        super().__init__(scenario)
        self.order: dict[int, int] = {{}}

    def arrive(self, item: int, cost: int, now: int) -> None:
        super().arrive(item, cost, now)
        self.order[item] = len(self.order)

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        pick = min(self.waiting, key=lambda i: (self.waiting[i], self.order[i]))
        del self.waiting[pick]
        return {{"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}}  # fmt: skip
'''

README = """# {dist}

A tracediff model (written by `tracediff new-model {name}`): {title}.

```sh
pip install -e .                     # registers the model (entry point tracediff.models)
tracediff run                        # reference vs fast over the quick profile: identical
tracediff run --impl reference --impl {module}_bugs:ByArrival   # a planted bug, explained
tracediff shrink --seed SEED --impl reference --impl {module}_bugs:ByArrival  # a seed it names
tracediff fuzz --impl reference --impl {module}_bugs:ByArrival
python -m pytest tests
```

Replace the engine in `{module}.py` with yours, top to bottom: the scenario, the generator
(`generate_from`: every random choice through `draws`, so shrinking and fuzzing need no
code of yours), the driver (`drive`), the reference (your spec) and `Fast` (the
implementation to prove equal to it). `tracediff --help` and the tracediff documentation
(docs/models.md) say what each member does.
"""


def new_model(name: str, directory: Path) -> list[Path]:
    """Write the skeleton of model ``name`` into ``directory`` (a new or empty directory);
    returns the files written. UsageError for a name that is no Python identifier of lower
    case letters, or a directory that is not empty."""
    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise UsageError(
            f"model name {name!r}: use lower-case letters, digits and '_', starting with a "
            "letter (it names the model, its module and its entry point)"
        )
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageError(f"{directory} exists and is not an empty directory; name a new one")
    module = f"{name}_model"
    values = {
        "name": name,
        "module": module,
        "cls": "".join(part.capitalize() for part in name.split("_")) + "Model",
        "dist": f"tracediff-{name.replace('_', '-')}",
        "title": f"the {name} engine's next pick",
    }
    files = {
        f"{module}.py": MODEL,
        f"{module}_bugs.py": BUGS,
        "pyproject.toml": PYPROJECT,
        "README.md": README,
        f"tests/test_{name}.py": TESTS,
    }
    from tracediff.atomic import write_text_atomic

    written = []
    for relative, template in files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(str(path), template.format(**values))
        written.append(path)
    return written
