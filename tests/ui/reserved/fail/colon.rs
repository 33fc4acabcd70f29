use admission_core::reserved;

#[reserved(slots: 2)]
struct RecoveryLoop;

fn main() {}
