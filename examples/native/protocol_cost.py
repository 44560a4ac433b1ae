"""What the stdio protocol costs per plan: ``python examples/native/protocol_cost.py SPEC``.

SPEC is an ``--impl`` spec (``native=exec:examples/native/target/release/tracediff-native``).
Every scenario of the profile (``--profile``, default quick) is driven twice through the
same driver, engine, encoding and digest: once through the process, and once through an
in-process replay of the very replies it gave (its plan records and retirements, decoded
again from their bytes as the adapter does). The difference, less the implementation's own
``plan()`` time (``plan_ns``), is the protocol's cost: framing, both sides' msgpack, the
pipes and the wake-ups, the reset per scenario, and the implementation's handling of the
requests around ``plan()``. Wall time on a busy machine includes waiting for a core; the CPU
line (tracediff's process time plus the implementation's, from /proc) does not. Each figure
is the best of ``--rounds`` runs, the two drives interleaved.

``--first-pass`` measures a golden check's first pass instead, where the plan records keep
the bytes they came in (tracediff.model.Encoded) and are digested as they are: the process
hands them over (``keep_decision_bytes``), and the replay hands over the same records,
decoded before its clock starts (as an in-process implementation's records cost no
decoding), so that the protocol's cost includes the adapter's partial decode.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import msgpack

from tracediff.golden.check import profile_scenarios
from tracediff.model import Encoded
from tracediff.models.specdec.protocol import DRIVER_FIELDS
from tracediff.process import pipes
from tracediff.project.impls import parse_impl
from tracediff.running.record import Recording, drive, instance, keep_decision_bytes
from tracediff.trace import decode, encode


class _Recorder:
    """The implementation, its replies kept (and its own plan() time summed)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.plans: list[bytes] = []
        self.retired: list[list[int]] = []
        self.plan_ns = 0
        # the plan records as the adapter hands them over on a first pass, decoded once,
        # before any clock starts
        self.handed: list[Encoded] = []

    def arrive(self, spec: Any, now: int) -> None:
        self.inner.arrive(spec, now)

    def plan(self, now: int) -> dict[str, Any]:
        record: dict[str, Any] = self.inner.plan(now)
        self.plans.append(record.payload if type(record) is Encoded else encode(record))
        self.plan_ns += self.inner.last_plan_ns or 0
        return record

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        ids: list[int] = self.inner.complete(event, now)
        self.retired.append(list(ids))
        return ids


class _Replay:
    """The same replies, in process: what the harness costs without the protocol."""

    def __init__(self, recorder: _Recorder, first_pass: bool) -> None:
        self._plans = iter(recorder.plans)
        self._retired = iter(recorder.retired)
        self._first_pass = first_pass
        self._encoded = iter(recorder.handed)

    def arrive(self, spec: Any, now: int) -> None:
        pass

    def plan(self, now: int) -> dict[str, Any]:
        if self._first_pass:  # as protocol.parse_plan hands a record over: bytes kept
            return next(self._encoded)
        record: dict[str, Any] = decode(next(self._plans))
        return record

    def complete(self, event: dict[str, Any], now: int) -> list[int]:
        return next(self._retired)


def _driver_fields(record: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in record.items() if key in DRIVER_FIELDS}


def _children_cpu() -> float:
    total = 0.0
    for process in list(pipes._LIVE):
        fields = open(f"/proc/{process.popen.pid}/stat").read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec")
    parser.add_argument("--profile", default="quick")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--first-pass", action="store_true", help="a golden check's first pass (bytes kept)"
    )
    args = parser.parse_args()
    spec = parse_impl(args.spec)
    _, scenarios = profile_scenarios(args.profile)
    recorders = []
    for scenario in scenarios:
        recorder = _Recorder(instance(scenario, spec))
        for _ in Recording(drive(scenario, recorder, check=False)):
            pass
        recorder.handed = [Encoded(_driver_fields(msgpack.unpackb(p)), p) for p in recorder.plans]
        recorders.append(recorder)
    plans = sum(len(r.plans) for r in recorders)
    plan_s = sum(r.plan_ns for r in recorders) / 1e9

    def run(make: Any) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        for scenario, recorder in zip(scenarios, recorders, strict=True):
            for _ in Recording(drive(scenario, make(scenario, recorder), check=False)):
                pass
        return time.perf_counter() - wall, time.process_time() - cpu

    def through_process(scenario: Any, recorder: Any) -> Any:
        impl = instance(scenario, spec)
        if args.first_pass:
            keep_decision_bytes(impl)
        return impl

    best: dict[str, float] = {}
    for _ in range(args.rounds):
        replay_wall, replay_cpu = run(lambda scenario, recorder: _Replay(recorder, args.first_pass))
        before = _children_cpu()
        exec_wall, exec_cpu = run(through_process)
        child_cpu = _children_cpu() - before
        for key, value in (
            ("replay wall", replay_wall),
            ("replay cpu", replay_cpu),
            ("exec wall", exec_wall),
            ("exec cpu", exec_cpu),
            ("implementation cpu", child_cpu),
        ):
            best[key] = min(best.get(key, float("inf")), value)

    def per_plan(seconds: float) -> str:
        return f"{seconds / plans * 1e6:.1f} µs/plan"

    mode = " (a golden check's first pass: bytes kept)" if args.first_pass else ""
    print(
        f"{args.profile}{mode}: {plans} plans; the implementation's own plan(): {per_plan(plan_s)}"
    )
    for key, value in best.items():
        print(f"  {key}: {value:.3f} s ({per_plan(value)})")
    wall = best["exec wall"] - best["replay wall"] - plan_s
    cpu = best["exec cpu"] - best["replay cpu"] + best["implementation cpu"] - plan_s
    print(f"protocol cost, wall: {per_plan(wall)}")
    print(f"protocol cost, CPU of both processes: {per_plan(cpu)}")
    print(f"through the process: {plans / best['exec wall']:.0f} plans/s")
    print(f"load average: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
