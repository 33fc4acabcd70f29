use admission_core::reserved;

#[reserved(slots = 2.5)]
struct RecoveryLoop;

fn main() {}
