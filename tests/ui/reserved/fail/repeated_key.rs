use admission_core::reserved;

#[reserved(slots = 2, slots = 3)]
struct RecoveryLoop;

fn main() {}
