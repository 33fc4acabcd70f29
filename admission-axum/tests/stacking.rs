//! Layers stacked the ways apps stack them, over real HTTP, on a one-slot
//! class: a router-wide layer plus a per-route layer, and a layer wrapping a
//! layer directly (a plain tower stack). One request holds one slot of its
//! class however many layers of the same pools it passes; layers of other
//! pools still count, and a route that costs more than the lease its
//! request already holds takes the difference, not a second lease.

mod common;

use std::convert::Infallible;
use std::num::NonZeroU8;

use admission_axum::AdmissionLayer;
use admission_core::{Class, RequestPools};
use axum::body::Body;
use axum::extract::State;
use axum::http::{Request, Response};
use axum::{Router, routing::post};
use reqwest::StatusCode;
use tower::{Layer, ServiceExt, service_fn};

use common::{Gate, PATIENCE, client, eventually, gate, serve};

async fn held(State(gate): State<Gate>) -> &'static str {
    gate.pass().await;
    "done"
}

/// A POST (class *work*, one slot) through `router`; while the handler is
/// held, reports the work class's slots in use, then lets it finish.
async fn in_use_while_held(router: Router<Gate>, pools: &RequestPools) -> (StatusCode, usize) {
    let (gate, mut control) = gate();
    let addr = serve(router.with_state(gate)).await;
    let request = tokio::spawn(async move {
        client()
            .post(format!("http://{addr}/held"))
            .send()
            .await
            .expect("request")
            .status()
    });
    control.entered(1).await;
    let in_use = pools.pool(Class::Work).stats().in_use;
    control.open(1);
    let status = tokio::time::timeout(PATIENCE, request)
        .await
        .expect("answered in time")
        .expect("request task");
    let work = pools.pool(Class::Work).clone();
    eventually("the lease is back", || work.stats().in_use == 0).await;
    (status, in_use)
}

#[tokio::test]
async fn a_router_wide_and_a_per_route_layer_hold_one_slot() {
    let pools = RequestPools::new(1, 1).unwrap();
    let router = Router::new()
        .route(
            "/held",
            post(held).layer(AdmissionLayer::class(pools.clone(), Class::Work)),
        )
        .layer(AdmissionLayer::new(pools.clone()));

    let (status, in_use) = in_use_while_held(router, &pools).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "an idle server must not refuse itself"
    );
    assert_eq!(in_use, 1, "one request, one slot of its class");
    assert_eq!(pools.pool(Class::Work).stats().refused, 0);
}

/// A route of cost 4 under a router-wide layer of the same pools: the outer
/// layer takes one slot (it cannot know the route yet), the route's layer
/// tops the request's lease up to its cost, and the whole four come back
/// when the response ends, whether the route fails fast or queues.
#[tokio::test]
async fn a_costly_route_under_a_router_wide_layer_holds_its_cost_once() {
    let four = NonZeroU8::new(4).unwrap();
    for queued in [false, true] {
        let pools = RequestPools::new(4, 1).unwrap();
        let route = AdmissionLayer::class(pools.clone(), Class::Work);
        let route = if queued {
            post(held).layer(route.queue().cost(four).unwrap())
        } else {
            post(held).layer(route.cost(four).unwrap())
        };
        let router = Router::new()
            .route("/held", route)
            .layer(AdmissionLayer::new(pools.clone()));

        let (status, in_use) = in_use_while_held(router, &pools).await;
        assert_eq!(status, StatusCode::OK, "queued: {queued}");
        assert_eq!(in_use, 4, "the route's cost, taken once (queued: {queued})");
        let stats = pools.pool(Class::Work).stats();
        assert_eq!(
            (stats.admitted, stats.refused),
            (4, 0),
            "one slot for the request's lease, three on top (queued: {queued})"
        );
    }
}

