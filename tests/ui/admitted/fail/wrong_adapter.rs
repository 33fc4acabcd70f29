// The axum attribute on actix-web handlers, and the actix-web one on an
// axum handler: each names the import to use instead.
use actix_web::{HttpRequest, get, web};

#[admission_axum::admitted(class = control)]
async fn by_request(_request: HttpRequest) -> String {
    String::new()
}

#[admission_axum::admitted(class = control)]
#[get("/status")]
async fn routed() -> String {
    String::new()
}

#[admission_axum::admitted(class = work)]
async fn with_data(_app: web::Data<u32>) -> String {
    String::new()
}

#[admission_actix::admitted(class = work)]
async fn axum_style() -> impl axum::response::IntoResponse {
    ""
}

fn main() {}
