"""A toy decision model: which waiting job a single server runs next.

Small on purpose: it is what docs/models.md walks through, and it keeps tracediff's own
tests of the core independent of the speculative-decoding scheduler. Jobs arrive with a
size; whenever the server is idle and jobs wait, the implementation's ``plan(now)`` picks
one. The rule (the spec): the shortest job first, ties broken by the lower job id.

Implementations: ``reference`` (recomputes the minimum every time, the readable spec),
``fast`` (a heap; decides exactly as the reference) and ``optimized`` (a heap keyed by
arrival order instead of the id: deliberately different on ties, for the tests).
"""

from __future__ import annotations

import dataclasses
import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.errors import ProfileError, ScenarioError, SchedulerFault, UsageError
from tracediff.model import Clause, Draws, Record, Shrinking
from tracediff.models import BaseModel


@dataclass(frozen=True)
class Job:
    id: int
    arrival: int
    size: int


@dataclass(frozen=True)
class ToyScenario:
    profile: str
    seed: int
    jobs: tuple[Job, ...] = ()

    def features(self) -> str:
        sizes = sorted({job.size for job in self.jobs})
        return f"{len(self.jobs)} jobs, sizes {sizes}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "seed": self.seed,
            "jobs": [[job.id, job.arrival, job.size] for job in self.jobs],
        }


@dataclass(frozen=True)
class ToyProfile:
    name: str
    description: str
    seeds: tuple[int, ...]
    max_jobs: int


PROFILES = {
    "quick": ToyProfile("quick", "20 small queues", tuple(range(20)), 8),
    "default": ToyProfile("default", "100 queues", tuple(range(100)), 16),
}


