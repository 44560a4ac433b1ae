"""Running a campaign: see :mod:`tracediff.campaign`."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tracediff.campaign.store import CampaignStore, Row, Totals
from tracediff.compare.model import DEFAULT_CONTEXT, Divergence
from tracediff.executor import DONE, Executor, Limits, Outcome
from tracediff.model import Profile, generate
from tracediff.project.impls import ImplSpec
from tracediff.running.runner import (
    IDENTICAL,
    TIMEOUT,
    WORKER_DIED,
    RunOptions,
    ScenarioResult,
    ScenarioWork,
    StopSignals,
    outcome_result,
    run_task,
)

SUITE = "campaign"


@dataclass(frozen=True)
class CampaignOptions:
    profile: Profile
    seeds: Sequence[int]
    impls: tuple[ImplSpec, ...]
    out: str
    timeout_s: float | None = None
    memory_limit_mb: int | None = None
    max_failures: int | None = None  # stop once the store holds this many findings
    context: int = DEFAULT_CONTEXT

    @property
    def limits(self) -> Limits:
        return Limits(self.timeout_s, self.memory_limit_mb)

    @property
    def run_options(self) -> RunOptions:
        return RunOptions(impls=self.impls, limits=self.limits)

    def identity(self) -> dict[str, Any]:
        """What a campaign directory belongs to: resuming with other values is refused."""
        from tracediff.running.fingerprint import fingerprint
        from tracediff.workload import WorkloadSet

        options = {**self.run_options.outcome_options(), "profile": repr(self.profile)}
        parts = fingerprint(self.impls, options)
        workloads = getattr(self.profile, "workload", None)
        name = self.profile.name
        if isinstance(workloads, WorkloadSet):  # named, so that a refusal names the file
            parts.update({f"workload {w.path}": w.sha256 for w in workloads.workloads})
            # a --workload profile's name ends in its content's tag: without it, a file
            # rewritten since is refused by the fingerprint, naming the file, rather than as
            # "another campaign"
            name = name.removesuffix(f"-{workloads.tag}")
        return {
            "impls": [[spec.name, spec.target] for spec in self.impls],
            "profile": name,
            "fingerprint": parts,
        }


@dataclass(frozen=True)
class CampaignResult:
    out: str
    impls: tuple[str, ...]
    totals: Totals
    wall_seconds: float
    ran: int  # scenarios finished by this invocation
    resumed: int  # scenarios already in the store when it started
    remaining: int  # seeds of the range not in the store when it ended
    stopped: str | None = None  # why it ended early: "--max-failures N", "SIGINT", ...

    @property
    def ok(self) -> bool:
        return self.stopped is None and self.remaining == 0 and self.totals.findings == 0


class _Enough(Exception):
    """--max-failures reached."""


def run_campaign(
    options: CampaignOptions,
    executor: Executor,
    on_row: Callable[[Totals, Row], None] | None = None,
) -> CampaignResult:
    """Run every seed of ``options`` not yet in its store; ``on_row`` sees each new row with
    the running totals (for a live display)."""
    started = time.perf_counter()
    run_options = options.run_options
    kill_after = run_options.kill_after_s
    stopped: str | None = None
    ran = 0
    with CampaignStore.open(options.out, options.identity()) as store:
        done = store.done()
        totals = store.totals()
        resumed = totals.scenarios
        todo = (seed for seed in options.seeds if seed not in done)
        items = (
            (
                seed,
                CampaignWork(options.profile, seed, options.impls, options.limits, options.context),
            )
            for seed in todo
        )

        def record(outcome: Outcome) -> None:
            nonlocal ran
            row = _row(outcome, options, run_options, totals)
            if store.add(row):
                totals.add(row)
                ran += 1
                if on_row is not None:
                    on_row(totals, row)
            if options.max_failures is not None and totals.findings >= options.max_failures:
                raise _Enough()

        stop = StopSignals()
        try:
            with stop:
                executor.stream(
                    _campaign_task, items, record, deadline_s=kill_after, guard=stop.deferred
                )
        except _Enough:
            stopped = f"--max-failures {options.max_failures}"
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", signal.SIGINT)
            stopped = signal.Signals(signum).name
        store.commit()
        remaining = sum(1 for _ in _missing(store, options.seeds))
    return CampaignResult(
        out=options.out,
        impls=tuple(spec.name for spec in options.impls),
        totals=totals,
        wall_seconds=time.perf_counter() - started,
        ran=ran,
        resumed=resumed,
        remaining=remaining,
        stopped=stopped,
    )


def _missing(store: CampaignStore, seeds: Sequence[int]) -> Iterator[int]:
    done = store.done()
    return (seed for seed in seeds if seed not in done)


@dataclass(frozen=True)
class CampaignWork:
    """One seed of a campaign for :func:`_campaign_task`: the profile that generates its
    scenario, the implementations, the limits of the run (and of the explanation's re-run)
    and the explanation's context."""

    profile: Profile
    seed: int
    specs: tuple[ImplSpec, ...]
    limits: Limits = Limits()
    context: int = DEFAULT_CONTEXT


def _campaign_task(
    work: CampaignWork, progress: Any, notify: Callable[[float], None]
) -> tuple[ScenarioResult, Divergence | None]:
    """One seed in a worker: generate, run in lockstep, explain a finding right here (under
    the same isolation and limits), so that its signature is known as it arrives."""
    from tracediff.running.explain import ExplainWork, explain_task

    profile, specs, limits = work.profile, work.specs, work.limits
    scenario = generate(profile, work.seed)
    result: ScenarioResult = run_task(ScenarioWork(scenario, specs, limits), progress, notify)
    if result.status == IDENTICAL:
        return result, None
    kill_after = limits.kill_after_s
    if kill_after is not None:
        notify(kill_after)  # the explanation re-runs the scenario: a fresh deadline
    explained = ExplainWork(scenario, specs, result, work.context, limits.timeout_s)
    return result, explain_task(explained, progress, notify)


def _row(
    outcome: Outcome, options: CampaignOptions, run_options: RunOptions, totals: Totals
) -> Row:
    from tracediff.compare.json_report import outcome_to_dict
    from tracediff.compare.signature import slim
    from tracediff.running.explain import explain, unexplained
    from tracediff.running.explain import outcome as as_outcome

    divergence: Divergence | None = None
    if outcome.kind == DONE:
        result, divergence = outcome.value
        if outcome.leftovers:  # the runner's rule for leaked processes, on the pair's result
            result = outcome_result(
                Outcome(outcome.index, DONE, value=result, leftovers=outcome.leftovers),
                _scenario(options, outcome.index),
                run_options,
            )
    else:
        scenario = _scenario(options, outcome.index)
        result = outcome_result(outcome, scenario, run_options)
        if result.status == TIMEOUT or WORKER_DIED in result.message:
            divergence = explain(scenario, options.impls, result, options.context)  # no re-run
        else:
            divergence = unexplained(scenario, result, options.impls, outcome.failure())
    signature = None
    stored = None
    if result.status != IDENTICAL:
        if divergence is None:
            scenario = _scenario(options, outcome.index)
            divergence = unexplained(scenario, result, options.impls, "not explained")
        signature = str(divergence.signature)
        if signature in totals.signatures:  # only each signature's first keeps its context
            divergence = slim(divergence)
        stored = outcome_to_dict(as_outcome(result, divergence, SUITE))
        stored["message"] = result.message
    impls = tuple(
        (s.name, s.plans, s.records, s.digest, round(s.seconds, 6), round(s.plan_seconds, 6))
        for s in result.impls
    )
    return Row(
        seed=result.seed,
        status=result.status,
        worker=outcome.worker or "?",
        seconds=round(outcome.seconds, 6),
        plans=result.impls[0].plans if result.impls else 0,
        impls=impls,
        signature=signature,
        outcome=stored,
    )


def _scenario(options: CampaignOptions, seed: int) -> Any:
    return generate(options.profile, seed)
