use actix_web::web;
use admission_core::{Caller, Criticality};

// A route the service marks sheddable, and one that waits in the queue at
// critical: both still handlers of their framework.
#[admission_axum::admitted(class = work, criticality = sheddable)]
async fn prefetch() -> &'static str {
    Caller::current().criticality().as_str()
}

#[admission_actix::admitted(class = work, criticality = critical, queue)]
async fn checkout() -> String {
    format!("{:?}", Caller::current().criticality())
}

fn main() {
    let _router: axum::Router = axum::Router::new().route("/prefetch", axum::routing::get(prefetch));
    let _app = actix_web::App::new().route("/checkout", web::post().to(checkout));
    let _ = Criticality::Sheddable;
}
