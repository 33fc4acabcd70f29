use admission_axum::admitted;

#[admitted("work")]
async fn status() -> String {
    String::new()
}

fn main() {}
