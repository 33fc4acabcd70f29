use admission_axum::admitted;
use admission_core::RequestPools;
use axum::extract::State;

#[derive(Clone)]
struct App {
    pools: RequestPools,
}

#[admitted(class = work, pools = app.pools)]
async fn rotate(State(app): State<App>) -> String {
    let _ = app;
    String::new()
}

fn main() {}
