//! (e) Releases racing a waiter that joins the line while its criticality's
//! share is full: the waiter is served once its share has room, a slot is
//! never lost between the release and the line, and no more slots are in
//! use than the capacity.

use crate::{Caller, Criticality, Pool};

#[test]
fn a_sheddable_waiter_joining_as_slots_are_released_is_served_once_there_is_room() {
    loom::model(|| {
        // Two slots: sheddable work may use one.
        let pool = Pool::new("loom-queue", 2).unwrap();
        let first = pool.try_admit().unwrap();
        let second = pool.try_admit().unwrap();

        let shed = loom::thread::spawn({
            let pool = pool.clone();
            move || {
                Caller::new(Criticality::Sheddable).scope_sync(|| {
                    let slot = loom::future::block_on(pool.admit()).expect("pool open");
                    assert!(pool.stats().in_use <= 1, "its share was respected");
                    drop(slot);
                });
            }
        });
        drop(first);
        // A critical caller takes the freed slot if the waiter has not.
        let critical = Caller::new(Criticality::Critical).scope_sync(|| pool.try_admit());
        drop(second);
        drop(critical);
        shed.join().unwrap();

        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.waiting), (0, 0), "every slot back");
        assert_eq!(stats.admitted, stats.released);
        assert!(pool.try_admit().is_ok());
    });
}
