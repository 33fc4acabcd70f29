use admission_axum::admitted;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::IntoResponse;
use axum::routing::{get, post};

#[derive(Clone)]
struct App;

#[admitted(class = control)]
async fn status_page(State(_app): State<App>) -> String {
    String::from("ok")
}

#[admitted(class = work)]
pub(crate) async fn rotate(State(app): State<App>, Path(id): Path<u32>) -> impl IntoResponse {
    let _still_usable = app;
    format!("rotated {id}")
}

fn main() {
    let _router: Router = Router::new()
        .route("/status", get(status_page))
        .route("/rotate/{id}", post(rotate))
        .with_state(App);
}
