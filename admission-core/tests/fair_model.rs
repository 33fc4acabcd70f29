//! Issue 39's property test: the real gate against a reference model of
//! max-min fair shares with costs. Random arrivals (three flows of random
//! weights asking fail-fast for random costs), releases of held slots, live
//! limit changes and the passing of asking windows (the paused clock) run
//! on a real pool with the slots held; after each step the gate's decision
//! (admitted, or refused with which code) must be the model's, and:
//!
//! * the pool never holds more than its capacity, in cost units, and holds
//!   exactly what the model says;
//! * no flow is admitted past its share while another active flow that
//!   asks (was refused, demand unmet) is under its own: an admitted flow
//!   was under its share before it took its slots (shares count cost), or
//!   nobody short was asking (the class lends what nobody short asks for).
//!
//! A second property puts flows in the line (`Admission::Wait`, cost 1)
//! beside fail-fast arrivals: after each release or raised limit, the
//! waiters served must be exactly those the model's fair order picks (the
//! waiting flow that would hold least for its weight once served, then the
//! one with fewest waiting, then the earliest in line; slots handed out by
//! the same release count), and a flow at its share is refused at the line
//! while another that asked is short, as a fail-fast caller is.

use std::num::NonZeroU8;
use std::time::Duration;

use admission_core::pool::Slot;
use admission_core::{Caller, Code, Pool};
use proptest::prelude::*;

const FLOWS: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    /// Flow `flow` asks, fail-fast, for `cost` slots.
    Arrive { flow: usize, cost: u8 },
    /// Flow `flow` lets go of its `nth` admission (modulo what it holds).
    Release { flow: usize, nth: usize },
    /// The pool's live limit moves to `limit` (modulo the capacity, + 1).
    Limit { limit: usize },
    /// Every asking window passes.
    Advance,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..FLOWS, 1..=3_u8).prop_map(|(flow, cost)| Step::Arrive { flow, cost }),
        3 => (0..FLOWS, 0..8_usize).prop_map(|(flow, nth)| Step::Release { flow, nth }),
        1 => (0..8_usize).prop_map(|limit| Step::Limit { limit }),
        1 => Just(Step::Advance),
    ]
}

/// The reference: what each flow holds (in cost units) and whether it asks.
#[derive(Debug, Default)]
struct Model {
    held: [u64; FLOWS],
    asking: [bool; FLOWS],
}

#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Admitted,
    Refused(Code),
}

impl Model {
    /// The model's decision for `flow` (weights `weights`) asking for
    /// `cost` slots of a pool whose limit is `limit`.
    fn decide(&self, flow: usize, cost: u64, limit: u64, weights: &[u64; FLOWS]) -> Decision {
        let active: Vec<usize> = (0..FLOWS)
            .filter(|&g| g == flow || self.held[g] > 0 || self.asking[g])
            .collect();
        let total: u64 = active.iter().map(|&g| weights[g]).sum();
        let under = |g: usize, extra: u64| (self.held[g] + extra) * total < limit * weights[g];
        let own_under = under(flow, cost - 1);
        let others = active.iter().filter(|&&g| g != flow);
        let short = others.clone().any(|&g| self.asking[g] && under(g, 0));
        let shared = others.count() > 0;
        if !own_under && short {
            return Decision::Refused(Code::FlowShare);
        }
        if self.held.iter().sum::<u64>() + cost <= limit {
            return Decision::Admitted;
        }
        Decision::Refused(if !own_under && shared {
            Code::FlowShare
        } else {
            Code::Saturated
        })
    }

    /// Whether `flow`, asking for `cost`, was under its share (before)
    /// or nobody short was asking: the fairness a admission must respect.
    fn fair_to_admit(&self, flow: usize, cost: u64, limit: u64, weights: &[u64; FLOWS]) -> bool {
        let active: Vec<usize> = (0..FLOWS)
            .filter(|&g| g == flow || self.held[g] > 0 || self.asking[g])
            .collect();
        let total: u64 = active.iter().map(|&g| weights[g]).sum();
        let share_times_total = |g: usize| limit * weights[g];
        let was_under = (self.held[flow] + cost - 1) * total < share_times_total(flow);
        let someone_short = active
            .iter()
            .any(|&g| g != flow && self.asking[g] && self.held[g] * total < share_times_total(g));
        was_under || !someone_short
    }
}

