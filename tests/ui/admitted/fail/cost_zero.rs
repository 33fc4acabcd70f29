use admission_axum::admitted;

#[admitted(class = work, cost = 0)]
async fn walk() -> String {
    String::new()
}

fn main() {}
