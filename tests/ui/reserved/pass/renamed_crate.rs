use admission_core as admission;
use admission::{LoopOwner, reserved};

#[reserved(slots = 2, crate = "admission")]
struct RecoveryLoop;

fn main() {
    assert_eq!(RecoveryLoop.reservation().pool().capacity(), 2);
}
