use admission_axum::admitted;

#[admitted(class = control, class = work)]
async fn status() -> String {
    String::new()
}

fn main() {}
