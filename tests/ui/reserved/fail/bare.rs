use admission_core::reserved;

#[reserved]
struct RecoveryLoop;

fn main() {}
