//! Moving a slot and its work onto a worker thread, and reporting orphans.
//!
//! This module owns the job wrapper: run the work, catch a panic, record the
//! duration, release the slot when the work ends, and report an orphan's
//! failure exactly once. It must never release a slot before the work ends,
//! and never log the work's error message or values.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use tokio::sync::oneshot;

use super::{Job, RegistryWork, WorkError, WorkFuture};
use crate::pool::{PoolInner, Slot};

/// Starts `work` on the slot's pool with the slot moved into it.
pub(crate) fn offload<W: RegistryWork>(slot: Slot, work: W) -> WorkFuture<W::Output, W::Error> {
    let pool = Arc::clone(&slot.pool);
    offload_holding(&pool, slot, work)
}

/// Starts `work` on `pool`'s threads with `hold` (a slot, or a share of a
/// lease) moved into it and dropped when the work ends.
pub(crate) fn offload_holding<H, W>(
    pool: &Arc<PoolInner>,
    hold: H,
    work: W,
) -> WorkFuture<W::Output, W::Error>
where
    H: Send + 'static,
    W: RegistryWork,
{
    let (tx, rx) = oneshot::channel();
    let job: Job = Box::new({
        let pool = Arc::clone(pool);
        move || run(&pool, hold, work, tx)
    });
    // A closed pool gives the job back; dropping it releases the slot and
    // resolves the future with `Cancelled`.
    if let Err(job) = pool.workers.submit(job) {
        drop(job);
    }
    WorkFuture::new(rx)
}

type Sender<W> =
    oneshot::Sender<Result<<W as RegistryWork>::Output, WorkError<<W as RegistryWork>::Error>>>;

fn run<H, W: RegistryWork>(pool: &PoolInner, hold: H, work: W, tx: Sender<W>) {
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
    if tx.is_closed() {
        // Report before releasing, so anyone who sees the slot back also
        // sees the report.
        report_orphan(pool, &result);
        drop(hold);
        return;
    }
    drop(hold);
    if let Err(result) = tx.send(result) {
        report_orphan(pool, &result);
    }
}

/// Counts an orphan and reports its failure, once.
fn report_orphan<T, E>(pool: &PoolInner, result: &Result<T, WorkError<E>>) {
    pool.counters.orphaned.fetch_add(1, Relaxed);
    if let Err(err) = result {
        pool.counters.orphan_failures.fetch_add(1, Relaxed);
        tracing::warn!(
            pool = &*pool.name,
            class = err.class(),
            "orphaned work failed after its caller went away"
        );
    }
}
