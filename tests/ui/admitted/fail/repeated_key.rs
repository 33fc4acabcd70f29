use admission_core::admitted;

#[admitted(class = control, class = work)]
async fn status() -> String {
    String::new()
}

fn main() {}
