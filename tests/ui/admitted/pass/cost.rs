use actix_web::web;

// A full walk holds four slots of its class, a point read one.
#[admission_axum::admitted(class = work, cost = 4)]
async fn walk() -> String {
    String::from("walked")
}

#[admission_actix::admitted(class = work, cost = 2, flow = tenant.as_str(), queue)]
async fn report(tenant: web::Path<String>) -> String {
    tenant.into_inner()
}

fn main() {
    let _router: axum::Router = axum::Router::new().route("/walk", axum::routing::post(walk));
    let _app = actix_web::App::new().route("/report/{tenant}", web::post().to(report));
}
