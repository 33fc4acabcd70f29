use std::sync::Arc;

use admission_core::{RequestPools, admitted};
use axum::Router;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};

#[derive(Clone)]
struct App {
    pools: Arc<RequestPools>,
}

#[admitted(class = control)]
async fn status_page(State(_app): State<App>) -> String {
    String::from("ok")
}

/// The pools may come from the handler's own arguments.
#[admitted(class = work, pools = app.pools)]
pub(crate) async fn rotate(State(app): State<App>, Path(id): Path<u32>) -> impl IntoResponse {
    let _still_usable = app;
    format!("rotated {id}")
}

fn main() {
    let app = App {
        pools: Arc::new(RequestPools::new(2, 4).unwrap()),
    };
    let _router: Router = Router::new()
        .route("/status", get(status_page))
        .route("/rotate/{id}", post(rotate))
        .with_state(app);
}
