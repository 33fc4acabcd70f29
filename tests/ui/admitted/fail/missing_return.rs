use admission_axum::admitted;

#[admitted(class = work)]
async fn rotate() {}

fn main() {}
