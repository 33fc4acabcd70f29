//! (n) A waiter of cost 2 on a pool of 2 whose slots come back one by one,
//! racing a fail-fast caller of cost 1: never more than 2 slots in use
//! (the waiter's two counted whole), the waiter is served (the slot that
//! came back first was set aside for it, or the fail-fast caller's went on
//! to it), and every slot, number and count comes back: seen failing with
//! a waiter served while its cost does not fit beside the others
//! (`others + cost <= limit + 1`: 3 slots in use), and with the slots set
//! aside left out of the transit count (the books then fail).

use std::num::NonZeroU8;

use super::assert_all_free;
use crate::{Caller, Pool};

#[test]
fn a_costly_waiter_racing_releases_and_a_fail_fast_caller() {
    loom::model(|| {
        let pool = Pool::new("loom-cost", 2).unwrap();
        let (a, b) = (pool.try_admit().unwrap(), pool.try_admit().unwrap());
        let waiter = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                let two = Caller::default().with_cost(NonZeroU8::new(2).unwrap());
                let slot = loom::future::block_on(two.scope(pool.admit())).expect("served");
                assert!(pool.stats().in_use <= 2, "never more than the capacity");
                drop(slot);
            }
        });
        let fail_fast = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                if let Ok(slot) = pool.try_admit() {
                    assert!(pool.stats().in_use <= 2, "never more than the capacity");
                    drop(slot);
                }
            }
        });
        drop(a);
        drop(b);
        fail_fast.join().unwrap();
        waiter.join().unwrap();
        let stats = pool.stats();
        assert_eq!(stats.in_use, 0, "every slot is back");
        assert_eq!(stats.admitted, stats.released, "each returned once");
        assert_all_free(pool.permits(), 2);
    });
}
