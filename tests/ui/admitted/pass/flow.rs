use actix_web::web;
use admission_core::Caller;
use axum::extract::Path;

// A route held to each tenant's fair share: the flow is an expression over
// the handler's arguments, evaluated per request.
#[admission_axum::admitted(class = work, flow = tenant)]
async fn export(Path(tenant): Path<String>) -> String {
    format!("{tenant}: {}", Caller::current().has_flow())
}

#[admission_actix::admitted(class = work, criticality = sheddable, flow = tenant.as_str(), queue)]
async fn report(tenant: web::Path<String>) -> String {
    tenant.into_inner()
}

fn main() {
    let _router: axum::Router = axum::Router::new().route("/export/{tenant}", axum::routing::post(export));
    let _app = actix_web::App::new().route("/report/{tenant}", web::post().to(report));
}
