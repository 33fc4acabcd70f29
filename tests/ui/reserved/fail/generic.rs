use admission_core::reserved;

#[reserved(slots = 2)]
struct Consumer<T>(T);

fn main() {}