fn run(capacity: usize, weights: [u8; FLOWS], steps: Vec<Step>) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let pool = Pool::new("fair-model", capacity).unwrap();
        let callers: Vec<Caller> = (0..FLOWS)
            .map(|f| {
                Caller::default()
                    .with_flow(("tenant", f))
                    .with_weight(weights[f])
            })
            .collect();
        let weights = weights.map(u64::from);
        let mut model = Model::default();
        let mut limit = capacity as u64;
        let mut held: Vec<Vec<(Slot, u64)>> = (0..FLOWS).map(|_| Vec::new()).collect();
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::Arrive { flow, cost } => {
                    let cost = u64::from(cost).min(capacity as u64);
                    let expected = model.decide(flow, cost, limit, &weights);
                    let caller = callers[flow].with_cost(NonZeroU8::new(cost as u8).unwrap());
                    let got = match caller.scope_sync(|| pool.try_admit()) {
                        Ok(slot) => {
                            prop_assert!(
                                model.fair_to_admit(flow, cost, limit, &weights),
                                "step {n}: flow {flow} admitted past its share while another \
                                 flow asking is short: {model:?}"
                            );
                            held[flow].push((slot, cost));
                            model.held[flow] += cost;
                            model.asking[flow] = false;
                            Decision::Admitted
                        }
                        Err(refusal) => {
                            model.asking[flow] = true;
                            Decision::Refused(refusal.code())
                        }
                    };
                    prop_assert_eq!(
                        got,
                        expected,
                        "step {}: flow {} asking for {}",
                        n,
                        flow,
                        cost
                    );
                }
                Step::Release { flow, nth } => {
                    if !held[flow].is_empty() {
                        let at = nth % held[flow].len();
                        let (slot, cost) = held[flow].swap_remove(at);
                        drop(slot);
                        model.held[flow] -= cost;
                    }
                }
                Step::Limit { limit: to } => {
                    let to = to % capacity + 1;
                    pool.set_limit(to).unwrap();
                    limit = to as u64;
                }
                Step::Advance => {
                    tokio::time::advance(Duration::from_secs(60)).await;
                    model.asking = [false; FLOWS];
                }
            }
            let in_use = pool.stats().in_use as u64;
            let modelled: u64 = model.held.iter().sum();
            prop_assert!(in_use <= capacity as u64, "step {n}: {in_use} > {capacity}");
            prop_assert_eq!(
                in_use,
                modelled,
                "step {}: the pool holds what the model does",
                n
            );
        }
        drop(held);
        prop_assert_eq!(pool.stats().in_use, 0);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_gate_decides_as_the_fair_share_model(
        capacity in 2..=6_usize,
        weights in [1..=3_u8, 1..=3_u8, 1..=3_u8],
        steps in proptest::collection::vec(step(), 1..80),
    ) {
        run(capacity, weights, steps)?;
    }
}

/// A step of the line's model: fail-fast arrivals and releases as above,
/// and flows joining the line (`Admission::Wait`, cost 1).
#[derive(Debug, Clone)]
enum LineStep {
    Arrive { flow: usize, cost: u8 },
    Wait { flow: usize },
    Release { flow: usize, nth: usize },
    Limit { limit: usize },
}

fn line_step() -> impl Strategy<Value = LineStep> {
    prop_oneof![
        2 => (0..FLOWS, 1..=3_u8).prop_map(|(flow, cost)| LineStep::Arrive { flow, cost }),
        4 => (0..FLOWS).prop_map(|flow| LineStep::Wait { flow }),
        4 => (0..FLOWS, 0..8_usize).prop_map(|(flow, nth)| LineStep::Release { flow, nth }),
        1 => (0..8_usize).prop_map(|limit| LineStep::Limit { limit }),
    ]
}

type Waiting =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Slot, admission_core::Refusal>>>>;

/// The line's reference: slots that come back (or room a raised limit
/// makes) go, one at a time, to the waiting flow that would hold least for
/// its weight once served, then the one with fewest waiting, then the
/// earliest in line; a flow's earliest waiter is the one served.
fn fair_picks(
    model: &Model,
    line: &[(usize, usize)],
    free: u64,
    weights: &[u64; FLOWS],
) -> Vec<usize> {
    let mut line = line.to_vec();
    let mut granted = [0_u64; FLOWS];
    let mut picks = Vec::new();
    for _ in 0..free {
        let waiting =
            |f: usize, line: &[(usize, usize)]| line.iter().filter(|&&(_, g)| g == f).count();
        let rank = |f: usize| (model.held[f] + granted[f] + 1, weights[f]);
        let Some(best) = (0..line.len()).reduce(|best, i| {
            let ((held_a, weight_a), (held_b, weight_b)) = (rank(line[i].1), rank(line[best].1));
            let (a, b) = (held_a * weight_b, held_b * weight_a);
            if a < b || (a == b && waiting(line[i].1, &line) < waiting(line[best].1, &line)) {
                i
            } else {
                best
            }
        }) else {
            break;
        };
        let (id, flow) = line.remove(best);
        granted[flow] += 1;
        picks.push(id);
    }
    picks.sort_unstable();
    picks
}

