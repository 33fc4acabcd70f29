use actix_web::{App, HttpResponse, Responder, web};
use admission_actix::admitted;

struct Registry;

#[admitted(class = control)]
async fn status_page(_registry: web::Data<Registry>) -> impl Responder {
    HttpResponse::Ok().body("ok")
}

#[admitted(class = work)]
async fn rotate(id: web::Path<u32>) -> String {
    format!("rotated {id}")
}

fn main() {
    let _app = App::new()
        .app_data(web::Data::new(Registry))
        .route("/status", web::get().to(status_page))
        .route("/rotate/{id}", web::post().to(rotate));
}
