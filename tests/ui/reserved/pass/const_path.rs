use admission_core::{LoopOwner, reserved};

mod config {
    pub const RECOVERY_SLOTS: usize = 4;
}

// Named like the items the attribute generates inside its impl.
const SLOTS: usize = 3;

#[reserved(slots = config::RECOVERY_SLOTS)]
struct RecoveryLoop {
    _scans: u32,
}

#[reserved(slots = SLOTS)]
struct Receipts;

fn main() {
    let a = RecoveryLoop { _scans: 0 };
    let b = RecoveryLoop { _scans: 1 };
    assert_eq!(a.reservation().pool().capacity(), 4);
    assert!(
        a.reservation().pool().same_pool(b.reservation().pool()),
        "one per type"
    );
    assert_eq!(Receipts.reservation().pool().capacity(), 3);
}
