use admission_axum::admitted;

#[admitted]
async fn status() -> String {
    String::new()
}

fn main() {}
