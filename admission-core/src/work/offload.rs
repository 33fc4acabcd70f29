//! Moving a slot and its work onto a worker thread, and reporting orphans.
//!
//! This module owns the job wrapper: run the work, catch a panic, record the
//! duration, hand the result *and the slot* to the caller, and report an
//! orphan's failure exactly once. It must never release a slot before the
//! work ends, and never log the work's error message or values.
//!
//! The slot travels with the result: when the caller is still there, the
//! [`WorkFuture`] drops it as it returns the result, so the caller sees the
//! slot back; when the caller has gone, the job reports the orphan first and
//! releases the slot after, so whoever sees the slot back also sees the
//! report.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::oneshot;

use super::{Job, RegistryWork, WorkError, WorkFuture};
use crate::lease::Lease;
use crate::pool::{PoolInner, Slot};
use std::sync::atomic::Ordering::Relaxed;

/// What keeps the capacity of a piece of work held until it ends.
#[derive(Debug)]
pub(crate) enum Hold {
    /// A slot of its own.
    Slot(#[allow(dead_code)] Slot),
    /// A share of a request lease.
    Lease(#[allow(dead_code)] Lease),
}

/// A finished piece of work's result and the capacity it held.
pub(crate) type Delivery<T, E> = (Result<T, WorkError<E>>, Hold);

/// Starts `work` on the slot's pool with the slot moved into it.
pub(crate) fn offload<W: RegistryWork>(slot: Slot, work: W) -> WorkFuture<W::Output, W::Error> {
    let pool = Arc::clone(&slot.pool);
    offload_holding(pool, Hold::Slot(slot), work)
}

/// Starts `work` on `pool`'s threads with `hold` moved into it.
pub(crate) fn offload_holding<W: RegistryWork>(
    pool: Arc<PoolInner>,
    hold: Hold,
    work: W,
) -> WorkFuture<W::Output, W::Error> {
    let (tx, rx) = oneshot::channel();
    offload_to(&pool, hold, work, move |result, hold| {
        if tx.is_closed() {
            Err((result, hold))
        } else {
            tx.send((result, hold))
        }
    });
    WorkFuture::new(rx, pool)
}

/// Starts `work` on `pool`'s threads with `hold` moved into it; when the
/// work ends, `deliver` gets its result and the hold, or gives them back
/// when nobody is listening any more, and then the orphan is reported before
/// the hold is released.
pub(crate) fn offload_to<W, D>(pool: &Arc<PoolInner>, hold: Hold, work: W, deliver: D)
where
    W: RegistryWork,
    D: FnOnce(
            Result<W::Output, WorkError<W::Error>>,
            Hold,
        ) -> Result<(), Delivery<W::Output, W::Error>>
        + Send
        + 'static,
{
    let job: Job = Box::new({
        let pool = Arc::clone(pool);
        move || run(&pool, hold, work, deliver)
    });
    // A closed pool gives the job back; dropping it releases the hold and
    // drops the delivery (its receivers see `Cancelled`).
    if let Err(job) = pool.workers.submit(job) {
        drop(job);
    }
}

fn run<W, D>(pool: &PoolInner, hold: Hold, work: W, deliver: D)
where
    W: RegistryWork,
    D: FnOnce(
        Result<W::Output, WorkError<W::Error>>,
        Hold,
    ) -> Result<(), Delivery<W::Output, W::Error>>,
{
    pool.counters.start();
    let started = Instant::now();
    let result = match catch_unwind(AssertUnwindSafe(|| work.run())) {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(err)) => Err(WorkError::Failed(err)),
        Err(payload) => {
            pool.counters.panicked.fetch_add(1, Relaxed);
            // The payload is a user value: it is neither logged nor kept.
            drop(payload);
            Err(WorkError::Panicked)
        }
    };
    pool.counters.finish(started.elapsed());
    if let Err((result, hold)) = deliver(result, hold) {
        report_orphan(pool, &result);
        drop(hold);
    }
}

/// Counts an orphan and reports its failure, once: called either by the job
/// (the caller had gone) or by the dropped future (the result arrived but
/// was never taken), never both.
pub(crate) fn report_orphan<T, E>(pool: &PoolInner, result: &Result<T, WorkError<E>>) {
    pool.counters.orphaned.fetch_add(1, Relaxed);
    if let Err(err) = result {
        pool.counters.orphan_failures.fetch_add(1, Relaxed);
        tracing::warn!(
            pool = pool.name,
            class = err.class(),
            "orphaned work failed after its caller went away"
        );
    }
}
