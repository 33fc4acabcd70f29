//! (g) Criticality shares and eviction, on the line itself: a two-slot
//! line where sheddable callers may fill one slot and the queue holds one
//! caller. A sheddable caller queues; a critical caller arriving at the
//! full queue refuses it (its oldest less critical caller) and takes its
//! place, whatever the releases do meanwhile. The critical caller is never
//! refused, the sheddable one is served or displaced (never both, never
//! lost), it is served only while its share has room, and every slot comes
//! back.

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use crate::Criticality;
use crate::loom::sync::atomic::{AtomicUsize, Ordering};
use crate::pool::permits::{Enqueued, Patience, Permits, Shed, SlotId};

/// Queues a caller of `level` and waits for its answer; `Ok` when it holds
/// a slot.
fn queue(permits: &Permits, level: Criticality) -> Result<SlotId, Option<Shed>> {
    let times = (Duration::from_secs(60), Duration::from_secs(60));
    match permits.enqueue(level, Patience::Queued, times, false) {
        Enqueued::Acquired(id) => Ok(id),
        Enqueued::Full | Enqueued::Closed => Err(None),
        Enqueued::Waiting(ticket) => {
            loom::future::block_on(poll_fn(|cx| permits.poll_wait(ticket.key, cx))).map_err(Some)
        }
    }
}

#[test]
fn a_critical_caller_at_a_full_queue_displaces_the_oldest_sheddable_one() {
    loom::model(|| {
        // Two slots, sheddable work may fill one; the queue holds one.
        let permits = Arc::new(Permits::new(2, [2, 2, 1], 1));
        let first = [
            permits.try_acquire(Criticality::Critical).unwrap(),
            permits.try_acquire(Criticality::Critical).unwrap(),
        ];
        // The slots the first holder still holds, lowered before each
        // release: while it reads above zero, that holder has a slot.
        let first_holds = Arc::new(AtomicUsize::new(2));

        // The sheddable caller is in the queue before the critical one
        // arrives: its share is full.
        let times = (Duration::from_secs(60), Duration::from_secs(60));
        let Enqueued::Waiting(ticket) =
            permits.enqueue(Criticality::Sheddable, Patience::Queued, times, false)
        else {
            panic!("the sheddable share is full: the caller queues");
        };
        let sheddable = loom::thread::spawn({
            let (permits, first_holds) = (Arc::clone(&permits), Arc::clone(&first_holds));
            move || {
                let answer =
                    loom::future::block_on(poll_fn(|cx| permits.poll_wait(ticket.key, cx)));
                if let Ok(id) = answer {
                    // Its share is one slot: it was served only once no
                    // other slot was in use, so the first holder had let
                    // go of both.
                    assert_eq!(
                        first_holds.load(Ordering::SeqCst),
                        0,
                        "a sheddable caller served beyond its share"
                    );
                    permits.release(id);
                }
                answer.map(drop)
            }
        });
        let critical = loom::thread::spawn({
            let permits = Arc::clone(&permits);
            move || {
                let answer = queue(&permits, Criticality::Critical);
                if let Ok(id) = answer {
                    permits.release(id);
                }
                answer.map(drop)
            }
        });
        for id in first {
            first_holds.fetch_sub(1, Ordering::SeqCst);
            permits.release(id);
        }
        let shed = sheddable.join().unwrap();
        let crit = critical.join().unwrap();

        assert_eq!(crit, Ok(()), "a critical caller is never refused here");
        assert!(
            matches!(shed, Ok(()) | Err(Shed::Displaced)),
            "the sheddable caller is served or displaced, nothing else: {shed:?}"
        );
        assert_eq!(permits.in_use(), 0, "every slot back");
        assert_eq!(permits.waiting(), 0, "no one left in line");
        for _ in 0..2 {
            permits.try_acquire(Criticality::Critical).unwrap();
        }
    });
}
