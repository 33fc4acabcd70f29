use admission_core::admitted;

#[admitted(class = control)]
fn status() -> String {
    String::new()
}

fn main() {}
