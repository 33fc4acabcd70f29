use admission_core::reserved;

#[reserved(slots = -1)]
struct RecoveryLoop;

fn main() {}
