use std::future::Future;

use admission_axum::admitted;

#[admitted(class = work)]
async fn rotate() -> impl Future<Output = String> {
    async { String::new() }
}

fn main() {}
