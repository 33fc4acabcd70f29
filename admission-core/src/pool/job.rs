//! A piece of work on its way to a worker thread, with the capacity it holds.
//!
//! This module owns [`Job`]: run the work, catch a panic, record the
//! duration, hand the result *and the capacity* to whoever waits, and report
//! an orphan's failure exactly once. It must never release capacity before
//! the work ends, and never log the work's error message or values.
//!
//! The capacity travels with the result: when the caller is still there,
//! the [`WorkFuture`] drops it as it returns the result, so the caller sees
//! the slot back; when the caller has gone, the job reports the orphan first
//! and releases the capacity after, so whoever sees the slot back also sees
//! the report.
//!
//! The span travels with the work: the [`tracing::Span`] current when the
//! work was bound to its capacity is entered on the worker thread around
//! the work and the orphan's report, with the subscriber that span belongs
//! to as the thread's default, so events inside registry work (orphans
//! included) sit under the request's span, as tower's `Buffer` does for its
//! worker. With no subscriber the span is empty and nothing is entered.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::estimate::Clock;
use super::stats::Listeners;
use super::{Pool, RegistryWork, Slot, WorkError, WorkFuture};

/// What keeps the capacity of a piece of work held until it ends: it is
/// only ever dropped, never read.
#[derive(Debug)]
pub(crate) enum HeldCapacity {
    /// A slot of its own.
    Slot(Slot),
    /// A share of a slot held by others too (a request lease).
    Shared(#[expect(dead_code, reason = "held for its drop")] Arc<Slot>),
    /// Shares of a request lease's slot and of the slots a costlier route
    /// took on top of it (see `Lease`'s top-ups).
    SharedSeveral(#[expect(dead_code, reason = "held for its drop")] Vec<Arc<Slot>>),
}

/// A finished piece of work's result and the capacity it held.
pub(crate) type Delivery<T, E> = (Result<T, WorkError<E>>, HeldCapacity);

/// Work bound to a pool and to the capacity it holds, not yet started.
#[derive(Debug)]
pub(crate) struct Job<W> {
    pool: Pool,
    hold: HeldCapacity,
    work: W,
    /// The caller's span when the work was bound to its capacity.
    span: tracing::Span,
}

impl<W: RegistryWork> Job<W> {
    /// Binds `work` to `pool`'s threads with `hold` moved into it, under
    /// the caller's current span. A slot of its own is no longer held by
    /// the calling task once in a job.
    pub(crate) fn new(pool: Pool, mut hold: HeldCapacity, work: W) -> Self {
        if let HeldCapacity::Slot(slot) = &mut hold {
            slot.detach();
        }
        Job {
            pool,
            hold,
            work,
            span: tracing::Span::current(),
        }
    }

    /// Starts the job; the caller awaits the result through the future.
    pub(crate) fn spawn(self) -> WorkFuture<W::Output, W::Error> {
        let (tx, rx) = oneshot::channel();
        let pool = self.pool.clone();
        let listeners = Arc::new(Listeners::new());
        self.spawn_with(Arc::clone(&listeners), move |result, hold| {
            if tx.is_closed() {
                Err((result, hold))
            } else {
                tx.send((result, hold))
            }
        });
        WorkFuture::new(rx, pool, listeners)
    }

    /// Starts the job; when the work ends, `deliver` gets its result and the
    /// hold, or gives them back when nobody listens any more, and then the
    /// orphan is reported before the hold is released. `listeners` are the
    /// callers waiting for the result, told when the work ends.
    pub(crate) fn spawn_with<D>(self, listeners: Arc<Listeners>, deliver: D)
    where
        D: FnOnce(
                Result<W::Output, WorkError<W::Error>>,
                HeldCapacity,
            ) -> Result<(), Delivery<W::Output, W::Error>>
            + Send
            + 'static,
    {
        let pool = self.pool.clone();
        // Read here, on the runtime side: the worker thread has no clock
        // of the runtime's.
        let clock = Clock::current();
        let ended = Ended {
            pool: pool.clone(),
            listeners,
        };
        // A closed pool gives the job back; dropping it releases the hold,
        // ends the work for its listeners and drops the delivery (its
        // receivers see `Cancelled`).
        if let Err(job) = pool.submit(Box::new(move || {
            let span = self.span.clone();
            in_span(&span, || self.run(&clock, ended, deliver));
        })) {
            drop(job);
        }
    }

    fn run<D>(self, clock: &Clock, ended: Ended, deliver: D)
    where
        D: FnOnce(
            Result<W::Output, WorkError<W::Error>>,
            HeldCapacity,
        ) -> Result<(), Delivery<W::Output, W::Error>>,
    {
        let Job {
            pool, hold, work, ..
        } = self;
        let counters = pool.counters();
        counters.start();
        // The retry hint counts this work as running until it ends.
        let started = pool.work_times().started(clock);
        let result = match catch_unwind(AssertUnwindSafe(|| work.run())) {
            Ok(Ok(output)) => Ok(output),
            Ok(Err(err)) => Err(WorkError::Failed(err)),
            Err(payload) => {
                counters.count_panic();
                // The payload is a user value: it is neither logged nor kept.
                drop(payload);
                Err(WorkError::Panicked)
            }
        };
        let took = pool.work_times().finished(clock, started);
        // No longer a running orphan, before no longer running.
        drop(ended);
        counters.finish(took);
        if let Err((result, hold)) = deliver(result, hold) {
            report_orphan(&pool, &result, took);
            drop(hold);
        }
    }
}

/// Runs `f` inside `span`, with the subscriber the span belongs to as this
/// thread's default so that events inside `f` reach it too; runs `f` as is
/// when the span is empty (no subscriber, or one not interested).
fn in_span<R>(span: &tracing::Span, f: impl FnOnce() -> R) -> R {
    match span.with_subscriber(|(_, dispatch)| dispatch.clone()) {
        Some(dispatch) => tracing::dispatcher::with_default(&dispatch, || span.in_scope(f)),
        None => f(),
    }
}

/// Ends a piece of work for its listeners when dropped: once it ran, or
/// unrun when a closed pool drops the job.
struct Ended {
    pool: Pool,
    listeners: Arc<Listeners>,
}

impl Drop for Ended {
    fn drop(&mut self) {
        self.listeners.end(self.pool.counters());
    }
}

/// Counts an orphan and reports its failure, once: called either by the job
/// (the caller had gone) or by the dropped future (the result arrived but
/// was never taken), never both.
pub(crate) fn report_orphan<T, E>(pool: &Pool, result: &Result<T, WorkError<E>>, ran: Duration) {
    pool.counters().count_orphan(result.is_err(), ran);
    if let Err(err) = result {
        tracing::warn!(
            pool = pool.static_name(),
            class = err.log_class(),
            "orphaned work failed after its caller went away"
        );
    }
}