/// The top-up is an admission like any other: with one slot of the four
/// taken by another request, a cost-4 route under a router-wide layer is
/// refused with `503` (it cannot hold its cost), and the router-wide
/// layer's slot comes back with the refusal.
#[tokio::test]
async fn a_costly_route_that_cannot_top_up_is_refused_and_gives_all_back() {
    let pools = RequestPools::new(4, 1).unwrap();
    let router = Router::new()
        .route(
            "/costly",
            post(|| async { "done" }).layer(
                AdmissionLayer::class(pools.clone(), Class::Work)
                    .cost(NonZeroU8::new(4).unwrap())
                    .unwrap(),
            ),
        )
        .layer(AdmissionLayer::new(pools.clone()));
    let addr = serve(router.with_state(gate().0)).await;
    let other = pools.try_lease(Class::Work).expect("an idle class");

    let response = client()
        .post(format!("http://{addr}/costly"))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().contains_key("retry-after"));
    drop(response);
    let work = pools.pool(Class::Work).clone();
    eventually("only the other request's slot is held", || {
        work.stats().in_use == 1
    })
    .await;
    drop(other);
    assert_eq!(pools.pool(Class::Work).stats().in_use, 0);
}

#[tokio::test]
async fn layers_of_different_pools_each_take_their_own_slot() {
    let outer = RequestPools::new(1, 1).unwrap();
    let inner = RequestPools::new(1, 1).unwrap();
    let router = Router::new()
        .route(
            "/held",
            post(held).layer(AdmissionLayer::new(inner.clone())),
        )
        .layer(AdmissionLayer::new(outer.clone()));

    let (status, outer_in_use) = in_use_while_held(router, &outer).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(outer_in_use, 1);
    assert_eq!(
        inner.pool(Class::Work).stats().admitted,
        1,
        "the other pools' layer admitted on its own slots"
    );
}

#[tokio::test]
async fn a_layer_directly_around_a_layer_holds_one_slot() {
    let pools = RequestPools::new(1, 1).unwrap();
    let (gate, mut control) = gate();
    let handler = service_fn(move |_request: Request<_>| {
        let gate = gate.clone();
        async move {
            gate.pass().await;
            Ok::<_, Infallible>(Response::new(Body::from("done")))
        }
    });
    let stack = AdmissionLayer::new(pools.clone())
        .layer(AdmissionLayer::class(pools.clone(), Class::Work).layer(handler));

    let request = tokio::spawn(stack.oneshot(Request::post("/").body(Body::empty()).unwrap()));
    control.entered(1).await;
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        1,
        "the inner layer shared the outer lease"
    );
    control.open(1);
    let response = tokio::time::timeout(PATIENCE, request)
        .await
        .expect("answered in time")
        .expect("request task")
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    drop(response);
    assert_eq!(pools.pool(Class::Work).stats().in_use, 0);
}

/// Connection admission (`admission_axum::serve`) in front of request
/// admission (`AdmissionLayer`): the two bounds compose. A held request holds
/// its one work slot, the next is refused with `503` + `Retry-After` over the
/// same server, and the slot comes back when the held one is answered.
#[cfg(feature = "serve")]
#[tokio::test]
async fn connection_admission_and_the_layer_compose() {
    let pools = RequestPools::new(1, 1).unwrap();
    let (gate, mut control) = gate();
    let router = Router::new()
        .route("/held", post(held))
        .layer(AdmissionLayer::new(pools.clone()))
        .with_state(gate);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move { admission_axum::serve(listener, router).await });

    let url = format!("http://{addr}/held");
    let first = tokio::spawn({
        let url = url.clone();
        async move { client().post(url).send().await.expect("first").status() }
    });
    control.entered(1).await;
    assert_eq!(pools.pool(Class::Work).stats().in_use, 1);
    let refused = client().post(&url).send().await.expect("second");
    assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers()["retry-after"], "1");
    control.open(1);
    let first = tokio::time::timeout(PATIENCE, first)
        .await
        .expect("answered in time")
        .expect("request task");
    assert_eq!(first, StatusCode::OK);
    let work = pools.pool(Class::Work).clone();
    eventually("the lease is back", || work.stats().in_use == 0).await;
}
