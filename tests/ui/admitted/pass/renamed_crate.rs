//! `crate = "..."` names the adapter crate when the dependency is renamed.

use admission_axum as web_admission;
use axum::Router;
use axum::routing::get;

#[web_admission::admitted(class = control, crate = "web_admission")]
async fn status() -> String {
    String::from("ok")
}

fn main() {
    let _router: Router = Router::new().route("/status", get(status));
}