class Reference:
    """The spec, as written: the shortest waiting job, ties to the lower id."""

    def __init__(self, scenario: ToyScenario) -> None:
        self.waiting: dict[int, int] = {}
        self.plans = 0

    def arrive(self, job: int, size: int, now: int) -> None:
        self.waiting[job] = size

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        pick = min(self.waiting, key=lambda j: (self.waiting[j], j))
        del self.waiting[pick]
        return {"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}  # fmt: skip

    def complete(self, job: int, now: int) -> None:
        return None

    def state(self) -> dict[str, Any]:
        return {"waiting": sorted(self.waiting.items())}


class Fast(Reference):
    """A heap of (size, id): the same decisions without a scan."""

    def __init__(self, scenario: ToyScenario) -> None:
        super().__init__(scenario)
        self.heap: list[tuple[int, int]] = []

    def arrive(self, job: int, size: int, now: int) -> None:
        super().arrive(job, size, now)
        heapq.heappush(self.heap, (size, job))

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        _size, pick = heapq.heappop(self.heap)
        del self.waiting[pick]
        return {"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}  # fmt: skip


class Optimized(Fast):
    """Ties go to the job that arrived first, not the lower id: differs from the spec when
    equal sizes tie (a classic heap tie-break slip)."""

    def __init__(self, scenario: ToyScenario) -> None:
        super().__init__(scenario)
        self.arrived = 0
        self.heap3: list[tuple[int, int, int]] = []

    def arrive(self, job: int, size: int, now: int) -> None:
        Reference.arrive(self, job, size, now)
        self.arrived += 1
        heapq.heappush(self.heap3, (size, self.arrived, job))

    def plan(self, now: int) -> dict[str, Any]:
        self.plans += 1
        _size, _order, pick = heapq.heappop(self.heap3)
        del self.waiting[pick]
        return {"t": "plan", "plan": self.plans, "now": now, "pick": pick,
                "left": len(self.waiting)}  # fmt: skip


class ToyModel(BaseModel):
    name = "toy"
    title = "a single server's next job (tests and docs/models.md)"
    methods = ("arrive", "plan", "complete")
    decide = "plan"
    builtin_impls: Mapping[str, str] = {
        "reference": "toy_model:Reference",
        "fast": "toy_model:Fast",
        "optimized": "toy_model:Optimized",
    }
    default_impls = ("reference", "fast")
    size_unit = "job"
    choice_fields: Mapping[str, frozenset[str]] = {"plan": frozenset({"pick"})}

    # -- scenarios
    def scenario_from_dict(self, data: Any) -> ToyScenario:
        try:
            jobs = tuple(Job(int(i), int(a), int(s)) for i, a, s in data["jobs"])
            return ToyScenario(str(data["profile"]), int(data["seed"]), jobs)
        except (KeyError, TypeError, ValueError) as exc:
            raise ScenarioError(f"not a toy scenario: {type(exc).__name__}: {exc}") from None

    def load_profile(self, name: str) -> ToyProfile:
        if name not in PROFILES:
            raise UsageError(f"unknown profile {name!r}; choose one of: {', '.join(PROFILES)}")
        return PROFILES[name]

    def profile_names(self) -> list[str]:
        return sorted(PROFILES)

    def profile_from_toml(self, data: dict[str, Any], path: str) -> ToyProfile:
        """A project's profile file: ``seeds = N`` (0..N-1) and ``max_jobs``."""
        seeds, max_jobs = data.get("seeds", 20), data.get("max_jobs", 8)
        if type(seeds) is not int or type(max_jobs) is not int or not 1 <= max_jobs <= 64:
            raise ProfileError(f"{path}: seeds and max_jobs (1..64) must be integers")
        name = path.rsplit("/", 1)[-1].removesuffix(".toml")
        return ToyProfile(name, data.get("description", ""), tuple(range(seeds)), max_jobs)

    def generate_from(self, profile: ToyProfile, seed: int, draws: Draws) -> ToyScenario:
        """Written once against draws: tracediff seeds it (``generate``), shrinks its draws
        and fuzzes through it (BaseModel)."""
        drawn: list[tuple[int, int]] = []
        ranks: list[int] = []  # arrival indices in id order
        at = 0
        # one job's draws together (more?, gap, size, place): deleting them deletes the job
        for k in draws.many(1, profile.max_jobs, profile.max_jobs - 2):
            at += draws.choice((0, 0, 1, 3))
            drawn.append((at, draws.choice((1, 2, 2, 4))))
            # ids do not follow arrival order, so that ties are told apart: the k-th arrival
            # takes a place among the ids (simplest: the last, ids in arrival order)
            ranks.insert(k - draws.below(k + 1), k)
        ids = {k: i for i, k in enumerate(ranks)}
        jobs = tuple(Job(ids[k], at, size) for k, (at, size) in enumerate(drawn))
        return ToyScenario(profile.name, seed, jobs)

    def size(self, scenario: ToyScenario) -> int:
        return len(scenario.jobs)

    # -- running
    def drive(self, scenario: ToyScenario, impl: Any, *, check: bool = True) -> Iterator[Record]:
        yield {"format": "toy-trace", "scenario": scenario.to_dict()}
        pending = sorted(scenario.jobs, key=lambda j: (j.arrival, j.id))
        sizes = {job.id: job.size for job in scenario.jobs}
        waiting: set[int] = set()
        now, index, plans = 0, 0, 0
        running: int | None = None
        busy_until = 0
        while True:
            if running is not None and busy_until <= now:
                impl.complete(running, now)
                yield {"t": "done", "now": now, "job": running}
                running = None
            elif index < len(pending) and pending[index].arrival <= now:
                job = pending[index]
                index += 1
                impl.arrive(job.id, job.size, now)
                waiting.add(job.id)
                yield {"t": "arrival", "now": now, "job": job.id}
            elif running is None and waiting:
                plans += 1
                record = impl.plan(now)
                if check:
                    self.check_record(record, plans)
                pick = record.get("pick") if isinstance(record, dict) else None
                if pick not in waiting:
                    raise SchedulerFault(f"plan {plans}: picked {pick!r}, which is not waiting")
                yield record
                waiting.discard(pick)
                running, busy_until = pick, now + sizes[pick]
            else:
                times = [t for t in (busy_until if running is not None else None,
                                     pending[index].arrival if index < len(pending) else None)
                         if t is not None]  # fmt: skip
                if not times:
                    return
                now = min(times)

    def check_record(self, record: Record, number: int) -> None:
        if not isinstance(record, dict) or list(record) != ["t", "plan", "now", "pick", "left"]:
            raise SchedulerFault(f"plan {number}: malformed plan record: {record!r:.80}")

    def replay_input(self, impl: Any, record: Record, scenario: ToyScenario) -> list[Record] | None:
        if record["t"] == "arrival":
            job = next(j for j in scenario.jobs if j.id == record["job"])
            impl.arrive(job.id, job.size, record["now"])
            return []
        if record["t"] == "done":
            impl.complete(record["job"], record["now"])
            return []
        return None

    # -- search: smaller scenarios, drawn scenarios
    def shrink_passes(self) -> Sequence[tuple[str, Any]]:
        # hand-written refinements first, then the reduction of the generator's draws
        return (("delete jobs", _delete_jobs), ("smaller sizes", _smaller_sizes),
                ("earlier arrivals", _earlier_arrivals), *super().shrink_passes())  # fmt: skip

    def size_key(self, scenario: ToyScenario, plans: int) -> tuple[int, ...]:
        jobs = scenario.jobs
        return (len(jobs), plans, sum(j.size for j in jobs), sum(j.arrival for j in jobs))

    def validate(self, scenario: ToyScenario) -> None:
        ids = [job.id for job in scenario.jobs]
        if len(set(ids)) != len(ids) or any(j.size < 1 or j.arrival < 0 for j in scenario.jobs):
            raise ScenarioError("toy jobs need distinct ids, sizes >= 1, arrivals >= 0")

    # -- coverage: what each decision exercised, which rule clause decided it
    features = ("queue", "tie")
    spec = "the toy model's docstring"

    @property
    def clauses(self) -> Sequence[Clause]:
        return (Clause("shortest", "pick", "a unique shortest job decided the pick"),
                Clause("lowest-id", "pick", "equal sizes tied; the lower id decided"))  # fmt: skip

    def trace_coverage(self, records: Any) -> tuple[int, tuple[int, ...]]:
        plans, features, _clauses = _coverage(self, records)
        return plans, features

    def observed_coverage(self, scenario: ToyScenario, impl: str) -> Any:
        if impl != "reference":
            return None
        return _coverage(self, self.drive(scenario, Reference(scenario)))


def _coverage(model: ToyModel, records: Any) -> tuple[int, tuple[int, ...], tuple[int, ...]]:
    """Decisions, per feature (queue: more than one job waited; tie: the shortest tied) and
    per clause (shortest, lowest-id) the decisions that exercised it."""
    iterator = iter(records)
    header = next(iterator, None)
    if not isinstance(header, dict) or "scenario" not in header:
        raise ValueError("the records do not start with a header")
    sizes = {job[0]: job[2] for job in header["scenario"]["jobs"]}
    waiting: set[int] = set()
    plans = queue = tie = 0
    for record in iterator:
        if record["t"] == "arrival":
            waiting.add(record["job"])
        elif record["t"] == "plan":
            plans += 1
            shortest = min(sizes[j] for j in waiting)
            queue += len(waiting) > 1
            tie += sum(sizes[j] == shortest for j in waiting) > 1
            waiting.discard(record["pick"])
    unique = plans - tie
    return plans, (queue, tie), (unique, tie)


def _delete_jobs(shrink: Shrinking) -> None:
    shrink.delete_runs(lambda s: s.jobs, lambda jobs: dataclasses.replace(shrink.best, jobs=jobs))


def _with_job(scenario: ToyScenario, index: int, **changes: int) -> ToyScenario:
    jobs = list(scenario.jobs)
    jobs[index] = dataclasses.replace(jobs[index], **changes)
    return dataclasses.replace(scenario, jobs=tuple(jobs))


def _smaller_sizes(shrink: Shrinking) -> None:
    for index in range(len(shrink.best.jobs)):
        if index < len(shrink.best.jobs):
            value = shrink.best.jobs[index].size
            shrink.minimize(
                value, 1, lambda v, i=index: shrink.holds(_with_job(shrink.best, i, size=v))
            )


def _earlier_arrivals(shrink: Shrinking) -> None:
    for index in range(len(shrink.best.jobs)):
        if index < len(shrink.best.jobs):
            value = shrink.best.jobs[index].arrival
            shrink.minimize(
                value, 0, lambda v, i=index: shrink.holds(_with_job(shrink.best, i, arrival=v))
            )


MODEL = ToyModel()
