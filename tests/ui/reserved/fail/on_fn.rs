use admission_core::reserved;

#[reserved(slots = 2)]
fn recovery_loop() {}

fn main() {}
