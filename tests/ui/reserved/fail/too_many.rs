use admission_core::reserved;

#[reserved(slots = 5000)]
struct RecoveryLoop;

fn main() {}
