use admission_core::{LoopOwner, reserved};

#[reserved(slots = 2)]
struct RecoveryLoop;

#[reserved(slots = 3, name = "broker")]
enum Consumer {
    Orders,
}

#[reserved(slots = 2)]
struct Receipts<'a>(&'a str);

fn main() {
    assert_eq!(RecoveryLoop.reservation().name(), "RecoveryLoop");
    assert_eq!(RecoveryLoop.reservation().pool().capacity(), 2);
    assert_eq!(Consumer::Orders.reservation().name(), "broker");
    assert_eq!(Receipts("x").reservation().pool().capacity(), 2);
}
