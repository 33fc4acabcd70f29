//! What a shutdown did, per pool.
//!
//! This module owns the report types. They must never hold anything but
//! names and counts.

use std::time::Duration;

/// How one pool ended (the drain's own record; a report flattens it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every worker thread stopped before the deadline.
    Drained,
    /// The deadline passed with worker threads still alive; `running` pieces
    /// of work were still running.
    Abandoned { running: usize },
}

/// What became of a pool's post-drain cleanup hooks (the drain's own
/// record; a report flattens it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Cleanup {
    pub(crate) ran: usize,
    pub(crate) panicked: usize,
    pub(crate) skipped: usize,
    pub(crate) unfinished: usize,
}

/// One pool's part of a shutdown.
///
/// ```
/// use std::time::Duration;
/// use admission_core::{Pool, Shutdown};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = Pool::new("walks", 1)?;
/// let shutdown = Shutdown::new(Duration::from_secs(1))?;
/// shutdown.register(&pool);
/// let report = shutdown.shutdown().await;
/// let walks = &report.pools[0];
/// assert!(walks.drained);
/// assert_eq!((walks.running_at_deadline, walks.cancelled), (0, 0));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolReport {
    /// The pool's name.
    pub pool: String,
    /// Whether every worker thread stopped before the deadline. When not,
    /// the pool was abandoned: threads cannot be killed, and the process
    /// exit is the fallback.
    pub drained: bool,
    /// Work still running at the deadline (0 when the pool drained).
    pub running_at_deadline: usize,
    /// Work that was queued but not started, and was cancelled.
    pub cancelled: usize,
    /// Cleanup hooks that ran to their end.
    pub cleanups_ran: usize,
    /// Cleanup hooks that panicked (each reported; the rest still ran).
    pub cleanups_panicked: usize,
    /// Cleanup hooks never run because the pool was abandoned.
    pub cleanups_skipped: usize,
    /// Cleanup hooks still running at the deadline.
    pub cleanups_unfinished: usize,
}

impl PoolReport {
    pub(crate) fn new(pool: String, outcome: Outcome, cancelled: usize, cleanup: Cleanup) -> Self {
        let (drained, running_at_deadline) = match outcome {
            Outcome::Drained => (true, 0),
            Outcome::Abandoned { running } => (false, running),
        };
        PoolReport {
            pool,
            drained,
            running_at_deadline,
            cancelled,
            cleanups_ran: cleanup.ran,
            cleanups_panicked: cleanup.panicked,
            cleanups_skipped: cleanup.skipped,
            cleanups_unfinished: cleanup.unfinished,
        }
    }
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
        self.pools.iter().all(|p| p.drained)
    }

    /// Work still running in abandoned pools, summed.
    pub fn abandoned_running(&self) -> usize {
        self.pools.iter().map(|p| p.running_at_deadline).sum()
    }
}
