//! Draining one pool off the runtime.
//!
//! This module owns the drain of a single pool: close its gate, cancel its
//! queued work, join its threads on a coordinator thread of its own, and run
//! its cleanup hooks there once the threads have stopped. It must never join
//! a thread on a runtime thread, and never run cleanup for a pool it
//! abandoned.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use crate::loom::sync::atomic::{AtomicU8, Ordering};
use crate::loom::thread;

use tokio::sync::oneshot;
use tokio::time::Instant;

use super::report::{Cleanup, Outcome, PoolReport};
use crate::pool::Pool;

/// A post-drain cleanup hook.
pub(crate) type Hook = Box<dyn FnOnce() + Send + 'static>;

const DRAINING: u8 = 0;
const DRAINED: u8 = 1;
const ABANDONED: u8 = 2;

/// A drain under way; [`Drain::finish`] waits for it until the deadline.
pub(crate) struct Drain {
    pool: Pool,
    cancelled: usize,
    hooks: usize,
    state: Arc<AtomicU8>,
    done: Option<oneshot::Receiver<Cleanup>>,
    /// The coordinator thread; detached in production, joined by the loom
    /// models.
    coordinator: Option<thread::JoinHandle<()>>,
}

/// Closes `pool`, cancels its queued work and starts joining its threads.
pub(crate) fn start(pool: Pool, hooks: Vec<Hook>) -> Drain {
    let closed = pool.close();
    let (cancelled, threads) = (closed.cancelled, closed.threads);
    let hook_count = hooks.len();
    let state = Arc::new(AtomicU8::new(DRAINING));
    let (tx, rx) = oneshot::channel();
    let spawned = thread::Builder::new()
        .name(format!("admission-drain-{}", pool.name()))
        .spawn({
            let state = Arc::clone(&state);
            let name = pool.name().to_owned();
            move || {
                for thread in threads {
                    // A worker thread never panics out of its loop; a join
                    // error would only mean it did, and it is gone either way.
                    drop(thread.join());
                }
                if state
                    .compare_exchange(DRAINING, DRAINED, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    let _ = tx.send(run_hooks(&name, hooks));
                }
            }
        });
    let (done, coordinator) = match spawned {
        Ok(handle) => (Some(rx), Some(handle)),
        Err(err) => {
            tracing::error!(
                pool = pool.name(),
                class = ?err.kind(),
                "could not start a drain thread; the pool is abandoned"
            );
            (None, None)
        }
    };
    Drain {
        pool,
        cancelled,
        hooks: hook_count,
        state,
        done,
        coordinator,
    }
}

fn run_hooks(pool: &str, hooks: Vec<Hook>) -> Cleanup {
    let mut cleanup = Cleanup::default();
    for hook in hooks {
        match catch_unwind(AssertUnwindSafe(hook)) {
            Ok(()) => cleanup.ran += 1,
            Err(payload) => {
                drop(payload);
                cleanup.panicked += 1;
                tracing::error!(pool, class = "panic", "post-drain cleanup hook panicked");
            }
        }
    }
    cleanup
}

impl Drain {
    /// Waits for the drain until `deadline` and reports it.
    pub(crate) async fn finish(self, deadline: Instant) -> PoolReport {
        let Drain {
            pool,
            cancelled,
            hooks,
            state,
            done,
            coordinator,
        } = self;
        // Detach: a coordinator stuck joining a blocked worker must not hold
        // up the shutdown.
        drop(coordinator);
        let waited = match done {
            Some(done) => tokio::time::timeout_at(deadline, done).await.ok(),
            None => None,
        };
        let (outcome, cleanup) = match waited {
            Some(Ok(cleanup)) => (Outcome::Drained, cleanup),
            // No answer by the deadline (or no coordinator thread at all).
            Some(Err(_)) | None => at_deadline(&pool, &state, hooks),
        };
        let name = pool.name();
        match outcome {
            Outcome::Drained => tracing::info!(pool = name, cancelled, "drained"),
            Outcome::Abandoned { running } => tracing::warn!(
                pool = name,
                running,
                cancelled,
                "abandoned: work still running at the shutdown deadline; \
                 process exit is the fallback"
            ),
        }
        PoolReport::new(name.to_owned(), outcome, cancelled, cleanup)
    }
}

/// The deadline passed: claim the pool as abandoned unless its threads
/// stopped at that very moment.
fn at_deadline(pool: &Pool, state: &AtomicU8, hooks: usize) -> (Outcome, Cleanup) {
    let running = pool.stats().running;
    match state.compare_exchange(DRAINING, ABANDONED, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => (
            Outcome::Abandoned { running },
            Cleanup {
                skipped: hooks,
                ..Cleanup::default()
            },
        ),
        // The threads stopped; the hooks are still running.
        Err(_) => (
            Outcome::Drained,
            Cleanup {
                unfinished: hooks,
                ..Cleanup::default()
            },
        ),
    }
}

#[cfg(loom)]
impl Drain {
    /// The deadline passes now (for the loom models, which have no clock).
    pub(crate) fn expire(&self) -> (Outcome, Cleanup) {
        at_deadline(&self.pool, &self.state, self.hooks)
    }

    /// Joins the coordinator thread and returns what it sent, if it claimed
    /// the pool as drained.
    pub(crate) fn join(&mut self) -> Option<Cleanup> {
        if let Some(coordinator) = self.coordinator.take() {
            coordinator
                .join()
                .expect("the coordinator thread does not panic");
        }
        self.done.as_mut().and_then(|done| done.try_recv().ok())
    }
}
