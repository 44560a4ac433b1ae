//! The reference scheduler's decisions (tracediff's docs/scheduler.md), in Rust.
//!
//! Every float is computed with the same operations in the same order as
//! tracediff/sched/formulas.py: left-to-right sums, `power = power * alpha` (never `powi`),
//! integer microseconds converted to f64 only where Python divides. The structure follows
//! the optimized scheduler's ideas where they keep the arithmetic: curves and prefix sums
//! once per plan, one ranking of free slots per plan filtered per candidate (a filtered
//! sorted list is still sorted), pruning only within a candidate's group.

use crate::columns;
use crate::msgpack::{int_array, map, str_value, Value};
use std::cmp::Ordering;
use std::collections::HashMap as StdHashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiply-rotate hasher for the scheduler's small integer keys (request ids, table
/// shapes): the standard SipHash is built to resist hostile keys, which these are not, and
/// costs more than the lookups around it. Iteration order is never relied on.
#[derive(Default)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, value: i64) {
        self.write_u64(value as u64);
    }
    fn write_usize(&mut self, value: usize) {
        self.write_u64(value as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<IntHasher>>;

pub const MAX_DRAFT: usize = 7;
const RECT: i64 = 0;
const RAGGED: i64 = 1;
const HOST: i64 = 0;
const DEVICE: i64 = 1;
pub const WAITING: i64 = 0;
pub const PREFILLING: i64 = 1;
pub const DECODING: i64 = 2;
pub const DRAINING: i64 = 3;
pub const RETIRED: i64 = 4;

pub type Fault = String;

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, Fault> {
    v.get(key).ok_or_else(|| format!("missing field {:?}", key))
}
fn int(v: &Value, key: &str) -> Result<i64, Fault> {
    field(v, key)?.as_i64().ok_or_else(|| format!("field {:?} is not an integer", key))
}
fn float(v: &Value, key: &str) -> Result<f64, Fault> {
    field(v, key)?.as_f64().ok_or_else(|| format!("field {:?} is not a number", key))
}
fn boolean(v: &Value, key: &str) -> Result<bool, Fault> {
    field(v, key)?.as_bool().ok_or_else(|| format!("field {:?} is not a boolean", key))
}
fn ints(v: &Value) -> Result<Vec<i64>, Fault> {
    v.as_array()
        .ok_or("expected an array")?
        .iter()
        .map(|x| x.as_i64().ok_or_else(|| "expected integers".to_string()))
        .collect()
}

#[derive(Clone, Debug)]
pub struct Params {
    allocation: String,
    ragged: bool,
    max_lanes: i64,
    verify_budget: i64,
    batch_buckets: Vec<i64>,
    token_buckets: Vec<i64>,
    alpha: f64,
    prior_weight: f64,
    probe_rate: f64,
    credit_cap: f64,
    probe_min_trials: i64,
    refresh_period_us: i64,
    refresh_tolerance: f64,
    prefill_chunk: i64,
    prefill_bonus_cap: f64,
    prefill_bonus_period_us: i64,
    base_us: i64,
    lane_us: i64,
    token_us: i64,
    eager_penalty_us: i64,
    prefill_base_us: i64,
    prefill_token_us: i64,
    eager_shapes: Vec<(i64, i64, i64)>,
    duration_quantum_us: i64,
}

impl Params {
    fn from_value(p: &Value) -> Result<Params, Fault> {
        let mut eager_shapes = Vec::new();
        for shape in field(p, "eager_shapes")?.as_array().ok_or("eager_shapes")? {
            let s = ints(shape)?;
            if s.len() != 3 {
                return Err("an eager shape is not (kind, b_pad, width)".into());
            }
            eager_shapes.push((s[0], s[1], s[2]));
        }
        Ok(Params {
            allocation: field(p, "allocation")?.as_str().ok_or("allocation")?.to_string(),
            ragged: boolean(p, "ragged")?,
            max_lanes: int(p, "max_lanes")?,
            verify_budget: int(p, "verify_budget")?,
            batch_buckets: ints(field(p, "batch_buckets")?)?,
            token_buckets: ints(field(p, "token_buckets")?)?,
            alpha: float(p, "alpha")?,
            prior_weight: float(p, "prior_weight")?,
            probe_rate: float(p, "probe_rate")?,
            credit_cap: float(p, "credit_cap")?,
            probe_min_trials: int(p, "probe_min_trials")?,
            refresh_period_us: int(p, "refresh_period_us")?,
            refresh_tolerance: float(p, "refresh_tolerance")?,
            prefill_chunk: int(p, "prefill_chunk")?,
            prefill_bonus_cap: float(p, "prefill_bonus_cap")?,
            prefill_bonus_period_us: int(p, "prefill_bonus_period_us")?,
            base_us: int(p, "base_us")?,
            lane_us: int(p, "lane_us")?,
            token_us: int(p, "token_us")?,
            eager_penalty_us: int(p, "eager_penalty_us")?,
            prefill_base_us: int(p, "prefill_base_us")?,
            prefill_token_us: int(p, "prefill_token_us")?,
            eager_shapes,
            // absent in scenarios written before the parameter existed: no quantisation
            duration_quantum_us: p.get("duration_quantum_us").and_then(Value::as_i64).unwrap_or(1),
        })
    }
}

#[derive(Clone, Debug)]
pub struct Spec {
    id: i64,
    arrival_us: i64,
    prompt_len: i64,
    max_new: i64,
    grammar_cap: i64,
    host_stop: bool,
    fixed_width: i64,
}

impl Spec {
    fn from_value(r: &Value) -> Result<Spec, Fault> {
        Ok(Spec {
            id: int(r, "id")?,
            arrival_us: int(r, "arrival_us")?,
            prompt_len: int(r, "prompt_len")?,
            max_new: int(r, "max_new")?,
            grammar_cap: int(r, "grammar_cap")?,
            host_stop: boolean(r, "host_stop")?,
            fixed_width: int(r, "fixed_width")?,
        })
    }
    fn grammar(&self) -> bool {
        self.grammar_cap >= 0
    }
}

#[derive(Clone, Debug)]
struct RequestState {
    spec: Spec,
    phase: i64,
    slot: i64,
    prefilled: i64,
    prefill_in_flight: bool,
    generated: i64,
    pending_count: i64,
    pending_advance: i64,
    last_served: i64,
    offer: i64,
    trials: [i64; MAX_DRAFT],
    accepts: [i64; MAX_DRAFT],
}

#[derive(Clone, Debug)]
struct SubmittedLane {
    request: i64,
    slot: i64,
    prefix: i64,
    alloc: i64,
}

#[derive(Clone, Debug)]
struct SubmittedRound {
    plan: i64,
    kind: i64,
    b_pad: i64,
    width: i64,
    lanes: Vec<SubmittedLane>,
    prefill_request: i64,
    prefill_tokens: i64,
    duration: i64,
}

#[derive(Clone, Debug)]
struct Lane {
    index: usize, // into Scheduler::requests
    request: i64,
    slot: i64,
    cap: i64,
    fixed_width: i64,
    alloc: i64,
}

#[derive(Clone, Debug)]
struct Candidate {
    id: i64,
    kind: i64,
    cohort: usize,
    prefill: bool,
    bound: i64,
    budget: i64,
    b_pad: i64,
    width: i64,
    prefixes: Vec<i64>,
    expected: f64,
    duration: i64,
    value: f64,
}

impl Candidate {
    /// formulas.winner_key: (-value, duration, -cohort, b_pad, width, kind, prefill, id).
    fn key_cmp(&self, other: &Candidate) -> Ordering {
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

/// One free slot (lane position, depth) of the plan's ranking: formulas.slot_rank's key
/// (-survival, depth, slot), then the position, as Python sorts (rank, position) tuples.
#[derive(Clone, Copy, Debug)]
struct Slot {
    survival: f64,
    depth: i64,
    slot: i64,
    position: usize,
}

fn slot_cmp(a: &Slot, b: &Slot) -> Ordering {
    (-a.survival)
        .partial_cmp(&(-b.survival))
        .unwrap_or(Ordering::Equal)
        .then(a.depth.cmp(&b.depth))
        .then(a.slot.cmp(&b.slot))
        .then(a.position.cmp(&b.position))
}

mod optimized;

pub struct Scheduler {
    optimized: bool, // --optimized: the techniques of sched/optimized.rs
    params: Params,
    specs: HashMap<i64, Spec>,
    requests: Vec<RequestState>, // in arrival order, as the Python dict iterates
    index: HashMap<i64, usize>,
    submitted: Vec<SubmittedRound>, // in submission order, as the Python dict iterates
    table: HashMap<(i64, i64, i64), (i64, i64)>,
    table_order: Vec<(i64, i64, i64)>,
    credit: f64,
    plan_number: i64,
    free_slots: Vec<i64>,
}

/// What one plan() call computes before it builds the record.
struct PlanContext {
    lanes: Vec<Lane>,
    curves: Vec<[f64; MAX_DRAFT]>, // per eligible lane
    sums: Vec<[f64; MAX_DRAFT + 1]>, // formulas.prefix_sums per eligible lane
    ranking: Vec<Slot>,            // every free slot of every non-fixed lane, sorted
}

// -- formulas.py ----------------------------------------------------------------------
fn survival_curve(trials: &[i64; MAX_DRAFT], accepts: &[i64; MAX_DRAFT], alpha: f64, m: f64) -> [f64; MAX_DRAFT] {
    let mut curve = [0.0; MAX_DRAFT];
    let mut power = 1.0f64;
    let mut previous = 1.0f64;
    for k in 0..MAX_DRAFT {
        power = power * alpha;
        let estimate = (accepts[k] as f64 + m * power) / (trials[k] as f64 + m);
        previous = if estimate < previous { estimate } else { previous };
        curve[k] = previous;
    }
    curve
}

fn prefix_sums(curve: &[f64; MAX_DRAFT]) -> [f64; MAX_DRAFT + 1] {
    let mut sums = [1.0; MAX_DRAFT + 1];
    let mut value = 1.0f64;
    for k in 0..MAX_DRAFT {
        value = value + curve[k];
        sums[k + 1] = value;
    }
    sums
}

fn bucket(buckets: &[i64], size: i64) -> i64 {
    for &b in buckets {
        if b >= size {
            return b;
        }
    }
    *buckets.last().unwrap()
}

fn cohort_sizes(params: &Params, eligible: i64) -> Vec<i64> {
    let limit = eligible.min(params.verify_budget).min(*params.batch_buckets.last().unwrap());
    let mut sizes: Vec<i64> = params.batch_buckets.iter().copied().filter(|&b| b < limit).collect();
    if limit > 0 {
        sizes.push(limit);
    }
    sizes
}

fn prior_duration(params: &Params, kind: i64, b_pad: i64, width: i64) -> i64 {
    let tokens = if kind == RECT { b_pad * (width + 1) } else { width };
    let mut estimate = params.base_us + params.lane_us * b_pad + params.token_us * tokens;
    if params.eager_shapes.contains(&(kind, b_pad, width)) {
        estimate += params.eager_penalty_us;
    }
    quantised(estimate, params.duration_quantum_us)
}

/// formulas.quantised: `-(-duration // quantum) * quantum`, Python's floor division.
fn quantised(duration: i64, quantum: i64) -> i64 {
    -((-duration).div_euclid(quantum)) * quantum
}

fn prefill_cost(params: &Params, chunk_tokens: i64) -> i64 {
    params.prefill_base_us + params.prefill_token_us * chunk_tokens
}

fn prefill_bonus(params: &Params, waited_us: i64) -> f64 {
    let bonus = waited_us as f64 / params.prefill_bonus_period_us as f64;
    if bonus < params.prefill_bonus_cap {
        bonus
    } else {
        params.prefill_bonus_cap
    }
}

fn dominates(ey: f64, dy: i64, sy: (i64, i64, i64), ex: f64, dx: i64, sx: (i64, i64, i64)) -> bool {
    if ey < ex || dy > dx {
        return false;
    }
    ey > ex || dy < dx || sy < sx
}

/// Python's max(x, 0.0): the first argument unless 0.0 is strictly greater.
fn py_max_zero(x: f64) -> f64 {
    if 0.0 > x {
        0.0
    } else {
        x
    }
}

impl Scheduler {
    pub fn new(scenario: &Value) -> Result<Scheduler, Fault> {
        let params = Params::from_value(field(scenario, "params")?)?;
        let mut specs = HashMap::default();
        for r in field(scenario, "requests")?.as_array().ok_or("requests")? {
            let spec = Spec::from_value(r)?;
            specs.insert(spec.id, spec);
        }
        let free_slots = (0..params.max_lanes).collect();
        Ok(Scheduler {
            optimized: false,
            params,
            specs,
            requests: Vec::new(),
            index: HashMap::default(),
            submitted: Vec::new(),
            table: HashMap::default(),
            table_order: Vec::new(),
            credit: 0.0,
            plan_number: 0,
            free_slots,
        })
    }

    // -- events -------------------------------------------------------------------------
    pub fn arrive(&mut self, request: &Value) -> Result<(), Fault> {
        let id = int(request, "id")?;
        let spec = match self.specs.get(&id) {
            Some(spec) => spec.clone(),
            None => Spec::from_value(request)?,
        };
        self.index.insert(id, self.requests.len());
        self.requests.push(RequestState {
            spec,
            phase: WAITING,
            slot: -1,
            prefilled: 0,
            prefill_in_flight: false,
            generated: 0,
            pending_count: 0,
            pending_advance: 0,
            last_served: -1,
            offer: MAX_DRAFT as i64,
            trials: [0; MAX_DRAFT],
            accepts: [0; MAX_DRAFT],
        });
        Ok(())
    }

    fn state_of(&mut self, id: i64) -> Result<&mut RequestState, Fault> {
        let index = *self.index.get(&id).ok_or_else(|| format!("unknown request {}", id))?;
        Ok(&mut self.requests[index])
    }

    pub fn complete(&mut self, event: &Value, now: i64) -> Result<Vec<i64>, Fault> {
        let plan = int(event, "round")?;
        let at = self
            .submitted
            .iter()
            .position(|r| r.plan == plan)
            .ok_or_else(|| format!("completion of unknown round {}", plan))?;
        let submitted = self.submitted.remove(at);
        let results = field(event, "lanes")?.as_array().ok_or("lanes")?;
        if results.len() != submitted.lanes.len() {
            return Err(format!("round {}: {} lane results for {} lanes", plan, results.len(), submitted.lanes.len()));
        }
        for (lane, result) in submitted.lanes.iter().zip(results) {
            let row = result.as_array().ok_or("lane result")?;
            if row.len() != 6 {
                return Err("a lane result is not [request, verified, accepted, tokens, finished, offer]".into());
            }
            let verified = row[1].as_i64().ok_or("verified")?;
            let accepted = row[2].as_i64().ok_or("accepted")?;
            let tokens = row[3].as_i64().ok_or("tokens")?;
            let finished = row[4].as_bool().ok_or("finished")?;
            let offer = row[5].as_i64().ok_or("offer")?;
            let state = self.state_of(lane.request)?;
            state.generated += tokens;
            for k in 0..verified.max(0) as usize {
                state.trials[k] += 1;
            }
            for k in 0..accepted.max(0) as usize {
                state.accepts[k] += 1;
            }
            state.pending_count -= 1;
            state.pending_advance -= 1 + lane.prefix;
            state.offer = offer;
            if state.phase == DECODING && (finished || state.generated >= state.spec.max_new) {
                state.phase = DRAINING;
            }
        }
        if submitted.prefill_request >= 0 {
            let tokens = submitted.prefill_tokens;
            let state = self.state_of(submitted.prefill_request)?;
            state.prefill_in_flight = false;
            state.prefilled += tokens;
            if state.prefilled >= state.spec.prompt_len {
                state.phase = DECODING;
            }
        }
        if !submitted.lanes.is_empty() {
            let mut observed = int(event, "observed_us")?;
            if submitted.prefill_request >= 0 {
                observed -= prefill_cost(&self.params, submitted.prefill_tokens);
            }
            let key = (submitted.kind, submitted.b_pad, submitted.width);
            let estimate = self.table_estimate(key);
            // est + (observed - est) // 4, with Python's floor division
            let updated = estimate + (observed.max(1) - estimate).div_euclid(4);
            if !self.table.contains_key(&key) {
                self.table_order.push(key);
            }
            self.table.insert(key, (updated, now));
        }
        let mut retired = Vec::new();
        for state in self.requests.iter_mut() {
            if state.phase == DRAINING && state.pending_count == 0 {
                state.phase = RETIRED;
                self.free_slots.push(state.slot);
                self.free_slots.sort();
                retired.push(state.spec.id);
            }
        }
        retired.sort();
        Ok(retired)
    }

    fn commit(&mut self, round: SubmittedRound) -> Result<(), Fault> {
        for lane in &round.lanes {
            let plan = round.plan;
            let state = self.state_of(lane.request)?;
            state.pending_count += 1;
            state.pending_advance += 1 + lane.prefix;
            state.last_served = plan;
        }
        if round.prefill_request >= 0 {
            let index = self.index[&round.prefill_request];
            let state = &mut self.requests[index];
            state.prefill_in_flight = true;
            if state.phase == WAITING {
                state.phase = PREFILLING;
                if self.free_slots.is_empty() {
                    return Err("no free slot for a prefill row".into());
                }
                state.slot = self.free_slots.remove(0);
            }
        }
        self.submitted.push(round);
        Ok(())
    }

    // -- queries ------------------------------------------------------------------------
    fn table_estimate(&self, key: (i64, i64, i64)) -> i64 {
        match self.table.get(&key) {
            Some(&(estimate, _)) => estimate,
            None => prior_duration(&self.params, key.0, key.1, key.2),
        }
    }

    fn table_observed(&self, key: (i64, i64, i64)) -> i64 {
        self.table.get(&key).map(|&(_, observed)| observed).unwrap_or(-1)
    }

    /// A grammar lane is host-allocated under every mode (its drafts pass a host mask).
    fn lane_alloc(&self, spec: &Spec) -> i64 {
        let allocation = self.params.allocation.as_str();
        if allocation == "host" || spec.grammar() {
            return HOST;
        }
        if allocation == "device" {
            return DEVICE;
        }
        if spec.host_stop {
            HOST
        } else {
            DEVICE
        }
    }

    fn eligible_lanes(&self) -> Vec<Lane> {
        let mut lanes = Vec::new();
        for (index, state) in self.requests.iter().enumerate() {
            if state.phase != DECODING {
                continue;
            }
            let spec = &state.spec;
            if spec.host_stop && state.pending_count > 0 {
                continue;
            }
            let remaining = spec.max_new - state.generated - state.pending_advance;
            if remaining < 1 {
                continue;
            }
            let alloc = self.lane_alloc(spec);
            let mut cap = (MAX_DRAFT as i64).min(remaining - 1);
            if state.offer < cap {
                cap = state.offer; // drafts that were not proposed cannot be verified
            }
            if spec.grammar() && spec.grammar_cap < cap {
                cap = spec.grammar_cap;
            }
            lanes.push(Lane { index, request: spec.id, slot: state.slot, cap, fixed_width: spec.fixed_width, alloc });
        }
        let requests = &self.requests;
        lanes.sort_by_key(|lane| (requests[lane.index].last_served, lane.slot));
        lanes
    }

    fn prefill_candidate(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (index, state) in self.requests.iter().enumerate() {
            if state.prefill_in_flight {
                continue;
            }
            if state.phase == PREFILLING || (state.phase == WAITING && !self.free_slots.is_empty()) {
                let key = (state.spec.arrival_us, state.spec.id);
                match best {
                    Some(b) if key >= (self.requests[b].spec.arrival_us, self.requests[b].spec.id) => {}
                    _ => best = Some(index),
                }
            }
        }
        best
    }

    fn queued_duration(&self) -> i64 {
        self.submitted.iter().map(|r| r.duration).sum()
    }

    fn prefill_tokens(&self, prefill: Option<usize>) -> i64 {
        match prefill {
            None => 0,
            Some(i) => {
                let state = &self.requests[i];
                self.params.prefill_chunk.min(state.spec.prompt_len - state.prefilled)
            }
        }
    }

    fn shape_of(&self, kind: i64, cohort: usize, prefixes: &[i64]) -> (i64, i64) {
        if cohort == 0 {
            return (0, 0);
        }
        let b_pad = bucket(&self.params.batch_buckets, cohort as i64);
        if kind == RECT {
            return (b_pad, *prefixes.iter().max().unwrap());
        }
        let tokens: i64 = prefixes.iter().map(|p| 1 + p).sum();
        (b_pad, bucket(&self.params.token_buckets, tokens))
    }

    fn duration_of(&self, kind: i64, b_pad: i64, width: i64, prefill_tokens: i64) -> i64 {
        let mut duration = if b_pad != 0 { self.table_estimate((kind, b_pad, width)) } else { 0 };
        if prefill_tokens != 0 {
            duration += prefill_cost(&self.params, prefill_tokens);
        }
        duration
    }

    /// reference.allocate: fixed lanes (and the forced one) first, then the best slots.
    fn allocate(&self, ctx: &PlanContext, cohort: usize, bound: i64, budget: i64, forced: Option<(usize, i64)>) -> Vec<i64> {
        let mut left = budget - cohort as i64;
        let mut prefixes = vec![0i64; cohort];
        for position in 0..cohort {
            let lane = &ctx.lanes[position];
            let mut take = if lane.fixed_width >= 0 {
                lane.fixed_width.min(lane.cap).min(bound)
            } else {
                match forced {
                    Some((at, depth)) if at == position => depth,
                    _ => continue,
                }
            };
            take = take.min(left);
            prefixes[position] = take;
            left -= take;
        }
        let mut wanted = left.max(0);
        if wanted == 0 {
            return prefixes;
        }
        for slot in &ctx.ranking {
            if slot.position >= cohort {
                continue;
            }
            if let Some((at, _)) = forced {
                if at == slot.position {
                    continue;
                }
            }
            let lane = &ctx.lanes[slot.position];
            if slot.depth > bound.min(lane.cap) {
                continue;
            }
            prefixes[slot.position] += 1;
            wanted -= 1;
            if wanted == 0 {
                break;
            }
        }
        prefixes
    }

    #[allow(clippy::too_many_arguments)]
    fn evaluate(&self, ctx: &PlanContext, id: i64, kind: i64, cohort: usize, bound: i64, budget: i64, prefill: Option<usize>, now: i64) -> Candidate {
        let prefixes = self.allocate(ctx, cohort, bound, budget, None);
        let mut expected = 0.0f64;
        for (position, &p) in prefixes.iter().enumerate() {
            expected = expected + ctx.sums[position][p as usize];
        }
        let (b_pad, width) = self.shape_of(kind, cohort, &prefixes);
        let duration = self.duration_of(kind, b_pad, width, self.prefill_tokens(prefill));
        let bonus = match prefill {
            Some(i) => prefill_bonus(&self.params, now - self.requests[i].spec.arrival_us),
            None => 0.0,
        };
        Candidate {
            id,
            kind,
            cohort,
            prefill: prefill.is_some(),
            bound,
            budget,
            b_pad,
            width,
            prefixes,
            expected,
            duration,
            value: (expected + bonus) / duration as f64,
        }
    }

    fn candidates(&self, ctx: &PlanContext, prefill: Option<usize>, now: i64) -> Vec<Candidate> {
        let params = &self.params;
        let mut out: Vec<Candidate> = Vec::new();
        let rows: Vec<Option<usize>> = match prefill {
            Some(_) => vec![None, prefill],
            None => vec![None],
        };
        for row in rows {
            if ctx.lanes.is_empty() {
                if row.is_some() {
                    out.push(self.evaluate(ctx, out.len() as i64, RECT, 0, 0, 0, row, now));
                }
                continue;
            }
            for size in cohort_sizes(params, ctx.lanes.len() as i64) {
                let cohort = size as usize;
                for bound in 0..=MAX_DRAFT as i64 {
                    let c = self.evaluate(ctx, out.len() as i64, RECT, cohort, bound, params.verify_budget, row, now);
                    out.push(c);
                }
                if params.ragged {
                    for &tokens in &params.token_buckets {
                        if tokens >= size {
                            let budget = params.verify_budget.min(tokens);
                            let c = self.evaluate(ctx, out.len() as i64, RAGGED, cohort, MAX_DRAFT as i64, budget, row, now);
                            out.push(c);
                        }
                    }
                }
            }
        }
        out
    }

    /// candidate id -> id of the first candidate (in id order) of its group dominating it.
    fn prune(&self, candidates: &[Candidate]) -> Vec<Option<i64>> {
        let mut groups: HashMap<(i64, usize, bool), Vec<usize>> = HashMap::default();
        for (i, c) in candidates.iter().enumerate() {
            groups.entry(c.group()).or_default().push(i);
        }
        let mut pruned = vec![None; candidates.len()];
        for (i, x) in candidates.iter().enumerate() {
            for &j in &groups[&x.group()] {
                if j == i {
                    continue;
                }
                let y = &candidates[j];
                if dominates(y.expected, y.duration, y.shape(), x.expected, x.duration, x.shape()) {
                    pruned[i] = Some(y.id);
                    break;
                }
            }
        }
        pruned
    }

    fn probes(&self, ctx: &PlanContext, winner: &Candidate, prefill_tokens: i64) -> (Vec<[Value; 8]>, Vec<ProbeRow>) {
        let mut rows = Vec::new();
        let mut found = Vec::new();
        for position in 0..winner.cohort {
            let lane = &ctx.lanes[position];
            let depth = winner.prefixes[position] + 1;
            if lane.fixed_width >= 0 || depth > lane.cap {
                continue;
            }
            let trials = self.requests[lane.index].trials[(depth - 1) as usize];
            if trials >= self.params.probe_min_trials {
                continue;
            }
            let prefixes = self.allocate(ctx, winner.cohort, winner.bound, winner.budget, Some((position, depth)));
            if prefixes[position] != depth
                || (0..winner.cohort).any(|q| ctx.lanes[q].fixed_width >= 0 && prefixes[q] != winner.prefixes[q])
            {
                continue;
            }
            let mut added = Vec::new();
            let mut removed = Vec::new();
            for q in 0..winner.cohort {
                let (before, after) = (winner.prefixes[q], prefixes[q]);
                for k in before + 1..after + 1 {
                    added.push(Slot { survival: ctx.curves[q][(k - 1) as usize], depth: k, slot: ctx.lanes[q].slot, position: 0 });
                }
                for k in after + 1..before + 1 {
                    removed.push(Slot { survival: ctx.curves[q][(k - 1) as usize], depth: k, slot: ctx.lanes[q].slot, position: 0 });
                }
            }
            added.sort_by(slot_cmp);
            removed.sort_by(slot_cmp);
            let mut gained = 0.0f64;
            for s in &added {
                gained = gained + s.survival;
            }
            let mut lost = 0.0f64;
            for s in &removed {
                lost = lost + s.survival;
            }
            let gain = gained - lost;
            let expected = winner.expected + gain;
            let (b_pad, width) = self.shape_of(winner.kind, winner.cohort, &prefixes);
            let duration = self.duration_of(winner.kind, b_pad, width, prefill_tokens);
            let cost = (winner.expected * duration as f64) / winner.duration as f64 - expected;
            rows.push([
                Value::Int(position as i64),
                Value::Int(lane.request),
                Value::Int(depth),
                Value::Int(trials),
                Value::Float(gain),
                Value::Float(expected),
                Value::Int(duration),
                Value::Float(cost),
            ]);
            found.push(ProbeRow { position, trials, expected, duration, cost, prefixes });
        }
        (rows, found)
    }

    fn is_fresh(&self, c: &Candidate, now: i64) -> bool {
        let observed = self.table_observed((c.kind, c.b_pad, c.width));
        observed >= 0 && now - observed < self.params.refresh_period_us
    }

    fn context(&self) -> PlanContext {
        let lanes = self.eligible_lanes();
        let mut curves = Vec::with_capacity(lanes.len());
        let mut sums = Vec::with_capacity(lanes.len());
        let mut ranking = Vec::new();
        for (position, lane) in lanes.iter().enumerate() {
            let state = &self.requests[lane.index];
            let curve = survival_curve(&state.trials, &state.accepts, self.params.alpha, self.params.prior_weight);
            sums.push(prefix_sums(&curve));
            if lane.fixed_width < 0 {
                for depth in 1..=(MAX_DRAFT as i64).min(lane.cap) {
                    ranking.push(Slot { survival: curve[(depth - 1) as usize], depth, slot: lane.slot, position });
                }
            }
            curves.push(curve);
        }
        ranking.sort_by(slot_cmp);
        PlanContext { lanes, curves, sums, ranking }
    }

    // -- plan -----------------------------------------------------------------------------
    /// The optimized algorithm from now on (`tracediff-native --optimized`).
    pub fn set_optimized(&mut self, optimized: bool) {
        self.optimized = optimized;
    }

    pub fn plan(&mut self, now: i64) -> Result<Value, Fault> {
        if self.optimized {
            return self.plan_optimized(now);
        }
        self.plan_number += 1;
        let number = self.plan_number;
        let ctx = self.context();
        let prefill = self.prefill_candidate();
        let eligible = self.eligible_table(&ctx.lanes, &ctx.curves)?;
        let credit_before = self.credit;
        let candidates = self.candidates(&ctx, prefill, now);
        if candidates.is_empty() {
            return Ok(empty_record(number, now, eligible, self.credit));
        }
        let pruned = self.prune(&candidates);
        let alive: Vec<&Candidate> = candidates.iter().filter(|c| pruned[c.id as usize].is_none()).collect();
        let winner = *alive.iter().min_by(|a, b| a.key_cmp(b)).unwrap();
        let mut chosen = winner;
        let mut source = "winner";
        let prefill_tokens = if winner.prefill { self.prefill_tokens(prefill) } else { 0 };

        let accrued = self.credit + self.params.probe_rate * winner.expected;
        self.credit = if accrued < self.params.credit_cap { accrued } else { self.params.credit_cap };
        let mut probe_rows = Vec::new();
        let mut probe_index: i64 = -1;
        let mut chosen_prefixes = winner.prefixes.clone();
        let (mut chosen_expected, mut chosen_duration) = (winner.expected, winner.duration);
        let (mut chosen_b_pad, mut chosen_width) = (winner.b_pad, winner.width);
        if winner.cohort > 0 {
            let (rows, found) = self.probes(&ctx, winner, prefill_tokens);
            probe_rows = rows;
            let mut best: Option<usize> = None;
            for (i, p) in found.iter().enumerate() {
                if !(p.cost <= self.credit) {
                    continue;
                }
                best = match best {
                    None => Some(i),
                    Some(b) => {
                        let q = &found[b];
                        let ord = p
                            .trials
                            .cmp(&q.trials)
                            .then(p.cost.partial_cmp(&q.cost).unwrap_or(Ordering::Equal))
                            .then(p.position.cmp(&q.position));
                        if ord == Ordering::Less {
                            Some(i)
                        } else {
                            Some(b)
                        }
                    }
                };
            }
            if let Some(i) = best {
                let p = &found[i];
                probe_index = i as i64;
                self.credit -= py_max_zero(p.cost);
                source = "probe";
                chosen_prefixes = p.prefixes.clone();
                chosen_expected = p.expected;
                chosen_duration = p.duration;
                let shape = self.shape_of(winner.kind, winner.cohort, &chosen_prefixes);
                chosen_b_pad = shape.0;
                chosen_width = shape.1;
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

        let pruned_rows: Vec<Value> = pruned
            .iter()
            .enumerate()
            .filter_map(|(i, by)| by.map(|by| int_array(&[i as i64, by])))
            .collect();
        let probe_values: Vec<Value> = probe_rows.into_iter().map(|r| Value::Array(r.to_vec())).collect();
        let tables = Tables {
            eligible,
            candidates: candidate_table(&candidates)?,
            pruned: columns::table("pruned", columns::PRUNED, &pruned_rows)?,
            probes: columns::table("probes", columns::PROBES, &probe_values)?,
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
            number, now, &ctx.lanes, &ctx.sums, prefill, credit_before, tables, winner.id, chosen, source,
            probe_index, refresh, prefill_tokens,
        )
    }

    /// The eligible table, built column by column.
    fn eligible_table(&self, lanes: &[Lane], curves: &[[f64; MAX_DRAFT]]) -> Result<Value, Fault> {
        let mut table = columns::Builder::new(columns::ELIGIBLE, lanes.len());
        for (lane, curve) in lanes.iter().zip(curves) {
            table.int(0, lane.request);
            table.int(1, lane.slot);
            table.int(2, lane.cap);
            table.int(3, lane.fixed_width);
            table.int(4, lane.alloc);
            table.int(5, self.requests[lane.index].last_served);
            table.floats(6, curve);
        }
        table.finish("eligible")
    }

    /// The round chosen, its lane values, the commit and the record: the end of both plans.
    #[allow(clippy::too_many_arguments)]
    fn finish_plan(
        &mut self,
        number: i64,
        now: i64,
        lanes: &[Lane],
        sums: &[[f64; MAX_DRAFT + 1]],
        prefill: Option<usize>,
        credit_before: f64,
        tables: Tables,
        winner_id: i64,
        chosen: Chosen,
        source: &str,
        probe_index: i64,
        refresh: i64,
        prefill_tokens: i64,
    ) -> Result<Value, Fault> {
        let Chosen { kind, cohort, prefill: with_prefill, prefixes: chosen_prefixes, expected: chosen_expected, duration: chosen_duration, b_pad: chosen_b_pad, width: chosen_width } = chosen;
        let round_lanes: Vec<SubmittedLane> = (0..cohort)
            .map(|q| {
                let lane = &lanes[q];
                SubmittedLane { request: lane.request, slot: lane.slot, prefix: chosen_prefixes[q], alloc: lane.alloc }
            })
            .collect();
        let prefill_request = match prefill {
            Some(i) if with_prefill => self.requests[i].spec.id,
            _ => -1,
        };
        let progress = now + self.queued_duration() + chosen_duration;
        let lane_values: Vec<Value> = (0..cohort)
            .map(|q| {
                let value = sums[q][chosen_prefixes[q] as usize];
                Value::Array(vec![
                    Value::Int(lanes[q].request),
                    Value::Float(value),
                    Value::Float(value / chosen_duration as f64 * 1e6),
                    Value::Int(progress),
                ])
            })
            .collect();
        let round = SubmittedRound {
            plan: number,
            kind,
            b_pad: chosen_b_pad,
            width: chosen_width,
            lanes: round_lanes,
            prefill_request,
            prefill_tokens,
            duration: chosen_duration,
        };
        let round_row = Value::Array(vec![
            str_value(source),
            Value::Int(round.kind),
            Value::Int(round.b_pad),
            Value::Int(round.width),
            Value::Int(round.prefill_request),
            Value::Int(round.prefill_tokens),
            Value::Array(
                round
                    .lanes
                    .iter()
                    .map(|l| int_array(&[l.request, l.slot, l.prefix, l.alloc]))
                    .collect(),
            ),
            Value::Float(chosen_expected),
            Value::Int(round.duration),
        ]);
        let prefill_id = prefill.map(|i| self.requests[i].spec.id).unwrap_or(-1);
        self.commit(round)?;
        let lane_values = columns::table("lane_values", columns::LANE_VALUES, &lane_values)?;
        Ok(record(
            number,
            now,
            tables.eligible,
            prefill_id,
            credit_before,
            tables.candidates,
            tables.pruned,
            winner_id,
            tables.probes,
            probe_index,
            refresh,
            self.credit,
            round_row,
            lane_values,
        ))
    }

    // -- the bench message: a prepared state (tracediff.bench's state dict) ---------------
    pub fn load_state(&mut self, state: &Value) -> Result<(), Fault> {
        self.requests.clear();
        self.index.clear();
        for r in field(state, "requests")?.as_array().ok_or("requests")? {
            let id = int(r, "id")?;
            let spec = self.specs.get(&id).cloned().ok_or_else(|| format!("unknown request {}", id))?;
            let mut trials = [0; MAX_DRAFT];
            let mut accepts = [0; MAX_DRAFT];
            for (k, v) in ints(field(r, "trials")?)?.into_iter().enumerate().take(MAX_DRAFT) {
                trials[k] = v;
            }
            for (k, v) in ints(field(r, "accepts")?)?.into_iter().enumerate().take(MAX_DRAFT) {
                accepts[k] = v;
            }
            self.index.insert(id, self.requests.len());
            self.requests.push(RequestState {
                spec,
                phase: int(r, "phase")?,
                slot: int(r, "slot")?,
                prefilled: int(r, "prefilled")?,
                prefill_in_flight: boolean(r, "prefill_in_flight")?,
                generated: int(r, "generated")?,
                pending_count: int(r, "pending_count")?,
                pending_advance: 0,
                last_served: int(r, "last_served")?,
                offer: int(r, "offer")?,
                trials,
                accepts,
            });
        }
        self.submitted.clear();
        for s in field(state, "submitted")?.as_array().ok_or("submitted")? {
            let mut lanes = Vec::new();
            for l in field(s, "lanes")?.as_array().ok_or("lanes")? {
                let v = ints(l)?;
                lanes.push(SubmittedLane { request: v[0], slot: v[1], prefix: v[2], alloc: v[3] });
            }
            for lane in &lanes {
                let prefix = lane.prefix;
                self.state_of(lane.request)?.pending_advance += 1 + prefix;
            }
            self.submitted.push(SubmittedRound {
                plan: int(s, "plan")?,
                kind: int(s, "kind")?,
                b_pad: int(s, "b_pad")?,
                width: int(s, "width")?,
                lanes,
                prefill_request: int(s, "prefill_request")?,
                prefill_tokens: int(s, "prefill_tokens")?,
                duration: int(s, "duration")?,
            });
        }
        self.table.clear();
        self.table_order.clear();
        for row in field(state, "table")?.as_array().ok_or("table")? {
            let v = ints(row)?;
            let key = (v[0], v[1], v[2]);
            self.table_order.push(key);
            self.table.insert(key, (v[3], v[4]));
        }
        self.credit = float(state, "credit")?;
        self.plan_number = int(state, "plan_number")?;
        self.free_slots = ints(field(state, "free_slots")?)?;
        Ok(())
    }
}

struct ProbeRow {
    position: usize,
    trials: i64,
    expected: f64,
    duration: i64,
    cost: f64,
    prefixes: Vec<i64>,
}

/// The candidates table, built column by column.
fn candidate_table(candidates: &[Candidate]) -> Result<Value, Fault> {
    let mut table = columns::Builder::new(columns::CANDIDATES, candidates.len());
    for c in candidates {
        table.int(0, c.id);
        table.int(1, c.kind);
        table.int(2, c.cohort as i64);
        table.int(3, c.prefill as i64);
        table.int(4, c.bound);
        table.int(5, c.b_pad);
        table.int(6, c.width);
        table.ragged(7, &c.prefixes);
        table.float(8, c.expected);
        table.int(9, c.duration);
        table.float(10, c.value);
        table.int(11, c.budget);
    }
    table.finish("candidates")
}

/// The wide tables of a plan record other than lane_values, as typed columns.
struct Tables {
    eligible: Value,
    candidates: Value,
    pruned: Value,
    probes: Value,
}

/// The round a plan chose, as the record and the commit need it.
struct Chosen {
    kind: i64,
    cohort: usize,
    prefill: bool,
    prefixes: Vec<i64>,
    expected: f64,
    duration: i64,
    b_pad: i64,
    width: i64,
}

/// A plan that chooses nothing: no lane eligible and no prefill row waiting.
fn empty_record(plan: i64, now: i64, eligible: Value, credit: f64) -> Value {
    let empty = |types: &[columns::Col]| columns::table("", types, &[]).expect("an empty table");
    record(
        plan, now, eligible, -1, credit, empty(columns::CANDIDATES), empty(columns::PRUNED), -1,
        empty(columns::PROBES), -1, -1, credit, Value::Nil, empty(columns::LANE_VALUES),
    )
}

/// The plan record in the schema's key order.
#[allow(clippy::too_many_arguments)]
fn record(
    plan: i64,
    now: i64,
    eligible: Value,
    prefill: i64,
    credit_before: f64,
    candidates: Value,
    pruned: Value,
    winner: i64,
    probes: Value,
    probe: i64,
    refresh: i64,
    credit_after: f64,
    round: Value,
    lane_values: Value,
) -> Value {
    map(vec![
        ("t", str_value("plan")),
        ("plan", Value::Int(plan)),
        ("now", Value::Int(now)),
        ("eligible", eligible),
        ("prefill", Value::Int(prefill)),
        ("credit_before", Value::Float(credit_before)),
        ("candidates", candidates),
        ("pruned", pruned),
        ("winner", Value::Int(winner)),
        ("probes", probes),
        ("probe", Value::Int(probe)),
        ("refresh", Value::Int(refresh)),
        ("credit_after", Value::Float(credit_after)),
        ("round", round),
        ("lane_values", lane_values),
    ])
}
