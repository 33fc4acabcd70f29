//! (k) The holder table without a compare-and-swap: each slot taken gets
//! a number no other slot in use has (off the free list the permit word
//! heads, by the swap that takes the slot), so recording its holder is a
//! plain store to an entry no one else writes. Callers taking and
//! returning slots at once, on the fail-fast path and through a waiter's
//! handoff, are each named for exactly the slots they hold, and every
//! number comes back to the free list once.

use super::assert_all_free;
use crate::Pool;

/// Each caller holding one slot is named for it, once.
fn named_once(pool: &Pool) {
    let (mine, _) = pool.holders().held();
    assert_eq!(mine, 1, "the table names the holder of each slot it holds");
}

/// Every slot and every number back, and no one named.
fn all_back(pool: &Pool, capacity: u32) {
    assert_eq!(pool.stats().in_use, 0, "every slot is back");
    assert_eq!(pool.holders().held(), (0, 0), "no one is named any more");
    assert_all_free(pool.permits(), capacity);
}

#[test]
fn fail_fast_callers_taking_and_returning_at_once_are_each_named_for_their_slot() {
    loom::model(|| {
        let pool = Pool::new("loom-holders", 2).unwrap();
        let held = pool.try_admit().unwrap();
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let pool = pool.clone();
                loom::thread::spawn(move || {
                    if let Ok(slot) = pool.try_admit() {
                        named_once(&pool);
                        drop(slot);
                    }
                })
            })
            .collect();
        named_once(&pool);
        drop(held);
        for caller in callers {
            caller.join().unwrap();
        }
        all_back(&pool, 2);
    });
}

#[test]
fn a_slot_handed_to_a_waiter_names_the_waiter_not_the_releaser() {
    loom::model(|| {
        let pool = Pool::new("loom-holders-handoff", 1).unwrap();
        let held = pool.try_admit().unwrap();
        let waiter = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                let slot = loom::future::block_on(pool.admit()).expect("pool open");
                named_once(&pool);
                drop(slot);
            }
        });
        let fail_fast = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                if let Ok(slot) = pool.try_admit() {
                    named_once(&pool);
                    drop(slot);
                }
            }
        });
        named_once(&pool);
        drop(held);
        waiter.join().unwrap();
        fail_fast.join().unwrap();
        all_back(&pool, 1);
    });
}
