//! The actix-web quickstart: a registry walk (blocking work) behind
//! admission.
//!
//! `cargo run --example quickstart-actix`, then
//! `curl -i 127.0.0.1:3001/metrics`. Every request holds a slot of its
//! class (`GET` → *control*) until its response is sent; the walk itself
//! runs on the `registry` pool's own threads. When either is full the
//! answer is `503` with `Retry-After`, at once; `/healthz` never waits on
//! load.

use actix_web::{App, HttpServer, web};
use admission_actix::{AdmissionControl, Rejection};
use admission_core::{Admission, Pool, RequestPools};

/// A walk of the metrics registry: blocking work, on the registry's threads.
async fn metrics(registry: web::Data<Pool>) -> Result<String, Rejection> {
    let text = registry
        .run(
            || Ok::<_, std::fmt::Error>("# TYPE up gauge\nup 1\n# EOF\n".to_owned()),
            Admission::FailFast,
        )
        .await?;
    Ok(text)
}

/// The server on `listener`: `requests` bounds requests by class (every
/// worker's middleware shares them), `registry` bounds the walks;
/// `/healthz` passes with no lease.
pub(crate) fn server(
    listener: std::net::TcpListener,
    requests: RequestPools,
    registry: Pool,
) -> std::io::Result<actix_web::dev::Server> {
    let admission = AdmissionControl::new(requests).bypass(|req| req.path() == "/healthz");
    Ok(HttpServer::new(move || {
        App::new()
            .wrap(admission.clone())
            .app_data(web::Data::new(registry.clone()))
            .route("/metrics", web::get().to(metrics))
            .route("/healthz", web::get().to(|| async { "ok" }))
    })
    .workers(2)
    .listen(listener)?
    .run())
}

#[actix_web::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 4 work and 8 control slots; 2 walks at once.
    let requests = RequestPools::new(4, 8)?;
    let registry = Pool::new("registry", 2)?;
    let listener = std::net::TcpListener::bind("127.0.0.1:3001")?;
    println!("listening on http://{}", listener.local_addr()?);
    server(listener, requests, registry)?.await?;
    Ok(())
}
