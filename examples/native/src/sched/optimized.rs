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

/// One allocation: prefixes, E, widest prefix, verified tokens (cohort + sum of prefixes).
#[derive(Clone)]
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
    allocations: HashMap<(usize, i64, i64), Allocation>,
}

impl<'a> Fast<'a> {
    fn new(lanes: &'a [Lane], curves: &'a [[f64; MAX_DRAFT]], sums: &'a [[f64; MAX_DRAFT + 1]]) -> Fast<'a> {
        let limits = lanes.iter().map(|l| if l.fixed_width < 0 { l.cap } else { l.fixed_width.min(l.cap) }).collect();
        let fixed_positions = (0..lanes.len()).filter(|&p| lanes[p].fixed_width >= 0).collect();
        Fast { lanes, curves, sums, limits, fixed_positions, ranking: None, allocations: HashMap::new() }
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

    fn allocate(&mut self, cohort: usize, bound: i64, budget: i64) -> Allocation {
        if let Some(found) = self.allocations.get(&(cohort, bound, budget)) {
            return found.clone();
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
        let found = Allocation { prefixes, expected, widest, tokens };
        self.allocations.insert((cohort, bound, budget), found.clone());
        found
    }
}

/// A probe row and how to apply it: (probed position, position that lost a slot or -1, width).
struct Probe {
    row: ProbeRow,
    removed: i64,
    width: i64,
}

impl Scheduler {
    fn duration_cached(&self, durations: &mut HashMap<(i64, i64, i64), i64>, key: (i64, i64, i64)) -> i64 {
        *durations.entry(key).or_insert_with(|| self.table_estimate(key))
    }

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
        let eligible: Vec<Value> = lanes
            .iter()
            .zip(&curves)
            .map(|(lane, curve)| {
                Value::Array(vec![
                    Value::Int(lane.request),
                    Value::Int(lane.slot),
                    Value::Int(lane.cap),
                    Value::Int(lane.fixed_width),
                    Value::Int(lane.alloc),
                    Value::Int(self.requests[lane.index].last_served),
                    float_array(curve),
                ])
            })
            .collect();
        let credit_before = self.credit;
        if lanes.is_empty() && prefill.is_none() {
            return record(number, now, eligible, -1, self.credit, vec![], vec![], -1, vec![], -1, -1, self.credit, Value::Nil, vec![]);
        }
        let sums: Vec<[f64; MAX_DRAFT + 1]> = curves.iter().map(prefix_sums).collect();
        let mut fast = Fast::new(&lanes, &curves, &sums);
        let mut durations: HashMap<(i64, i64, i64), i64> = HashMap::new();
        let prefill_tokens = self.prefill_tokens(prefill);
        let (extra, bonus) = match prefill {
            Some(i) => (prefill_cost(&self.params, prefill_tokens), prefill_bonus(&self.params, now - self.requests[i].spec.arrival_us)),
            None => (0, 0.0),
        };
        let candidates = self.fast_candidates(&mut fast, &mut durations, prefill.is_some(), prefill_tokens, bonus, extra, now, prefill);
        let shared = if prefill.is_some() && !lanes.is_empty() { candidates.len() / 2 } else { candidates.len() };
        let pruned = fast_prune(&candidates, shared);
        let alive: Vec<&Candidate> = candidates.iter().filter(|c| pruned[c.id as usize].is_none()).collect();
        let best_value = alive.iter().map(|c| c.value).fold(f64::NEG_INFINITY, |a, b| if b > a { b } else { a });
        let winner = *alive.iter().filter(|c| c.value == best_value).min_by(|a, b| a.key_cmp(b)).unwrap();
        let mut chosen = winner;
        let mut source = "winner";
        let round_prefill_tokens = if winner.prefill { prefill_tokens } else { 0 };

        let accrued = self.credit + self.params.probe_rate * winner.expected;
        self.credit = if accrued < self.params.credit_cap { accrued } else { self.params.credit_cap };
        let mut probes: Vec<Probe> = Vec::new();
        let mut probe_index: i64 = -1;
        let mut chosen_prefixes = winner.prefixes.clone();
        let (mut chosen_expected, mut chosen_duration) = (winner.expected, winner.duration);
        let (mut chosen_b_pad, mut chosen_width) = (winner.b_pad, winner.width);
        if winner.cohort > 0 {
            probes = self.fast_probes(&mut fast, &mut durations, winner, round_prefill_tokens);
            let mut best: Option<usize> = None;
            for (i, p) in probes.iter().enumerate() {
                if !(p.row.cost <= self.credit) {
                    continue;
                }
                let better = match best {
                    None => true,
                    Some(b) => {
                        let q = &probes[b].row;
                        p.row.trials.cmp(&q.trials)
                            .then(p.row.cost.partial_cmp(&q.cost).unwrap_or(Ordering::Equal))
                            .then(p.row.position.cmp(&q.position))
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
                self.credit -= py_max_zero(p.row.cost);
                source = "probe";
                chosen_prefixes[p.row.position] += 1;
                if p.removed >= 0 {
                    chosen_prefixes[p.removed as usize] -= 1;
                }
                chosen_expected = p.row.expected;
                chosen_duration = p.row.duration;
                chosen_width = p.width;
            }
        }

        let mut refresh: i64 = -1;
        if probe_index < 0 && winner.cohort > 0 && self.is_fresh(winner, now) {
            let stale = alive
                .iter()
                .filter(|c| c.id != winner.id && c.group() == winner.group() && !self.is_fresh(c, now))
                .min_by(|a, b| a.key_cmp(b));
            if let Some(best) = stale {
                if best.value >= winner.value * (1.0 - self.params.refresh_tolerance) {
                    chosen = best;
                    source = "refresh";
                    refresh = best.id;
                    chosen_prefixes = best.prefixes.clone();
                    chosen_expected = best.expected;
                    chosen_duration = best.duration;
                    chosen_b_pad = best.b_pad;
                    chosen_width = best.width;
                }
            }
        }
        let probe_rows: Vec<Value> = probes
            .iter()
            .map(|p| {
                let r = &p.row;
                let lane = &lanes[r.position];
                Value::Array(vec![
                    Value::Int(r.position as i64),
                    Value::Int(lane.request),
                    Value::Int(winner.prefixes[r.position] + 1),
                    Value::Int(r.trials),
                    Value::Float(r.gain),
                    Value::Float(r.expected),
                    Value::Int(r.duration),
                    Value::Float(r.cost),
                ])
            })
            .collect();
        self.finish_plan(
            number, now, &lanes, &sums, eligible, prefill, credit_before, &candidates, &pruned, winner.id, chosen,
            source, probe_rows, probe_index, refresh, (chosen_prefixes, chosen_expected, chosen_duration, chosen_b_pad, chosen_width),
            round_prefill_tokens,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn fast_candidates(
        &self,
        fast: &mut Fast,
        durations: &mut HashMap<(i64, i64, i64), i64>,
        prefill_row: bool,
        prefill_tokens: i64,
        bonus: f64,
        extra: i64,
        now: i64,
        prefill: Option<usize>,
    ) -> Vec<Candidate> {
        let params = &self.params;
        if fast.lanes.is_empty() {
            // the prefill-only round: the reference's own evaluation
            let ctx = PlanContext { lanes: vec![], curves: vec![], sums: vec![], ranking: vec![] };
            let _ = prefill_tokens;
            return vec![self.evaluate(&ctx, 0, RECT, 0, 0, 0, prefill, now)];
        }
        // (kind, cohort, bound, budget, b_pad, width, allocation, estimate)
        let mut shapes: Vec<(i64, usize, i64, i64, i64, i64, Allocation, i64)> = Vec::new();
        let verify_budget = params.verify_budget;
        for size in cohort_sizes(params, fast.lanes.len() as i64) {
            let cohort = size as usize;
            let b_pad = bucket(&params.batch_buckets, size);
            let mut by_bound: Vec<Allocation> = Vec::with_capacity(MAX_DRAFT + 1);
            let mut above: Option<Allocation> = None;
            for bound in (0..=MAX_DRAFT as i64).rev() {
                let reuse = matches!(&above, Some(a) if a.widest <= bound);
                if !reuse {
                    above = Some(fast.allocate(cohort, bound, verify_budget));
                }
                by_bound.push(above.clone().unwrap());
            }
            for bound in 0..=MAX_DRAFT as i64 {
                let allocation = by_bound[MAX_DRAFT - bound as usize].clone();
                let width = allocation.widest;
                let estimate = self.duration_cached(durations, (RECT, b_pad, width));
                shapes.push((RECT, cohort, bound, verify_budget, b_pad, width, allocation, estimate));
            }
            if params.ragged {
                for &tokens in &params.token_buckets {
                    if tokens >= size {
                        let budget = verify_budget.min(tokens);
                        let allocation = fast.allocate(cohort, MAX_DRAFT as i64, budget);
                        let width = bucket(&params.token_buckets, allocation.tokens);
                        let estimate = self.duration_cached(durations, (RAGGED, b_pad, width));
                        shapes.push((RAGGED, cohort, MAX_DRAFT as i64, budget, b_pad, width, allocation, estimate));
                    }
                }
            }
        }
        let halves: &[(bool, i64, f64)] = if prefill_row { &[(false, 0, 0.0), (true, extra, bonus)] } else { &[(false, 0, 0.0)] };
        let mut out = Vec::with_capacity(shapes.len() * halves.len());
        for &(with_prefill, added, row_bonus) in halves {
            for (kind, cohort, bound, budget, b_pad, width, allocation, estimate) in &shapes {
                let duration = estimate + added;
                out.push(Candidate {
                    id: out.len() as i64,
                    kind: *kind,
                    cohort: *cohort,
                    prefill: with_prefill,
                    bound: *bound,
                    budget: *budget,
                    b_pad: *b_pad,
                    width: *width,
                    prefixes: allocation.prefixes.clone(),
                    expected: allocation.expected,
                    duration,
                    value: (allocation.expected + row_bonus) / duration as f64,
                });
            }
        }
        out
    }

    fn fast_probes(
        &self,
        fast: &mut Fast,
        durations: &mut HashMap<(i64, i64, i64), i64>,
        winner: &Candidate,
        prefill_tokens: i64,
    ) -> Vec<Probe> {
        let mut out = Vec::new();
        let (cohort, bound, kind) = (winner.cohort, winner.bound, winner.kind);
        let prefixes = &winner.prefixes;
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
                continue;
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
            let duration = self.duration_cached(durations, (kind, winner.b_pad, width)) + extra;
            let cost = (winner.expected * duration as f64) / winner.duration as f64 - expected;
            out.push(Probe { row: ProbeRow { position, trials, gain, expected, duration, cost, prefixes: vec![] }, removed, width });
        }
        out
    }
}

/// Candidate id -> the first candidate of its group (kind, cohort, prefill row) that
/// dominates it; rows from `shared` on repeat the first half, durations raised by one
/// constant, so their entries are the first half's shifted.
fn fast_prune(candidates: &[Candidate], shared: usize) -> Vec<Option<i64>> {
    let mut groups: HashMap<(i64, usize, bool), Vec<usize>> = HashMap::new();
    for (i, c) in candidates[..shared].iter().enumerate() {
        groups.entry(c.group()).or_default().push(i);
    }
    let mut pruned = vec![None; candidates.len()];
    for group in groups.values() {
        for &x in group {
            let cx = &candidates[x];
            for &y in group {
                let cy = &candidates[y];
                if y != x
                    && cy.expected >= cx.expected
                    && cy.duration <= cx.duration
                    && dominates(cy.expected, cy.duration, cy.shape(), cx.expected, cx.duration, cx.shape())
                {
                    pruned[x] = Some(cy.id);
                    break;
                }
            }
        }
    }
    if shared < candidates.len() {
        for x in 0..shared {
            if let Some(y) = pruned[x] {
                pruned[x + shared] = Some(y + shared as i64);
            }
        }
    }
    pruned
}
