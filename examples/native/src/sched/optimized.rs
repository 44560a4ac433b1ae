//! The optimized scheduler (docs/optimized.md, tracediff/models/specdec/sched/optimized.py):
//! the reference's decisions and float operations, computed fewer times. Selected with
//! `tracediff-native --optimized`; its records must be byte-identical to the reference's.
//!
//! What it does beyond the reference port (which already evaluates curves once per plan,
//! ranks the free slots once and prunes within groups):
//!
//! - the ranking of free slots is sorted lazily, the first time an allocation needs it;
//! - when a cohort's total want fits the budget, every lane gets `min(W, cap)` (its want)
//!   with no ranking consulted;
//! - allocations are keyed by (cohort, bound, budget) and computed once: the rect W = 7
//!   and the ragged bucket that reaches the budget share one, the prefill-row half shares
//!   all of them, and a rect allocation whose widest prefix fits W - 1 is reused for it;
//! - table estimates are read once per shape per plan;
//! - the prefill half's pruning is the first half's, shifted (its durations differ by a
//!   constant, which changes no dominance);
//! - only candidates tied at the highest value are compared by the full winner key;
//! - probes are derived from the winner's allocation: forcing lane i to p_i + 1 is valid
//!   exactly when p_i + 1 <= the free budget left after the fixed lanes; the probe then
//!   gains slot (i, p_i + 1) and, when the budget binds, loses the last-ranked slot of
//!   another lane that the winner took (proof in the Python module's docstring).
//!
//! Every float is produced by the same operation on the same operands in the same order
//! as in the reference: E is still summed over the cohort's lane values in priority order.

use super::*;
use crate::columns::{self, Builder};

/// One allocation: prefixes, E, widest prefix, verified tokens (cohort + sum of prefixes).
struct Allocation {
    prefixes: Vec<i64>,
    expected: f64,
    widest: i64,
    tokens: i64,
}

/// What one optimized plan() computes once and shares across candidates and probes.
struct Fast<'a> {
    lanes: &'a [Lane],
    curves: &'a [[f64; MAX_DRAFT]],
    sums: &'a [[f64; MAX_DRAFT + 1]],
    limits: Vec<i64>, // a lane's want before the width bound: cap, or min(fixed, cap)
    fixed_positions: Vec<usize>,
    ranking: Option<Vec<(usize, i64)>>, // (position, depth), best first
    allocations: Vec<Allocation>,
    keys: Vec<(usize, i64, i64)>, // (cohort, bound, budget) of each allocation: a few dozen
}

