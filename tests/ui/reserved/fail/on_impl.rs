use admission_core::reserved;

struct RecoveryLoop;

#[reserved(slots = 2)]
impl RecoveryLoop {}

fn main() {}
