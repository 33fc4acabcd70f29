//! (b) A waiter cancelled at the moment a slot is released: the slot goes to
//! the next waiter or back to the pool, never lost.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Waker};

use crate::Pool;

#[test]
fn a_waiter_cancelled_as_the_slot_is_released_loses_nothing() {
    loom::model(|| {
        let pool = Pool::new("loom-waiter", 1).unwrap();
        let held = pool.try_admit().unwrap();

        let cancelled = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                let mut admit = pin!(pool.admit());
                let polled = admit.as_mut().poll(&mut Context::from_waker(Waker::noop()));
                // Admitted on the first poll, or queued and then cancelled.
                drop(polled);
            }
        });
        let next = loom::thread::spawn({
            let pool = pool.clone();
            move || drop(loom::future::block_on(pool.admit()).expect("pool open"))
        });
        drop(held);
        cancelled.join().unwrap();
        next.join().unwrap();

        assert_eq!(pool.stats().in_use, 0, "the slot is back in the pool");
        assert!(pool.try_admit().is_ok(), "and can be taken again");
    });
}