impl<'a> Fast<'a> {
    fn new(lanes: &'a [Lane], curves: &'a [[f64; MAX_DRAFT]], sums: &'a [[f64; MAX_DRAFT + 1]]) -> Fast<'a> {
        let limits = lanes.iter().map(|l| if l.fixed_width < 0 { l.cap } else { l.fixed_width.min(l.cap) }).collect();
        let fixed_positions = (0..lanes.len()).filter(|&p| lanes[p].fixed_width >= 0).collect();
        Fast { lanes, curves, sums, limits, fixed_positions, ranking: None, allocations: Vec::new(), keys: Vec::new() }
    }

    fn want(&self, position: usize, bound: i64) -> i64 {
        self.limits[position].min(bound)
    }

    /// Free slots of every non-fixed lane in slot_rank order (sorted on first use).
    fn ranked(&mut self) -> &[(usize, i64)] {
        if self.ranking.is_none() {
            let mut slots = Vec::new();
            for (position, lane) in self.lanes.iter().enumerate() {
                if lane.fixed_width < 0 {
                    for depth in 1..=(MAX_DRAFT as i64).min(lane.cap) {
                        let survival = self.curves[position][(depth - 1) as usize];
                        slots.push(Slot { survival, depth, slot: lane.slot, position });
                    }
                }
            }
            slots.sort_by(slot_cmp);
            self.ranking = Some(slots.iter().map(|s| (s.position, s.depth)).collect());
        }
        self.ranking.as_deref().unwrap()
    }

    /// Prefixes after the fixed lanes took theirs, and the free budget left.
    fn forced(&self, cohort: usize, bound: i64, budget: i64) -> (Vec<i64>, i64) {
        let mut prefixes = vec![0i64; cohort];
        let mut left = budget - cohort as i64;
        for &position in &self.fixed_positions {
            if position >= cohort {
                break;
            }
            let take = self.want(position, bound).min(left);
            prefixes[position] = take;
            left -= take;
        }
        (prefixes, left)
    }

    /// The index of the allocation of (cohort, bound, budget), computed on first need.
    fn allocate(&mut self, cohort: usize, bound: i64, budget: i64) -> usize {
        if let Some(found) = self.keys.iter().position(|&k| k == (cohort, bound, budget)) {
            return found;
        }
        let mut prefixes: Vec<i64> = (0..cohort).map(|p| self.want(p, bound)).collect();
        let wanted: i64 = prefixes.iter().sum();
        if wanted > budget - cohort as i64 {
            let (forced, left) = self.forced(cohort, bound, budget);
            prefixes = forced;
            if left > 0 {
                let mut taken = 0;
                for &(position, depth) in self.ranked() {
                    if position < cohort && depth <= bound {
                        prefixes[position] = depth;
                        taken += 1;
                        if taken == left {
                            break;
                        }
                    }
                }
            }
        }
        let mut expected = 0.0f64;
        for (position, &p) in prefixes.iter().enumerate() {
            expected = expected + self.sums[position][p as usize];
        }
        let widest = prefixes.iter().copied().max().unwrap_or(0);
        let tokens = cohort as i64 + prefixes.iter().sum::<i64>();
        self.allocations.push(Allocation { prefixes, expected, widest, tokens });
        self.keys.push((cohort, bound, budget));
        self.allocations.len() - 1
    }
}

/// A candidate row: its allocation by index, not a copy of its prefixes.
#[derive(Clone, Copy)]
struct Row {
    id: i64,
    kind: i64,
    cohort: usize,
    prefill: bool,
    bound: i64,
    budget: i64,
    b_pad: i64,
    width: i64,
    allocation: usize,
    expected: f64,
    duration: i64,
    value: f64,
}

impl Row {
    /// formulas.winner_key: (-value, duration, -cohort, b_pad, width, kind, prefill, id).
    fn key_cmp(&self, other: &Row) -> Ordering {
        (-self.value)
            .partial_cmp(&(-other.value))
            .unwrap_or(Ordering::Equal)
            .then(self.duration.cmp(&other.duration))
            .then((other.cohort).cmp(&self.cohort))
            .then(self.b_pad.cmp(&other.b_pad))
            .then(self.width.cmp(&other.width))
            .then(self.kind.cmp(&other.kind))
            .then(self.prefill.cmp(&other.prefill))
            .then(self.id.cmp(&other.id))
    }
    fn group(&self) -> (i64, usize, bool) {
        (self.kind, self.cohort, self.prefill)
    }
    fn shape(&self) -> (i64, i64, i64) {
        (self.b_pad, self.width, self.bound)
    }
}

/// A probe: its record row and how to apply it (position that lost a slot or -1, width).
struct Probe {
    position: usize,
    depth: i64,
    trials: i64,
    gain: f64,
    expected: f64,
    duration: i64,
    cost: f64,
    removed: i64,
    width: i64,
}

/// Table estimates read once per (kind, b_pad, width) per plan.
struct Durations(Vec<((i64, i64, i64), i64)>);

impl Durations {
    fn get(&mut self, scheduler: &Scheduler, key: (i64, i64, i64)) -> i64 {
        if let Some(&(_, d)) = self.0.iter().find(|(k, _)| *k == key) {
            return d;
        }
        let d = scheduler.table_estimate(key);
        self.0.push((key, d));
        d
    }
}

impl Scheduler {
    pub(super) fn plan_optimized(&mut self, now: i64) -> Result<Value, Fault> {
        self.plan_number += 1;
        let number = self.plan_number;
        let lanes = self.eligible_lanes();
        let prefill = self.prefill_candidate();
        let (alpha, weight) = (self.params.alpha, self.params.prior_weight);
        let curves: Vec<[f64; MAX_DRAFT]> = lanes
            .iter()
            .map(|l| survival_curve(&self.requests[l.index].trials, &self.requests[l.index].accepts, alpha, weight))
            .collect();
        let eligible = self.eligible_table(&lanes, &curves)?;
        let credit_before = self.credit;
        if lanes.is_empty() && prefill.is_none() {
            return Ok(empty_record(number, now, eligible, self.credit));
        }
        let sums: Vec<[f64; MAX_DRAFT + 1]> = curves.iter().map(prefix_sums).collect();
        let mut fast = Fast::new(&lanes, &curves, &sums);
        let mut durations = Durations(Vec::new());
        let prefill_tokens = self.prefill_tokens(prefill);
        let (extra, bonus) = match prefill {
            Some(i) => (prefill_cost(&self.params, prefill_tokens), prefill_bonus(&self.params, now - self.requests[i].spec.arrival_us)),
            None => (0, 0.0),
        };
        let rows = self.fast_candidates(&mut fast, &mut durations, prefill.is_some(), extra, bonus);
        let shared = if prefill.is_some() && !lanes.is_empty() { rows.len() / 2 } else { rows.len() };
        let pruned = fast_prune(&rows, shared);
        // winner_key starts with -value: only the candidates at the highest value compete
        let alive = || rows.iter().filter(|r| pruned[r.id as usize].is_none());
        let best_value = alive().map(|r| r.value).fold(f64::NEG_INFINITY, |a, b| if b > a { b } else { a });
        let winner = *alive().filter(|r| r.value == best_value).min_by(|a, b| a.key_cmp(b)).unwrap();
        let mut chosen = winner;
        let mut source = "winner";
        let round_prefill_tokens = if winner.prefill { prefill_tokens } else { 0 };

        let accrued = self.credit + self.params.probe_rate * winner.expected;
        self.credit = if accrued < self.params.credit_cap { accrued } else { self.params.credit_cap };
        let mut probes: Vec<Probe> = Vec::new();
        let mut probe_index: i64 = -1;
        let mut chosen_prefixes = fast.allocations[winner.allocation].prefixes.clone();
        let (mut chosen_expected, mut chosen_duration) = (winner.expected, winner.duration);
        let (mut chosen_b_pad, mut chosen_width) = (winner.b_pad, winner.width);
        if winner.cohort > 0 {
            probes = self.fast_probes(&mut fast, &mut durations, &winner, round_prefill_tokens);
            let mut best: Option<usize> = None;
            for (i, p) in probes.iter().enumerate() {
                if !(p.cost <= self.credit) {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some(b) => {
                        let q = &probes[b];
                        p.trials.cmp(&q.trials)
                            .then(p.cost.partial_cmp(&q.cost).unwrap_or(Ordering::Equal))
                            .then(p.position.cmp(&q.position))
                            == Ordering::Less
                    }
                };
                if better {
                    best = Some(i);
                }
            }
            if let Some(i) = best {
                let p = &probes[i];
                probe_index = i as i64;
                self.credit -= py_max_zero(p.cost);
                source = "probe";
                chosen_prefixes[p.position] += 1;
                if p.removed >= 0 {
                    chosen_prefixes[p.removed as usize] -= 1;
                }
                chosen_expected = p.expected;
                chosen_duration = p.duration;
                chosen_width = p.width;
            }
        }

        let mut refresh: i64 = -1;
        let fresh = |s: &Scheduler, r: &Row| {
            let observed = s.table_observed((r.kind, r.b_pad, r.width));
            observed >= 0 && now - observed < s.params.refresh_period_us
        };
        if probe_index < 0 && winner.cohort > 0 && fresh(self, &winner) {
            let stale = alive()
                .filter(|r| r.id != winner.id && r.group() == winner.group() && !fresh(self, r))
                .min_by(|a, b| a.key_cmp(b));
            if let Some(best) = stale {
                if best.value >= winner.value * (1.0 - self.params.refresh_tolerance) {
                    chosen = *best;
                    source = "refresh";
                    refresh = best.id;
                    chosen_prefixes = fast.allocations[best.allocation].prefixes.clone();
                    chosen_expected = best.expected;
                    chosen_duration = best.duration;
                    chosen_b_pad = best.b_pad;
                    chosen_width = best.width;
                }
            }
        }
        let tables = Tables {
            eligible,
            candidates: candidate_columns(&rows, &fast.allocations)?,
            pruned: {
                let mut table = Builder::new(columns::PRUNED, rows.len());
                for (i, by) in pruned.iter().enumerate() {
                    if let Some(by) = by {
                        table.int(0, i as i64);
                        table.int(1, *by);
                    }
                }
                table.finish("pruned")?
            },
            probes: {
                let mut table = Builder::new(columns::PROBES, probes.len());
                for p in &probes {
                    table.int(0, p.position as i64);
                    table.int(1, lanes[p.position].request);
                    table.int(2, p.depth);
                    table.int(3, p.trials);
                    table.float(4, p.gain);
                    table.float(5, p.expected);
                    table.int(6, p.duration);
                    table.float(7, p.cost);
                }
                table.finish("probes")?
            },
        };
        let chosen = Chosen {
            kind: chosen.kind,
            cohort: chosen.cohort,
            prefill: chosen.prefill,
            prefixes: chosen_prefixes,
            expected: chosen_expected,
            duration: chosen_duration,
            b_pad: chosen_b_pad,
            width: chosen_width,
        };
        self.finish_plan(
            number, now, &lanes, &sums, prefill, credit_before, tables, winner.id, chosen, source, probe_index,
            refresh, round_prefill_tokens,
        )
    }

