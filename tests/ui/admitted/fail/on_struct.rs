use admission_core::admitted;

#[admitted(class = control)]
struct Status;

fn main() {}
