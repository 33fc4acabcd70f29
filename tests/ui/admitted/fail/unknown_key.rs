use admission_axum::admitted;

#[admitted(class = control, timeout = 5)]
async fn status() -> String {
    String::new()
}

fn main() {}
