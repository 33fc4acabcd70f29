//! (d) Per-call reservation slots with one orphan and the spare.

use std::sync::Arc;

use super::{Gauge, all_back};
use crate::{Code, Reservation};

#[test]
fn the_spare_absorbs_one_orphan_and_calls_take_a_slot_each() {
    loom::model(|| {
        let reservation = Reservation::new("loom-reservation", 2).unwrap();
        let gauge = Arc::new(Gauge::default());

        // A call whose caller was cancelled: it keeps its slot until it ends.
        drop(reservation.try_admit().unwrap().offload(gauge.work()));

        // The next call is admitted by the spare, whatever the orphan does.
        let call = reservation
            .try_admit()
            .expect("the spare absorbs one orphan");
        let during = reservation.try_admit();
        if let Err(refusal) = &during {
            assert_eq!(refusal.code(), Code::ReservationExhausted);
            assert_eq!(refusal.pool(), "loom-reservation");
        }
        drop(during);
        assert_eq!(loom::future::block_on(call.offload(gauge.work())), Ok(()));

        all_back(reservation.pool());
        assert!(gauge.peak() <= 2);
        let stats = reservation.stats();
        assert_eq!(stats.orphaned, 1, "{stats:?}");
    });
}