fn run_line(
    capacity: usize,
    weights: [u8; FLOWS],
    steps: Vec<LineStep>,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    runtime.block_on(async move {
        let pool = Pool::new("fair-line", capacity).unwrap();
        let callers: Vec<Caller> = (0..FLOWS)
            .map(|f| {
                Caller::default()
                    .with_flow(("tenant", f))
                    .with_weight(weights[f])
            })
            .collect();
        let weights = weights.map(u64::from);
        let mut model = Model::default();
        let mut limit = capacity as u64;
        let mut held: Vec<Vec<(Slot, u64)>> = (0..FLOWS).map(|_| Vec::new()).collect();
        // Waiters in line, in join order: (id, flow) and their futures.
        let mut line: Vec<(usize, usize)> = Vec::new();
        let mut futures: Vec<(usize, usize, Waiting)> = Vec::new();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for (n, step) in steps.into_iter().enumerate() {
            let mut free = 0;
            match step {
                LineStep::Arrive { flow, cost } => {
                    let cost = u64::from(cost).min(capacity as u64);
                    let expected = model.decide(flow, cost, limit, &weights);
                    let caller = callers[flow].with_cost(NonZeroU8::new(cost as u8).unwrap());
                    let got = match caller.scope_sync(|| pool.try_admit()) {
                        Ok(slot) => {
                            held[flow].push((slot, cost));
                            model.held[flow] += cost;
                            model.asking[flow] = false;
                            Decision::Admitted
                        }
                        Err(refusal) => {
                            model.asking[flow] = true;
                            Decision::Refused(refusal.code())
                        }
                    };
                    prop_assert_eq!(
                        got,
                        expected,
                        "step {}: flow {} asking for {}",
                        n,
                        flow,
                        cost
                    );
                }
                LineStep::Wait { flow } => {
                    let expected = model.decide(flow, 1, limit, &weights);
                    let pool = pool.clone();
                    let mut future: Waiting =
                        Box::pin(callers[flow].scope(async move { pool.admit().await }));
                    match (future.as_mut().poll(&mut cx), expected) {
                        (std::task::Poll::Ready(Ok(slot)), Decision::Admitted) => {
                            held[flow].push((slot, 1));
                            model.held[flow] += 1;
                            model.asking[flow] = false;
                        }
                        (
                            std::task::Poll::Ready(Err(refusal)),
                            Decision::Refused(Code::FlowShare),
                        ) => {
                            prop_assert_eq!(refusal.code(), Code::FlowShare, "step {}", n);
                            model.asking[flow] = true;
                        }
                        (std::task::Poll::Pending, Decision::Refused(_)) => {
                            model.asking[flow] = true;
                            line.push((n, flow));
                            futures.push((n, flow, future));
                        }
                        (polled, expected) => {
                            prop_assert!(
                                false,
                                "step {n}: flow {flow} joining: {polled:?}, model {expected:?}"
                            );
                        }
                    }
                }
                LineStep::Release { flow, nth } => {
                    if !held[flow].is_empty() {
                        let at = nth % held[flow].len();
                        let (slot, cost) = held[flow].swap_remove(at);
                        drop(slot);
                        model.held[flow] -= cost;
                        free = 1;
                    }
                }
                LineStep::Limit { limit: to } => {
                    let to = to % capacity + 1;
                    pool.set_limit(to).unwrap();
                    limit = to as u64;
                    free = 1;
                }
            }
            if free > 0 {
                let room = limit.saturating_sub(model.held.iter().sum::<u64>());
                let expected = fair_picks(&model, &line, room, &weights);
                let mut served = Vec::new();
                let mut still = Vec::new();
                for (id, flow, mut future) in futures.drain(..) {
                    match future.as_mut().poll(&mut cx) {
                        std::task::Poll::Ready(Ok(slot)) => {
                            held[flow].push((slot, 1));
                            served.push((id, flow));
                        }
                        std::task::Poll::Ready(Err(refusal)) => {
                            prop_assert!(false, "step {n}: a waiter refused: {refusal}");
                        }
                        std::task::Poll::Pending => still.push((id, flow, future)),
                    }
                }
                futures = still;
                let mut ids: Vec<usize> = served.iter().map(|&(id, _)| id).collect();
                ids.sort_unstable();
                prop_assert_eq!(
                    &ids,
                    &expected,
                    "step {}: served in fair order, line {:?}, held {:?}",
                    n,
                    &line,
                    model.held
                );
                for (id, flow) in served {
                    model.held[flow] += 1;
                    model.asking[flow] = false;
                    line.retain(|&(waiter, _)| waiter != id);
                }
            }
            let in_use = pool.stats().in_use as u64;
            prop_assert!(in_use <= capacity as u64, "step {n}: {in_use} > {capacity}");
            prop_assert_eq!(in_use, model.held.iter().sum::<u64>(), "step {}", n);
        }
        drop(futures);
        drop(held);
        prop_assert_eq!(pool.stats().in_use, 0);
        prop_assert_eq!(pool.stats().waiting, 0);
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn waiting_flows_are_served_in_the_models_fair_order(
        capacity in 2..=5_usize,
        weights in [1..=3_u8, 1..=3_u8, 1..=3_u8],
        steps in proptest::collection::vec(line_step(), 1..60),
    ) {
        run_line(capacity, weights, steps)?;
    }
}
