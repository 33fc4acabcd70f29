use admission_axum::admitted;

#[admitted(class = work, wait = "soon")]
async fn rotate() -> String {
    String::new()
}

fn main() {}
