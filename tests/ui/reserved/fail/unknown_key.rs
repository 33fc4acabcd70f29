use admission_core::reserved;

#[reserved(slots = 2, size = 3)]
struct RecoveryLoop;

fn main() {}
