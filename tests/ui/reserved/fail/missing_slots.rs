use admission_core::reserved;

#[reserved(name = "recovery")]
struct RecoveryLoop;

fn main() {}
