"""What the harness costs per plan: ``tracediff bench --harness``.

Over a whole profile, every implementation is driven in lockstep as ``tracediff run``
drives it, and each piece of the work the harness adds around ``plan()`` is timed on its
own, per record, in the same process:

* **check**: the trace-schema check of a plan record (``engine/driver.check_plan``). The
  runner checks the first implementation's records and any record whose bytes differ from
  it, so an implementation that agrees pays none; ``golden check`` (one implementation)
  pays it on every plan. Both are shown.
* **encode**: canonical msgpack of every record (plans and the events around them);
* **digest**: feeding the compared-body sha256 (``trace.LockstepDigests``, as the runner
  does: each record index is digested as one step, and while the implementations' bodies
  agree they share one digest, so a record equal to the first implementation's is hashed
  once; that hash is counted to the first implementation, the others pay none);
* **compare**: the byte comparison with the other implementation's record.

The figures are totals divided by the number of plan() calls, so a plan's share of the
event records is included. The overhead share is (encode + digest + compare) / plan() of
the same implementation, measured in the same run: a ratio, comparable across machines.
Bytes per plan are the compared body (what is hashed) and the stored file (the deflate
stream ``TraceWriter`` writes).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracediff.executor.call import Guarded, construct
from tracediff.models.specdec.engine.driver import check_plan, drive
from tracediff.models.specdec.model import MODEL
from tracediff.models.specdec.scenario.model import Scenario, private_copy
from tracediff.running.record import TimedScheduler
from tracediff.trace import LockstepDigests, encode
from tracediff.trace.writer import FrameDeflater

Factory = Callable[[Scenario], Any]


@dataclass
class HarnessCost:
    """One implementation's totals over the scenarios (nanoseconds and bytes)."""

    impl: str
    scenarios: int = 0
    plans: int = 0
    records: int = 0
    plan_ns: int = 0
    check_ns: int = 0
    encode_ns: int = 0
    digest_ns: int = 0
    compare_ns: int = 0
    body_bytes: int = 0
    stored_bytes: int = 0

    def per_plan_us(self, ns: int) -> float:
        return ns / self.plans / 1000 if self.plans else 0.0

    @property
    def harness_ns(self) -> int:
        """Encode + digest + compare: what every compared record costs."""
        return self.encode_ns + self.digest_ns + self.compare_ns

    @property
    def share(self) -> float:
        """The harness's cost as a share of this implementation's plan() time."""
        return self.harness_ns / self.plan_ns if self.plan_ns else 0.0

    @property
    def share_with_check(self) -> float:
        """The same with the schema check of every plan (what ``golden check`` pays)."""
        return (self.harness_ns + self.check_ns) / self.plan_ns if self.plan_ns else 0.0

    def to_dict(self) -> dict[str, Any]:
        per_plan = {
            name: round(self.per_plan_us(getattr(self, f"{name}_ns")), 3)
            for name in ("plan", "check", "encode", "digest", "compare")
        }
        return {
            "impl": self.impl,
            "scenarios": self.scenarios,
            "plans": self.plans,
            "records": self.records,
            "us_per_plan": {**per_plan, "harness": round(self.per_plan_us(self.harness_ns), 3)},
            "share": round(self.share, 5),
            "share_with_check": round(self.share_with_check, 5),
            "body_bytes_per_plan": round(self.body_bytes / self.plans, 1) if self.plans else 0,
            "stored_bytes_per_plan": round(self.stored_bytes / self.plans, 1) if self.plans else 0,
        }


@dataclass
class HarnessResult:
    """Every implementation's :class:`HarnessCost`, in the order given."""

    costs: list[HarnessCost] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "costs": [c.to_dict() for c in self.costs]}


def measure_harness(
    scenarios: Sequence[Scenario],
    factories: dict[str, Factory],
    progress: Callable[[int], None] | None = None,
) -> HarnessResult:
    """Drive every scenario through every implementation in lockstep and time the
    harness's work per record (module docstring). An implementation failing raises."""
    names = list(factories)
    costs = [HarnessCost(name) for name in names]
    perf = time.perf_counter_ns
    for done, scenario in enumerate(scenarios, 1):
        drivers: list[Iterator[dict[str, Any]]] = []
        timed: list[TimedScheduler] = []
        for name, cost in zip(names, costs, strict=True):
            inner = construct(name, factories[name], private_copy(scenario))
            timed.append(TimedScheduler(Guarded(inner, name), MODEL))
            drivers.append(drive(private_copy(scenario), timed[-1], check=False))
            cost.scenarios += 1
        digests = LockstepDigests(len(names))  # as the runner: hashed once while equal
        bodies: list[list[bytes]] = [[] for _ in names]
        first = True
        while True:
            payloads: list[bytes | None] = []
            for position, (cost, driver, body) in enumerate(
                zip(costs, drivers, bodies, strict=True)
            ):
                record = next(driver, None)
                if record is None:
                    payloads.append(None)
                    continue
                if not first and record["t"] == "plan":
                    start = perf()
                    check_plan(record, timed[position].plans)
                    cost.check_ns += perf() - start
                start = perf()
                payload = encode(record)
                cost.encode_ns += perf() - start
                cost.records += 1
                cost.body_bytes += len(payload)
                body.append(payload)
                payloads.append(payload)
            # the index's records digested together, as the runner does: one hash while the
            # bodies agree, counted to the first implementation (the others' share is nil)
            start = perf()
            digests.feed(payloads, header=first)
            owner = next((i for i, p in enumerate(payloads) if p is not None), 0)
            costs[owner].digest_ns += perf() - start
            if all(p is None for p in payloads):
                break
            for position, cost in enumerate(costs):
                mine = payloads[position]
                # compared with the next implementation's record (a copy of its own when
                # it runs alone: comparing an object with itself costs nothing)
                other = payloads[(position + 1) % len(payloads)] if len(names) > 1 else None
                if mine is None:
                    continue
                other = bytes(bytearray(mine)) if other is None else other
                start = perf()
                _same = mine == other
                cost.compare_ns += perf() - start
            first = False
        # the stored size afterwards: compressing between the timed steps would evict
        # what they keep in the CPU caches and inflate their times
        for cost, scheduler, body in zip(costs, timed, bodies, strict=True):
            cost.plans += scheduler.plans
            cost.plan_ns += scheduler.plan_ns
            store = FrameDeflater()
            cost.stored_bytes += sum(len(store(payload)) for payload in body)
        if progress is not None:
            progress(done)
    return HarnessResult(costs)
