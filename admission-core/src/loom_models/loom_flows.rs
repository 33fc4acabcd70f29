//! (l) A flow's count racing the return of its slot: flow A lets go of
//! the pool's only slot while flow B asks for it. The slot's number may go
//! straight to B; its count must follow the slot, never the number, so
//! every flow's count is back to zero once every slot is: seen failing
//! with the pool's release hook moved after the permit's return (A's
//! return then takes B's count down, and A's stays up for ever).

use crate::Pool;
use crate::{Caller, Code};

#[test]
fn a_flows_count_follows_its_slot_when_the_number_is_reused_at_once() {
    loom::model(|| {
        let pool = Pool::new("loom-flows", 1).unwrap();
        let (a, b) = (
            Caller::default().with_flow("a"),
            Caller::default().with_flow("b"),
        );
        let held = a.scope_sync(|| pool.try_admit()).unwrap();
        let asker = loom::thread::spawn({
            let pool = pool.clone();
            move || match b.scope_sync(|| pool.try_admit()) {
                Ok(slot) => {
                    drop(slot);
                    true
                }
                Err(refusal) => {
                    assert!(
                        matches!(refusal.code(), Code::Saturated | Code::FlowShare),
                        "refused for the capacity or a share: {refusal:?}"
                    );
                    false
                }
            }
        });
        drop(held);
        asker.join().unwrap();
        let flows = pool.flow_table().expect("flows asked");
        assert_eq!(flows.held_total(), (0, 0), "every flow's count is back");
        assert_eq!(pool.stats().in_use, 0, "every slot is back");
        // And the table still decides: B, alone now or asking, is admitted.
        assert!(b.scope_sync(|| pool.try_admit()).is_ok());
    });
}