    /// The candidate rows in the reference's order: shapes first (allocations shared), then
    /// one row per shape and prefill half.
    fn fast_candidates(&self, fast: &mut Fast, durations: &mut Durations, prefill_row: bool, extra: i64, bonus: f64) -> Vec<Row> {
        let params = &self.params;
        if fast.lanes.is_empty() {
            // the prefill-only round: E of no lanes, the prefill cost alone
            let allocation = fast.allocate(0, 0, 0);
            let expected = fast.allocations[allocation].expected;
            return vec![Row {
                id: 0, kind: RECT, cohort: 0, prefill: true, bound: 0, budget: 0, b_pad: 0, width: 0,
                allocation, expected, duration: extra, value: (expected + bonus) / extra as f64,
            }];
        }
        let mut shapes: Vec<Row> = Vec::new(); // one per shape, prefill half not yet applied
        let verify_budget = params.verify_budget;
        for size in cohort_sizes(params, fast.lanes.len() as i64) {
            let cohort = size as usize;
            let b_pad = bucket(&params.batch_buckets, size);
            // bounds from 7 down: an allocation whose widest prefix fits a lower bound is
            // also the allocation under it
            let mut by_bound = [0usize; MAX_DRAFT + 1];
            let mut above: Option<usize> = None;
            for bound in (0..=MAX_DRAFT as i64).rev() {
                let index = match above {
                    Some(a) if fast.allocations[a].widest <= bound => a,
                    _ => fast.allocate(cohort, bound, verify_budget),
                };
                above = Some(index);
                by_bound[bound as usize] = index;
            }
            for bound in 0..=MAX_DRAFT as i64 {
                let allocation = by_bound[bound as usize];
                let width = fast.allocations[allocation].widest;
                let duration = durations.get(self, (RECT, b_pad, width));
                shapes.push(self.shape_row(fast, RECT, cohort, bound, verify_budget, b_pad, width, allocation, duration));
            }
            if params.ragged {
                for &tokens in &params.token_buckets {
                    if tokens >= size {
                        let budget = verify_budget.min(tokens);
                        let allocation = fast.allocate(cohort, MAX_DRAFT as i64, budget);
                        let width = bucket(&params.token_buckets, fast.allocations[allocation].tokens);
                        let duration = durations.get(self, (RAGGED, b_pad, width));
                        shapes.push(self.shape_row(fast, RAGGED, cohort, MAX_DRAFT as i64, budget, b_pad, width, allocation, duration));
                    }
                }
            }
        }
        let mut rows = Vec::with_capacity(shapes.len() * 2);
        for shape in &shapes {
            rows.push(Row { id: rows.len() as i64, value: (shape.expected + 0.0) / shape.duration as f64, ..*shape });
        }
        if prefill_row {
            for shape in &shapes {
                let duration = shape.duration + extra;
                let value = (shape.expected + bonus) / duration as f64;
                rows.push(Row { id: rows.len() as i64, prefill: true, duration, value, ..*shape });
            }
        }
        rows
    }

