use admission::{LoopOwner, reserved};
use admission_core as admission;

#[reserved(slots = 2, crate = "admission")]
struct RecoveryLoop;

fn main() {
    assert_eq!(RecoveryLoop.reservation().pool().capacity(), 2);
}
