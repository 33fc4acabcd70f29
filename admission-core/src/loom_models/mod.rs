//! loom models of the slot accounting, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p admission-core --release --lib loom`.
//!
//! Under `--cfg loom` the crate's own locks, atomics and threads (see
//! `crate::loom`) are loom's, so these models explore the interleavings of
//! the real worker queue, drain and their handoffs, and of the gate itself:
//! the permit word and its free list of slot numbers, the waiting line and
//! its wakers, and the holder table.
//! tokio's oneshot (still used for a work result) is not instrumented
//! (tokio swaps in loom only in its own tests): here it acts as an atomic
//! black box.

mod loom_close;
mod loom_cost;
mod loom_counts;
mod loom_estimator;
mod loom_evict;
mod loom_fair;
mod loom_flows;
mod loom_holders;
mod loom_limit;
mod loom_queue;
mod loom_reservation;
mod loom_shutdown;
mod loom_slots;
mod loom_waiter;

use std::sync::Arc;

use crate::loom::sync::atomic::{AtomicUsize, Ordering};

/// A gauge inside the work: how many run at once, and the most seen.
#[derive(Debug, Default)]
struct Gauge {
    running: AtomicUsize,
    peak: AtomicUsize,
}

impl Gauge {
    fn work(self: &Arc<Self>) -> impl FnOnce() -> Result<(), std::fmt::Error> + Send + 'static {
        let gauge = Arc::clone(self);
        move || {
            let now = gauge.running.fetch_add(1, Ordering::SeqCst) + 1;
            gauge.peak.fetch_max(now, Ordering::SeqCst);
            crate::loom::thread::yield_now();
            gauge.running.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// Takes every slot of `pool` by waiting (they come back when work ends)
/// and checks the books balance.
fn all_back(pool: &crate::Pool) {
    let slots: Vec<_> = (0..pool.capacity())
        .map(|_| loom::future::block_on(pool.admit()).expect("pool open"))
        .collect();
    drop(slots);
    let stats = pool.stats();
    assert_eq!(stats.in_use, 0, "every slot is back");
    assert_eq!(
        stats.admitted, stats.released,
        "each slot returned exactly once"
    );
}

/// Every slot's number is back on the free list of `permits`, once.
fn assert_all_free(permits: &crate::pool::permits::Permits, capacity: u32) {
    let mut free = permits.free_slots();
    free.sort_unstable();
    assert_eq!(
        free,
        (0..capacity).collect::<Vec<_>>(),
        "each number back on the free list exactly once"
    );
}
