use admission_core::reserved;

#[reserved(slots = 2)]
#[reserved(slots = 3)]
struct RecoveryLoop;

fn main() {}
