use admission_core::reserved;

// Independent mistakes are all reported by one build.
#[reserved(slots = 0, name = "")]
struct Consumer<T>(T);

fn main() {}