    #[allow(clippy::too_many_arguments)]
    fn shape_row(&self, fast: &Fast, kind: i64, cohort: usize, bound: i64, budget: i64, b_pad: i64, width: i64, allocation: usize, duration: i64) -> Row {
        let expected = fast.allocations[allocation].expected;
        Row { id: 0, kind, cohort, prefill: false, bound, budget, b_pad, width, allocation, expected, duration, value: 0.0 }
    }

    fn fast_probes(&self, fast: &mut Fast, durations: &mut Durations, winner: &Row, prefill_tokens: i64) -> Vec<Probe> {
        let mut out = Vec::new();
        let (cohort, bound, kind) = (winner.cohort, winner.bound, winner.kind);
        let prefixes = fast.allocations[winner.allocation].prefixes.clone();
        let (_, left) = fast.forced(cohort, bound, winner.budget);
        if left <= 0 {
            return out; // no forced draft fits
        }
        let mut taken: i64 = prefixes.iter().sum();
        for &position in &fast.fixed_positions {
            if position >= cohort {
                break;
            }
            taken -= prefixes[position];
        }
        let binds = taken == left;
        // the last-ranked slot the winner took, and the last-ranked one of another lane
        let mut last: (i64, i64) = (-1, 0);
        let mut other: (i64, i64) = (-1, 0);
        if binds {
            let mut count = 0;
            for &(position, depth) in fast.ranked() {
                if position < cohort && depth <= bound {
                    if position as i64 != last.0 {
                        other = last;
                    }
                    last = (position as i64, depth);
                    count += 1;
                    if count == taken {
                        break;
                    }
                }
            }
        }
        let widest = prefixes.iter().copied().max().unwrap_or(0);
        let at_widest = prefixes.iter().filter(|&&p| p == widest).count() as i64;
        let tokens = cohort as i64 + prefixes.iter().sum::<i64>() + if binds { 0 } else { 1 };
        let extra = if prefill_tokens != 0 { prefill_cost(&self.params, prefill_tokens) } else { 0 };
        for position in 0..cohort {
            let lane = &fast.lanes[position];
            if lane.fixed_width >= 0 {
                continue;
            }
            let depth = prefixes[position] + 1;
            if depth > lane.cap {
                continue;
            }
            let trials = self.requests[lane.index].trials[(depth - 1) as usize];
            if trials >= self.params.probe_min_trials || depth > left {
                continue; // depth > left: the forced drafts do not fit in the budget
            }
            let (mut removed, mut removed_depth) = (-1i64, 0i64);
            let mut lost = 0.0f64;
            if binds {
                let pick = if last.0 != position as i64 { last } else { other };
                removed = pick.0;
                removed_depth = pick.1;
                lost = lost + fast.curves[removed as usize][(removed_depth - 1) as usize];
            }
            let gained = 0.0f64 + fast.curves[position][(depth - 1) as usize];
            let gain = gained - lost;
            let expected = winner.expected + gain;
            let width = if kind == RECT {
                if depth > widest {
                    depth
                } else {
                    let still = at_widest + (depth == widest) as i64 - (removed_depth == widest) as i64;
                    if still > 0 { widest } else { widest - 1 }
                }
            } else {
                bucket(&self.params.token_buckets, tokens)
            };
            let duration = durations.get(self, (kind, winner.b_pad, width)) + extra;
            let cost = (winner.expected * duration as f64) / winner.duration as f64 - expected;
            out.push(Probe { position, depth, trials, gain, expected, duration, cost, removed, width });
        }
        out
    }
}

fn candidate_columns(rows: &[Row], allocations: &[Allocation]) -> Result<Value, Fault> {
    let mut table = Builder::new(columns::CANDIDATES, rows.len());
    for r in rows {
        table.int(0, r.id);
        table.int(1, r.kind);
        table.int(2, r.cohort as i64);
        table.int(3, r.prefill as i64);
        table.int(4, r.bound);
        table.int(5, r.b_pad);
        table.int(6, r.width);
        table.ragged(7, &allocations[r.allocation].prefixes);
        table.float(8, r.expected);
        table.int(9, r.duration);
        table.float(10, r.value);
        table.int(11, r.budget);
    }
    table.finish("candidates")
}

/// Candidate id -> the first candidate of its group (kind, cohort, prefill row) that
/// dominates it; rows from `shared` on repeat the first half, durations raised by one
/// constant, so their entries are the first half's shifted.
fn fast_prune(rows: &[Row], shared: usize) -> Vec<Option<i64>> {
    let mut pruned = vec![None; rows.len()];
    // rows of one group are contiguous in candidate order: (cohort, kind) runs
    let mut start = 0;
    while start < shared {
        let mut end = start + 1;
        while end < shared && rows[end].group() == rows[start].group() {
            end += 1;
        }
        let group = &rows[start..end];
        for (x, cx) in group.iter().enumerate() {
            for (y, cy) in group.iter().enumerate() {
                if y != x
                    && cy.expected >= cx.expected
                    && cy.duration <= cx.duration
                    && dominates(cy.expected, cy.duration, cy.shape(), cx.expected, cx.duration, cx.shape())
                {
                    pruned[start + x] = Some(cy.id);
                    break;
                }
            }
        }
        start = end;
    }
    if shared < rows.len() {
        for x in 0..shared {
            if let Some(y) = pruned[x] {
                pruned[x + shared] = Some(y + shared as i64);
            }
        }
    }
    pruned
}
