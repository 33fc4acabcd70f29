use admission_axum::admitted;

#[admitted(class = "control")]
async fn status() -> String {
    String::new()
}

fn main() {}
