use admission_axum::admitted;

#[admitted(class = reads)]
async fn status() -> String {
    String::new()
}

fn main() {}
