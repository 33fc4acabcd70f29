//! The gates the harness puts in front of the same backend, and the ticket
//! an admitted request holds until it ends.
//!
//! This module owns [`Gate`] (what a run is asked to compare) and
//! [`Front`] (the gate a server runs: none, a counter under a fixed or a
//! Gradient2 limit, or this project's adaptive request class). It never
//! waits: a request over the limit is refused at once (`503`), and an
//! admitted one holds its ticket until its answer is written or its client
//! goes away.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use admission_core::{AdaptiveLimit, Class, Lease, RequestPools};
use tokio::time::Instant;

use super::gradient2::{Gradient2, Shared};

/// A gate the harness compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// A fixed limit of this many (the harness's sweep finds the best;
    /// in the capacity step it follows the capacity, as an oracle would).
    Fixed(usize),
    /// This project's adaptive request class.
    Adaptive,
    /// Netflix's Gradient2, written here.
    Gradient2,
    /// A real Envoy with its adaptive concurrency filter's gradient
    /// controller, in front of the backend with no gate of ours.
    Envoy,
}

impl Gate {
    /// The name in tables and plots.
    pub fn name(self) -> &'static str {
        match self {
            Gate::Fixed(_) => "best fixed",
            Gate::Adaptive => "admission adaptive",
            Gate::Gradient2 => "Gradient2",
            Gate::Envoy => "Envoy adaptive_concurrency",
        }
    }
}

/// The bounds every adaptive gate gets, so that they are compared alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The lowest limit.
    pub floor: usize,
    /// The highest limit.
    pub ceiling: usize,
    /// The limit each starts at.
    pub initial: usize,
    /// The clients' timeout.
    pub timeout: Duration,
}

/// The gate a server runs.
#[derive(Debug)]
pub(crate) enum Front {
    /// No gate (behind Envoy).
    Plain,
    /// A counter of requests in flight under a fixed or a Gradient2 limit.
    Counter {
        in_flight: AtomicUsize,
        limit: AtomicUsize,
        gradient: Option<Shared>,
    },
    /// This project's adaptive request class (the *work* class).
    Pools(RequestPools),
}

/// What an admitted request holds until it ends.
#[derive(Debug)]
pub(crate) enum Ticket {
    Plain,
    Counter {
        front: Arc<Front>,
        started: Instant,
        in_flight: usize,
    },
    Lease(#[allow(dead_code, reason = "held for its drop")] Lease),
}

impl Front {
    pub(crate) fn new(gate: Gate, bounds: Bounds) -> Result<Front, admission_core::ConfigError> {
        Ok(match gate {
            Gate::Envoy => Front::Plain,
            Gate::Fixed(limit) => Front::Counter {
                in_flight: AtomicUsize::new(0),
                limit: AtomicUsize::new(limit),
                gradient: None,
            },
            Gate::Gradient2 => Front::Counter {
                in_flight: AtomicUsize::new(0),
                limit: AtomicUsize::new(bounds.initial),
                gradient: Some(Shared::new(Gradient2::new(
                    bounds.floor,
                    bounds.ceiling,
                    bounds.initial,
                ))),
            },
            Gate::Adaptive => Front::Pools(
                RequestPools::builder()
                    .control(1)
                    .adaptive(
                        Class::Work,
                        AdaptiveLimit::new(bounds.floor, bounds.ceiling)
                            .initial(bounds.initial)
                            .timeout(bounds.timeout),
                    )
                    .build()?,
            ),
        })
    }

    /// Admits a request, or refuses it (`None`) at once.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Ticket> {
        match &**self {
            Front::Plain => Some(Ticket::Plain),
            Front::Pools(pools) => pools.try_lease(Class::Work).ok().map(Ticket::Lease),
            Front::Counter {
                in_flight, limit, ..
            } => {
                let mut now = in_flight.load(SeqCst);
                loop {
                    if now >= limit.load(SeqCst) {
                        return None;
                    }
                    match in_flight.compare_exchange(now, now + 1, SeqCst, SeqCst) {
                        Ok(_) => break,
                        Err(actual) => now = actual,
                    }
                }
                Some(Ticket::Counter {
                    front: Arc::clone(self),
                    started: Instant::now(),
                    in_flight: now + 1,
                })
            }
        }
    }

    /// The limit now (`None` behind Envoy: its own is read from its admin
    /// page).
    pub(crate) fn limit(&self) -> Option<usize> {
        match self {
            Front::Plain => None,
            Front::Counter { limit, .. } => Some(limit.load(SeqCst)),
            Front::Pools(pools) => Some(pools.pool(Class::Work).stats().limit),
        }
    }

    /// Moves a fixed limit (the oracle of the capacity step).
    pub(crate) fn set_fixed(&self, to: usize) {
        if let Front::Counter {
            limit,
            gradient: None,
            ..
        } = self
        {
            limit.store(to, SeqCst);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Ticket::Counter {
            front,
            started,
            in_flight: at_start,
        } = self
            && let Front::Counter {
                in_flight,
                limit,
                gradient,
            } = &**front
        {
            in_flight.fetch_sub(1, SeqCst);
            if let Some(gradient) = gradient {
                let rtt = started.elapsed();
                let new = gradient.with(|g| {
                    g.on_sample(rtt, *at_start);
                    g.limit()
                });
                limit.store(new, SeqCst);
            }
        }
    }
}
