//! (f) Close racing a fail-fast caller, a waiter and the release that would
//! hand the waiter its slot: once `close` has returned no slot is granted
//! by any path. `released + in_use` (the slots taken by callers plus those
//! handed to a waiter not yet taken) rises only when a slot is granted, a
//! fail-fast admission or a handoff, so a grant after close would leave it
//! above what the closer saw as close returned.

use std::sync::Arc;

use crate::Pool;
use crate::loom::sync::atomic::{AtomicU64, Ordering};

#[test]
fn no_slot_is_granted_once_close_has_returned() {
    loom::model(|| {
        let pool = Pool::new("loom-close", 1).unwrap();
        let held = pool.try_admit().unwrap();
        let seen = Arc::new(AtomicU64::new(u64::MAX));

        let waiter = loom::thread::spawn({
            let pool = pool.clone();
            // Waits in line (or is refused at once once closed); keeps what
            // it got until the books are read.
            move || loom::future::block_on(pool.admit())
        });
        let closer = loom::thread::spawn({
            let (pool, seen) = (pool.clone(), Arc::clone(&seen));
            move || {
                drop(pool.close());
                let stats = pool.stats();
                seen.store(stats.released + stats.in_use as u64, Ordering::SeqCst);
            }
        });
        // The release: to the waiter, or back to the pool.
        drop(held);
        // A fail-fast caller: admitted only before the close.
        let fail_fast = pool.try_admit();
        let waited = waiter.join().unwrap();
        closer.join().unwrap();

        let seen = seen.load(Ordering::SeqCst);
        let stats = pool.stats();
        let granted = stats.released + stats.in_use as u64;
        assert!(
            granted <= seen,
            "a slot was granted after close returned: {granted} granted, {seen} when it returned"
        );
        assert!(pool.try_admit().is_err(), "a closed pool refuses");
        if let Err(refused) = &waited {
            assert_eq!(refused.code(), crate::Code::ShuttingDown);
        }
        if let Err(refused) = &fail_fast {
            // Saturated when the waiter had the slot before the close.
            assert!(matches!(
                refused.code(),
                crate::Code::ShuttingDown | crate::Code::Saturated
            ));
        }
        drop((fail_fast, waited));
        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.waiting), (0, 0), "every slot back");
    });
}
