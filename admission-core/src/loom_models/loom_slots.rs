//! (a) Two admitted callers and a third fail-fast caller, with one awaiting
//! future dropped mid-work: never more than N running, every slot back
//! exactly once.

use std::sync::Arc;

use super::{Gauge, all_back};
use crate::Pool;

#[test]
fn two_admitted_one_orphaned_and_a_third_fail_fast_caller() {
    loom::model(|| {
        let pool = Pool::new("loom-slots", 2).unwrap();
        let gauge = Arc::new(Gauge::default());
        let awaited = pool.try_admit().unwrap().offload(gauge.work());
        let orphan = pool.try_admit().unwrap().offload(gauge.work());

        let third = loom::thread::spawn({
            let (pool, gauge) = (pool.clone(), Arc::clone(&gauge));
            move || match pool.try_admit() {
                // Only possible once one of the two has ended.
                Ok(slot) => loom::future::block_on(slot.offload(gauge.work())).is_ok(),
                Err(refusal) => {
                    assert_eq!(refusal.code(), crate::Code::Saturated);
                    false
                }
            }
        });
        drop(orphan);
        assert_eq!(loom::future::block_on(awaited), Ok(()));
        let third_ran = third.join().unwrap();

        all_back(&pool);
        assert!(gauge.peak() <= 2, "never more than N running");
        let stats = pool.stats();
        assert_eq!(stats.finished, 2 + u64::from(third_ran));
        assert_eq!(stats.orphaned, 1);
    });
}
