//! One set of pools per app, not per connection: five connections each
//! holding a request against two slots admit exactly two, whether the layer
//! is router-wide, per route (applied by axum once per connection), or
//! around a `route_service`.

mod common;

use std::convert::Infallible;

use admission_axum::AdmissionLayer;
use admission_core::{Class, RequestPools};
use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response};
use axum::{Router, routing::get};
use reqwest::StatusCode;
use tokio::sync::mpsc;
use tower::{Layer, service_fn};

use common::{Gate, GateControl, PATIENCE, client, gate, serve};

const CONNECTIONS: usize = 5;
const SLOTS: usize = 2;

async fn held(State(gate): State<Gate>) -> &'static str {
    gate.pass().await;
    "done"
}

fn pools() -> RequestPools {
    RequestPools::new(SLOTS, SLOTS).unwrap()
}

/// Opens five connections, each sending one request to `path`, and checks
/// that exactly two are admitted (and held at the gate) and three refused.
async fn five_connections_two_admitted(
    router: Router,
    pools: &RequestPools,
    class: Class,
    mut control: GateControl,
) {
    let addr = serve(router).await;
    let (done_tx, mut done) = mpsc::unbounded_channel();
    for _ in 0..CONNECTIONS {
        let url = format!("http://{addr}/x");
        let done_tx = done_tx.clone();
        tokio::spawn(async move {
            let response = client().get(url).send().await.expect("response");
            let status = response.status();
            let body = response.text().await.expect("body");
            done_tx.send((status, body)).expect("the test is listening");
        });
    }

    control.entered(SLOTS).await;
    let mut refused = Vec::new();
    for _ in 0..CONNECTIONS - SLOTS {
        let (status, body) = tokio::time::timeout(PATIENCE, done.recv())
            .await
            .expect("refusals are immediate")
            .expect("a response");
        refused.push(status);
        assert!(body.contains("ADMISSION_SATURATED"), "refusal body: {body}");
    }
    assert_eq!(
        refused,
        vec![StatusCode::SERVICE_UNAVAILABLE; CONNECTIONS - SLOTS],
        "every request beyond the two slots is refused"
    );
    assert_eq!(
        control.entered_now(),
        0,
        "exactly two requests reached the handler"
    );
    let stats = pools.pool(class).stats();
    assert_eq!(
        stats.in_use, SLOTS,
        "the two admitted requests hold both slots"
    );
    assert_eq!(
        stats.refused,
        (CONNECTIONS - SLOTS) as u64,
        "one pool counted every refusal"
    );

    control.open(SLOTS);
    for _ in 0..SLOTS {
        let (status, body) = tokio::time::timeout(PATIENCE, done.recv())
            .await
            .expect("the admitted requests finish once released")
            .expect("a response");
        assert_eq!((status, body.as_str()), (StatusCode::OK, "done"));
    }
    common::eventually("both slots are back", || {
        pools.pool(class).stats().in_use == 0
    })
    .await;
}

#[tokio::test]
async fn router_wide_layer_shares_one_pool_across_connections() {
    let pools = pools();
    let (gate, control) = gate();
    let router = Router::new()
        .route("/x", get(held))
        .layer(AdmissionLayer::new(pools.clone()))
        .with_state(gate);
    five_connections_two_admitted(router, &pools, Class::Control, control).await;
}

#[tokio::test]
async fn per_route_layer_shares_one_pool_across_connections() {
    let pools = pools();
    let (gate, control) = gate();
    // A handler's layer under a router with state is applied when the state
    // is provided, once per connection under `axum::serve` (axum #2582).
    let router = Router::new()
        .route(
            "/x",
            get(held).layer(AdmissionLayer::class(pools.clone(), Class::Work)),
        )
        .with_state(gate);
    five_connections_two_admitted(router, &pools, Class::Work, control).await;
}

#[tokio::test]
async fn route_service_shares_one_pool_across_connections() {
    let pools = pools();
    let (gate, control) = gate();
    let service = service_fn(move |_request: Request<_>| {
        let gate = gate.clone();
        async move {
            gate.pass().await;
            Ok::<_, Infallible>(Response::new(Body::from("done")))
        }
    });
    let router = Router::new().route_service(
        "/x",
        AdmissionLayer::class(pools.clone(), Class::Control).layer(service),
    );
    five_connections_two_admitted(router, &pools, Class::Control, control).await;
}
