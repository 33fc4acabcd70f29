use admission_axum::admitted;

#[admitted(class = control)]
fn status() -> String {
    String::new()
}

fn main() {}
