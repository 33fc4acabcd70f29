use admission_core::reserved;

#[reserved(2)]
struct RecoveryLoop;

fn main() {}
