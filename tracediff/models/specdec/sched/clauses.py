"""Every clause of the [fixed] rules, in one place beside the spec (docs/scheduler.md).

A green run proves only as much as the scenarios made each rule *decide*: a tie-break that
never breaks a tie, or an inequality never met with equality, can be wrong in any
implementation and every trace still agrees. Each :class:`Clause` below names one condition
of one rule; :mod:`tracediff.models.specdec.sched.decided` reports, per plan, the clauses that
decided
something in it, and ``tracediff coverage`` adds them up and fails when a required clause
never decided.

A clause *decides* when changing or dropping it could change a recorded value: a winner-key
component decides when the winner and another live candidate are equal on every earlier
component and differ on it; a cap term decides when it is strictly below every other term;
a boundary clause is an inequality met with equality (the place where ``<`` and ``<=``
differ). A clause that no reachable state can make decide is listed with ``proof``: the
section of docs/scheduler.md that proves it, and is not required.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracediff import model


@dataclass(frozen=True)
class Clause(model.Clause):
    """A clause of docs/scheduler.md: ``name`` is "rule.condition", ``rule`` the section of
    the spec, ``meaning`` what deciding means in one line, and a non-empty ``proof`` the
    section that proves it never decides."""

    @property
    def required(self) -> bool:
        return not self.proof


def _c(name: str, rule: str, meaning: str, proof: str = "") -> Clause:
    return Clause(name, rule, meaning, proof)


CLAUSES: tuple[Clause, ...] = (
    # -- eligibility, priority and allocation modes ------------------------------------------
    _c("eligible.draining", "eligibility", "a request that stopped early, tokens left, is no lane"),
    _c(
        "eligible.host_stop",
        "eligibility",
        "a host-stop request with a round in flight and tokens left is held back",
    ),
    _c("eligible.remaining", "eligibility", "pending advance leaves no token: not a lane"),
    _c("boundary.remaining_zero", "eligibility", "remaining is exactly 0: not a lane"),
    _c("boundary.remaining_one", "eligibility", "remaining is exactly 1: a lane with cap 0"),
    _c("priority.last_served", "eligibility", "priority order differs from slot order"),
    _c("priority.slot", "eligibility", "two lanes served at the same plan, ordered by slot"),
    _c("alloc.grammar_host", "eligibility", "a grammar lane is host-allocated under device mode"),
    _c("alloc.mixed_host", "eligibility", "mixed mode: a host-stop lane is host-allocated"),
    _c("alloc.mixed_device", "eligibility", "mixed mode: a plain lane is device-allocated"),
    # -- the survival curve: s_k = est if est < s_(k-1) else s_(k-1) --------------------------
    _c("survival.clamp", "formulas", "an estimate above the previous depth's: the curve is flat"),
    _c("boundary.survival_clamp", "formulas", "an estimate exactly the previous depth's"),
    # -- a lane's cap: min(7, remaining - 1, offer, grammar cap) -----------------------------
    _c("cap.max_draft", "caps", "7 is below every other term"),
    _c("cap.remaining", "caps", "remaining - 1 is below every other term"),
    _c("cap.offer", "caps", "the proposer's offer is below every other term"),
    _c("cap.offer_device", "caps", "the offer is the cap of a device-allocated lane"),
    _c("cap.grammar", "caps", "the grammar cap is below every other term"),
    # -- candidates --------------------------------------------------------------------------
    _c(
        "cohort.budget",
        "candidates",
        "the verification budget limits the cohort sizes (fewer tokens than lanes)",
    ),
    _c("boundary.cohort_bucket", "candidates", "the cohort limit is exactly a batch bucket"),
    _c("ragged.bucket_below_cohort", "candidates", "a token bucket below the cohort is skipped"),
    _c("boundary.ragged_bucket_cohort", "candidates", "a token bucket exactly the cohort size"),
    _c("ragged.budget_bucket", "candidates", "a ragged budget is its token bucket"),
    _c("ragged.budget_verify", "candidates", "a ragged budget is the verification budget"),
    _c("prefill.only", "candidates", "no lane is eligible: the prefill-only candidate"),
    # -- prefix allocation -------------------------------------------------------------------
    _c("fixed.width", "allocation", "a fixed lane takes its fixed width (below cap, W, budget)"),
    _c("fixed.cap", "allocation", "a fixed lane is held to its cap"),
    _c("fixed.bound", "allocation", "a fixed lane is held to the width bound"),
    _c("fixed.budget", "allocation", "a fixed lane is held to what is left of the budget"),
    _c("slots.bound", "allocation", "a ranked lane stops at the width bound (below its cap)"),
    _c("slots.cap", "allocation", "a ranked lane stops at its cap (below the width bound)"),
    _c("budget.binds", "allocation", "more free slots than budget: the ranking's cut decides"),
    _c("boundary.budget_exact", "allocation", "free slots exactly fill the budget"),
    _c("rank.survival", "allocation", "at the cut, higher survival is taken"),
    _c("rank.depth", "allocation", "at the cut, equal survival: the shallower slot is taken"),
    _c("rank.slot", "allocation", "at the cut, equal survival and depth: the lower slot is taken"),
    # -- durations and value -----------------------------------------------------------------
    _c("duration.width_used", "durations", "a rect shape is read at the widest prefix, not W"),
    _c("duration.q_pad", "durations", "a ragged shape pads its tokens up to a token bucket"),
    _c("duration.eager", "durations", "an unobserved eager shape's prior carries the penalty"),
    _c("duration.observed", "durations", "a duration read from an observed table entry"),
    _c("duration.quantum", "durations", "the prior is rounded up to the duration quantum"),
    _c("prefill.bonus_cap", "durations", "a waiting prefill row's bonus is capped"),
    _c("prefill.chunk_tail", "durations", "the last prefill chunk is shorter than a chunk"),
    _c("prefill.oldest", "candidates", "several requests could prefill: the oldest gets the row"),
    _c("prefill.id", "candidates", "equal arrival times: the lower id gets the prefill row"),
    _c("prefill.no_slot", "candidates", "a waiting request without a free slot cannot prefill"),
    # -- padding pruning ---------------------------------------------------------------------
    _c("prune.expected", "pruning", "pruned by a higher E at the same duration"),
    _c("prune.duration", "pruning", "pruned by a shorter duration at the same E"),
    _c("prune.both", "pruning", "pruned by higher E and shorter duration"),
    _c(
        "prune.tie_b_pad",
        "pruning",
        "equal E and duration: smaller B_pad",
        proof="pruning-b-pad",
    ),
    _c("prune.tie_width", "pruning", "equal E and duration: smaller width used"),
    _c("prune.tie_bound", "pruning", "equal E, duration and width: smaller width bound"),
    _c("prune.first", "pruning", "several candidates dominate: the first is recorded"),
    _c(
        "boundary.prune_equal",
        "pruning",
        "two candidates equal in E, duration and shape triple: neither dominates",
    ),
    # -- the winner --------------------------------------------------------------------------
    _c("winner.value", "winner", "the higher value wins"),
    _c("winner.duration", "winner", "equal values: the shorter duration wins"),
    _c("winner.cohort", "winner", "equal value and duration: the larger cohort wins"),
    _c("winner.b_pad", "winner", "then the smaller B_pad", proof="winner-b-pad"),
    _c("winner.width", "winner", "then the smaller W or Q_pad"),
    _c("winner.kind", "winner", "then rect before ragged", proof="winner-kind"),
    _c("winner.prefill", "winner", "then no prefill row first", proof="winner-prefill"),
    _c("winner.order", "winner", "all equal: the first candidate in candidate order"),
    # -- acceptance probe and credit ---------------------------------------------------------
    _c("credit.cap", "probe", "accrued credit is capped"),
    _c("boundary.credit_cap", "probe", "credit is exactly at its cap before accrual"),
    _c("boundary.credit_accrued", "probe", "the accrued credit is exactly the cap"),
    _c("probe.skip_fixed", "probe", "a fixed-width lane is never probed"),
    _c("probe.skip_cap", "probe", "a lane at its cap is not probed"),
    _c("probe.skip_trials", "probe", "enough trials at the next depth: not probed"),
    _c("boundary.probe_trials", "probe", "trials exactly probe_min_trials: not probed"),
    _c("boundary.probe_trials_below", "probe", "trials exactly probe_min_trials - 1: probed"),
    _c("probe.skip_fit", "probe", "the forced drafts do not fit the budget: no probe"),
    _c("probe.past_bound", "probe", "the forced depth is past the winner's width bound"),
    _c("probe.removes", "probe", "the budget binds: the last-ranked slot of another lane goes"),
    _c("probe.keeps", "probe", "the budget does not bind: nothing is removed"),
    _c("boundary.probe_cap", "probe", "a probe at exactly its lane's cap depth (D = cap)"),
    _c("probe.unfunded", "probe", "a probe costs more than the credit"),
    _c("boundary.probe_funded", "probe", "a probe costs exactly the credit: funded"),
    _c("probe.choice_trials", "probe", "among funded probes, fewest trials wins"),
    _c("probe.choice_cost", "probe", "equal trials: the lowest cost wins"),
    _c("probe.choice_position", "probe", "equal trials and cost: cohort position decides"),
    _c("probe.free", "probe", "a chosen probe with cost <= 0 leaves the credit unchanged"),
    # -- timing probe (refresh) --------------------------------------------------------------
    _c("refresh.after_probe", "refresh", "an acceptance probe was chosen: no refresh"),
    _c("refresh.winner_stale", "refresh", "the winner's shape is stale: it refreshes itself"),
    _c("refresh.never", "refresh", "a candidate whose shape was never observed is stale"),
    _c("refresh.age", "refresh", "a candidate observed refresh_period or longer ago is stale"),
    _c("boundary.refresh_period", "refresh", "a shape observed exactly refresh_period ago"),
    _c("refresh.other_group", "refresh", "a stale candidate outside the winner's group is ignored"),
    _c("refresh.accept", "refresh", "the best stale candidate is within tolerance: it runs"),
    _c("refresh.reject", "refresh", "the best stale candidate is below tolerance"),
    _c(
        "boundary.refresh_tolerance",
        "refresh",
        "the best stale value is exactly winner_value * (1 - tolerance): it runs",
    ),
    _c("refresh.tie", "refresh", "stale candidates tied at the best value: the winner rule"),
    # -- lane values ------------------------------------------------------------------------
    _c("progress.running", "lane values", "next-progress counts the rounds in flight"),
    # -- commit, completion, queue and table -------------------------------------------------
    _c("queue.full", "completion", "a round completes while the queue was full"),
    _c("table.first", "completion", "a shape's first observation replaces its prior"),
    _c("table.up", "completion", "the estimate rises by a quarter of the difference"),
    _c("table.down_floor", "completion", "it falls, the quarter rounded toward minus infinity"),
    _c("table.stuck", "completion", "a rise under 4 µs leaves the estimate unchanged"),
    _c("table.prefill", "completion", "the prefill row's cost is taken off the observation"),
    _c("drain.stop", "completion", "a stop ends a request before max_new"),
    _c("boundary.max_new", "completion", "a request reaches exactly max_new"),
    _c("drain.waits", "completion", "a finished request waits for its rounds in flight"),
    _c("retire.slot", "completion", "a freed slot is reused, the lowest free slot first"),
)

BY_NAME: dict[str, Clause] = {clause.name: clause for clause in CLAUSES}
NAMES: tuple[str, ...] = tuple(clause.name for clause in CLAUSES)
