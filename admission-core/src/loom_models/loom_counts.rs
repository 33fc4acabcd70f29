//! (h) The books: a waiter cancelled as the only slot is handed to it, a
//! waiter served, and a fail-fast caller, all racing one release. Every
//! event is counted once: `admitted` equals the slots the callers actually
//! got, `released` the slots they returned, `refused` the refusals they
//! were given, and `admitted == released + in_use` throughout (a slot
//! handed to a waiter that left counts as neither).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::Pool;
use crate::loom::sync::atomic::{AtomicU64, Ordering};

#[test]
fn every_admission_release_and_refusal_is_counted_exactly_once() {
    loom::model(|| {
        let pool = Pool::new("loom-counts", 1).unwrap();
        let held = pool.try_admit().unwrap();
        // What the callers saw: slots got and refusals given.
        let got = Arc::new(AtomicU64::new(1));
        let refusals = Arc::new(AtomicU64::new(0));

        let cancelled = loom::thread::spawn({
            let (pool, got) = (pool.clone(), Arc::clone(&got));
            move || {
                let mut admit = pin!(pool.admit());
                let polled = admit.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                if let Poll::Ready(Ok(slot)) = polled {
                    got.fetch_add(1, Ordering::SeqCst);
                    drop(slot);
                }
                // Otherwise queued, and cancelled here: maybe as the slot
                // was handed to it.
            }
        });
        let served = loom::thread::spawn({
            let (pool, got) = (pool.clone(), Arc::clone(&got));
            move || {
                let slot = loom::future::block_on(pool.admit()).expect("pool open");
                got.fetch_add(1, Ordering::SeqCst);
                drop(slot);
            }
        });
        drop(held);
        match pool.try_admit() {
            Ok(slot) => {
                got.fetch_add(1, Ordering::SeqCst);
                drop(slot);
            }
            Err(_) => {
                refusals.fetch_add(1, Ordering::SeqCst);
            }
        }
        cancelled.join().unwrap();
        served.join().unwrap();

        let stats = pool.stats();
        let got = got.load(Ordering::SeqCst);
        assert_eq!(stats.in_use, 0, "every slot back");
        assert_eq!(stats.admitted, got, "admitted counts the slots callers got");
        assert_eq!(
            stats.released, got,
            "released counts the slots they returned"
        );
        assert_eq!(stats.admitted, stats.released + stats.in_use as u64);
        assert_eq!(
            stats.refused,
            refusals.load(Ordering::SeqCst),
            "refused counts the refusals given"
        );
        assert_eq!(stats.reentrant, 0);
    });
}
