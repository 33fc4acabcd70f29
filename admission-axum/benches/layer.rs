//! Per-request cost of the axum layer beside its baselines, in one run:
//! `cargo bench -p admission-axum --bench layer`.
//!
//! * `bare`: the router with a trivial handler and no limit;
//! * `admission`: the same router under `AdmissionLayer` (a lease taken,
//!   the body wrapped, the lease released when the body ends);
//! * `admission_traced`: the same with its pools recorded into a trace;
//! * `tower_limit_shed`: the same router under tower's `LoadShed` +
//!   `ConcurrencyLimit` (with `HandleErrorLayer`, as axum requires);
//! * `refused`: a request the layer refuses (503 + problem body), beside
//!   `tower_refused`, tower's `LoadShed` rejection mapped to a 503.

use std::hint::black_box;
use std::time::Duration;

use admission_axum::AdmissionLayer;
use admission_core::{Class, RequestPools};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::error_handling::HandleErrorLayer;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use criterion::{Criterion, criterion_group, criterion_main};
use tower::limit::GlobalConcurrencyLimitLayer;
use tower::{BoxError, ServiceBuilder, ServiceExt};

async fn hello() -> &'static str {
    "hello"
}

fn call(runtime: &tokio::runtime::Runtime, router: &Router) -> StatusCode {
    runtime.block_on(async {
        let response = router
            .clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = response.status();
        black_box(to_bytes(response.into_body(), 1 << 16).await.unwrap());
        status
    })
}

/// tower's limit with one semaphore for the app: a plain
/// `ConcurrencyLimitLayer` would make a semaphore each time axum builds the
/// route's service (axum #2582), and would never shed.
fn with_tower_limit(router: Router, limit: usize) -> Router {
    router.layer(
        ServiceBuilder::new()
            .layer(HandleErrorLayer::new(|_: BoxError| async {
                StatusCode::SERVICE_UNAVAILABLE
            }))
            .load_shed()
            .layer(GlobalConcurrencyLimitLayer::new(limit)),
    )
}

fn tower_router(limit: usize) -> Router {
    with_tower_limit(Router::new().route("/", get(hello)), limit)
}

fn per_request(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("axum_per_request");
    group.measurement_time(Duration::from_secs(3));

    let bare = Router::new().route("/", get(hello));
    group.bench_function("bare", |b| b.iter(|| call(&runtime, &bare)));

    let requests = RequestPools::new(64, 64).unwrap();
    let admitted = Router::new()
        .route("/", get(hello))
        .layer(AdmissionLayer::new(requests.clone()));
    assert_eq!(call(&runtime, &admitted), StatusCode::OK);
    group.bench_function("admission", |b| b.iter(|| call(&runtime, &admitted)));

    // The same, its pools recorded into a trace (issue 40's "a pool with
    // tracing on" on the path a request takes).
    let traced_pools = RequestPools::new(64, 64).unwrap();
    let trace = admission_core::trace::Trace::new(1 << 16).unwrap();
    traced_pools.trace_into(&trace).unwrap();
    let traced = Router::new()
        .route("/", get(hello))
        .layer(AdmissionLayer::new(traced_pools));
    assert_eq!(call(&runtime, &traced), StatusCode::OK);
    group.bench_function("admission_traced", |b| b.iter(|| call(&runtime, &traced)));

    let tower = tower_router(64);
    assert_eq!(call(&runtime, &tower), StatusCode::OK);
    group.bench_function("tower_limit_shed", |b| b.iter(|| call(&runtime, &tower)));
    group.finish();

    let mut group = c.benchmark_group("axum_refusal");
    group.measurement_time(Duration::from_secs(3));
    let full = RequestPools::new(1, 1).unwrap();
    let _held = full.try_lease(Class::Control).unwrap();
    let refusing = Router::new()
        .route("/", get(hello))
        .layer(AdmissionLayer::new(full.clone()));
    assert_eq!(call(&runtime, &refusing), StatusCode::SERVICE_UNAVAILABLE);
    group.bench_function("admission", |b| b.iter(|| call(&runtime, &refusing)));

    // tower: the one permit is held by a request whose handler never ends.
    let (hold_tx, hold_rx) = tokio::sync::oneshot::channel::<()>();
    let hold_rx = std::sync::Arc::new(tokio::sync::Mutex::new(Some(hold_rx)));
    let blocking = with_tower_limit(
        Router::new().route(
            "/",
            get(move || {
                let hold_rx = std::sync::Arc::clone(&hold_rx);
                async move {
                    if let Some(rx) = hold_rx.lock().await.take() {
                        let _ = rx.await;
                    }
                    "released"
                }
            }),
        ),
        1,
    );
    let in_flight = runtime.spawn(
        blocking
            .clone()
            .oneshot(Request::get("/").body(Body::empty()).unwrap()),
    );
    runtime.block_on(tokio::task::yield_now());
    runtime.block_on(async {
        while call_async(&blocking).await != StatusCode::SERVICE_UNAVAILABLE {
            tokio::task::yield_now().await;
        }
    });
    group.bench_function("tower_refused", |b| b.iter(|| call(&runtime, &blocking)));
    group.finish();
    drop(hold_tx);
    drop(runtime.block_on(in_flight));
}

async fn call_async(router: &Router) -> StatusCode {
    router
        .clone()
        .oneshot(Request::get("/").body(Body::empty()).unwrap())
        .await
        .unwrap()
        .status()
}

criterion_group!(benches, per_request);
criterion_main!(benches);
