use admission_core::reserved;

const RECOVERY_SLOTS: usize = 0;

#[reserved(slots = RECOVERY_SLOTS)]
struct RecoveryLoop;

fn main() {}
