//! What a shutdown did, per pool.
//!
//! This module owns the report types. They must never hold anything but
//! names and counts.

use std::fmt;
use std::time::Duration;

/// How one pool ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every worker thread stopped before the deadline.
    Drained,
    /// The deadline passed with worker threads still alive; `running` pieces
    /// of work were still running. Threads cannot be killed: the process exit
    /// is the fallback.
    Abandoned {
        /// Work still running at the deadline.
        running: usize,
    },
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Drained => f.write_str("drained"),
            Outcome::Abandoned { running } => write!(f, "abandoned ({running} running)"),
        }
    }
}

/// What became of a pool's post-drain cleanup hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cleanup {
    /// Hooks that ran to their end.
    pub ran: usize,
    /// Hooks that panicked (each reported; the rest still ran).
    pub panicked: usize,
    /// Hooks never run because the pool was abandoned.
    pub skipped: usize,
    /// Hooks still running at the deadline.
    pub unfinished: usize,
}

/// One pool's part of a shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolReport {
    /// The pool's name.
    pub pool: String,
    /// Drained or abandoned.
    pub outcome: Outcome,
    /// Work that was queued but not started, and was cancelled.
    pub cancelled: usize,
    /// The cleanup hooks' fate.
    pub cleanup: Cleanup,
}

/// The outcome of a shutdown; every call of
/// [`Shutdown::shutdown`](crate::Shutdown::shutdown) returns the same one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// One entry per registered pool, in registration order.
    pub pools: Vec<PoolReport>,
    /// Lifespan loops that stopped when told.
    pub loops_stopped: usize,
    /// Lifespan loops aborted at the deadline.
    pub loops_aborted: usize,
    /// Whether the deadline had already passed when shutdown began.
    pub deadline_already_passed: bool,
    /// How long the shutdown took.
    pub elapsed: Duration,
}

impl ShutdownReport {
    /// Whether every pool drained.
    pub fn drained(&self) -> bool {
        self.pools.iter().all(|p| p.outcome == Outcome::Drained)
    }

    /// Work still running in abandoned pools, summed.
    pub fn abandoned_running(&self) -> usize {
        self.pools
            .iter()
            .map(|p| match p.outcome {
                Outcome::Drained => 0,
                Outcome::Abandoned { running } => running,
            })
            .sum()
    }
}
