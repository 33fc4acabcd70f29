use admission_core::reserved;

#[reserved(slots = 0)]
struct RecoveryLoop;

fn main() {}
