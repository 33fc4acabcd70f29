//! The axum quickstart: a registry walk (blocking work) behind admission.
//!
//! `cargo run --example quickstart-axum`, then `curl -i 127.0.0.1:3000/metrics`.
//! Every request holds a slot of its class (`GET` → *control*) until its
//! response is sent; the walk itself runs on the `registry` pool's own
//! threads. When either is full the answer is `503` with `Retry-After`, at
//! once; `/healthz` never waits on load.

use admission_axum::{AdmissionLayer, Rejection};
use admission_core::{Admission, Pool, RequestPools, Shutdown};
use axum::extract::State;
use axum::routing::get;
use axum::{Router, serve};

/// The app's state: the pool its blocking work runs on.
#[derive(Clone)]
struct App {
    registry: Pool,
}

/// A walk of the metrics registry: blocking work, on the registry's threads.
async fn metrics(State(app): State<App>) -> Result<String, Rejection> {
    let text = app
        .registry
        .run(
            || Ok::<_, std::fmt::Error>("# TYPE up gauge\nup 1\n# EOF\n".to_owned()),
            Admission::FailFast,
        )
        .await?;
    Ok(text)
}

/// The routes under admission: `requests` bounds requests by class,
/// `registry` bounds the walks; `/healthz` passes with no lease.
pub(crate) fn router(requests: RequestPools, registry: Pool) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .layer(AdmissionLayer::new(requests).bypass(|head| head.uri.path() == "/healthz"))
        .with_state(App { registry })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 4 work and 8 control slots; 2 walks at once.
    let requests = RequestPools::new(4, 8)?;
    let registry = Pool::new("registry", 2)?;
    let shutdown = Shutdown::default();
    shutdown.register(&requests);
    shutdown.register(&registry);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    serve(listener, router(requests, registry))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Every pool drained (or cut at the deadline, 30 s by default).
    let report = shutdown.shutdown().await;
    println!(
        "stopped in {:?}: every pool drained: {}, loops stopped: {}",
        report.elapsed,
        report.drained(),
        report.loops_stopped
    );
    Ok(())
}
