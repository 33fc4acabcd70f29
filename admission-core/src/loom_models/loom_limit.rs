//! (j) A class's limit changed at run time (an adaptive class) racing
//! admissions: a higher limit hands its room to a waiter or a fail-fast
//! caller, never to both past the limit, and never leaves a waiter in line
//! beside a free slot; a lower one revokes nothing, and no caller that
//! starts after it is admitted over it.

use std::future::poll_fn;
use std::sync::Arc;

use super::assert_all_free;
use crate::caller::Criticality;
use crate::loom::sync::atomic::{AtomicBool, Ordering::SeqCst};
use crate::pool::permits::{Enqueued, Patience, Permits};

const LEVEL: Criticality = Criticality::Default;

#[test]
fn a_higher_limit_racing_a_waiter_and_a_fail_fast_caller() {
    loom::model(|| {
        let permits = Arc::new(Permits::new(2, [1, 1, 1], 4));
        let first = permits.try_acquire(LEVEL).unwrap();

        let waiter = loom::thread::spawn({
            let permits = Arc::clone(&permits);
            move || {
                let times = (std::time::Duration::ZERO, std::time::Duration::ZERO);
                let id = match permits.enqueue(LEVEL, Patience::Patient, times, false) {
                    Enqueued::Acquired(id) => id,
                    Enqueued::Waiting(ticket) => {
                        loom::future::block_on(poll_fn(|cx| permits.poll_wait(ticket.key, cx)))
                            .expect("the pool stays open")
                    }
                    other => panic!("a patient waiter of an open pool: {other:?}"),
                };
                assert!(permits.in_use() <= 2, "never more in use than the limit");
                assert_ne!(id, first, "a slot in use has a number no other has");
                permits.release(id);
            }
        });
        let fail_fast = loom::thread::spawn({
            let permits = Arc::clone(&permits);
            move || {
                if let Ok(id) = permits.try_acquire(LEVEL) {
                    assert!(permits.in_use() <= 2, "never more in use than the limit");
                    assert_ne!(id, first, "a slot in use has a number no other has");
                    permits.release(id);
                }
            }
        });
        permits.set_limits([2, 2, 2]);
        // The waiter is served while the first slot is still held: by the
        // higher limit, or by the fail-fast caller's return.
        waiter.join().unwrap();
        fail_fast.join().unwrap();
        permits.release(first);

        let books = permits.slot_counts();
        assert_eq!(books.in_use, 0, "every slot is back");
        assert_eq!(books.admitted, books.released, "each returned once");
        assert_all_free(&permits, 2);
    });
}

#[test]
fn a_lower_limit_racing_a_release_and_a_fail_fast_caller() {
    loom::model(|| {
        let permits = Arc::new(Permits::new(3, [3, 3, 3], 4));
        let first = permits.try_acquire(LEVEL).unwrap();
        let second = permits.try_acquire(LEVEL).unwrap();
        let lowered = Arc::new(AtomicBool::new(false));

        let caller = loom::thread::spawn({
            let (permits, lowered) = (Arc::clone(&permits), Arc::clone(&lowered));
            move || {
                let after = lowered.load(SeqCst);
                let taken = permits.try_acquire(LEVEL);
                let admitted = taken.is_ok();
                if let Ok(id) = taken {
                    permits.release(id);
                }
                assert!(
                    !(after && admitted),
                    "admitted over a lower limit stored before it started"
                );
            }
        });
        let returning = loom::thread::spawn({
            let permits = Arc::clone(&permits);
            move || permits.release(second)
        });
        permits.set_limits([1, 1, 1]);
        lowered.store(true, SeqCst);
        assert!(permits.in_use() >= 1, "a lower limit revokes nothing");
        caller.join().unwrap();
        returning.join().unwrap();
        permits.release(first);

        let books = permits.slot_counts();
        assert_eq!(books.in_use, 0, "every slot is back");
        assert_eq!(books.admitted, books.released, "each returned once");
        assert_all_free(&permits, 3);
    });
}
