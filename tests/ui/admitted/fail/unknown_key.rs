use admission_core::admitted;

#[admitted(class = control, timeout = 5)]
async fn status() -> String {
    String::new()
}

fn main() {}
