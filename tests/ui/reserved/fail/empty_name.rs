use admission_core::reserved;

#[reserved(slots = 2, name = "")]
struct RecoveryLoop;

fn main() {}
