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
