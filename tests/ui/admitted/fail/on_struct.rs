use admission_axum::admitted;

#[admitted(class = control)]
struct Status;

fn main() {}
