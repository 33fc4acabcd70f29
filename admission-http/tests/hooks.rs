//! The app's bypass and refusal page combined with the rest of the middle:
//! stacked layers (a router-wide layer over a route's, two sets of pools)
//! and the queueing mode.

use std::convert::Infallible;
use std::time::Duration;

use admission_core::{Class, RequestPools};
use admission_http::AdmissionLayer;
use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::BodyExt;
use tower::{Layer, ServiceExt, service_fn};

fn ok<B>()
-> impl tower::Service<Request<B>, Response = Response<String>, Error = Infallible, Future = impl Send>
+ Clone
+ Send
+ 'static {
    service_fn(|_req: Request<B>| async { Ok::<_, Infallible>(Response::new("ok".to_owned())) })
}

fn health(head: &http::request::Parts) -> bool {
    head.uri.path() == "/healthz"
}

#[tokio::test]
async fn a_request_an_outer_layer_lets_through_passes_the_layers_under_it() {
    // The outer layer (router-wide) bypasses /healthz; the inner one (a
    // route's, over other pools) has no bypass of its own. Both are full.
    let outer_pools = RequestPools::new(1, 1).unwrap();
    let inner_pools = RequestPools::builder()
        .name("inner")
        .work(1)
        .control(1)
        .build()
        .unwrap();
    let _outer = outer_pools.try_lease(Class::Control).unwrap();
    let _inner = inner_pools.try_lease(Class::Control).unwrap();
    let service = AdmissionLayer::new(outer_pools.clone())
        .bypass(health)
        .layer(AdmissionLayer::new(inner_pools.clone()).layer(ok()));

    let health = service
        .clone()
        .oneshot(Request::get("/healthz").body(()).unwrap())
        .await
        .unwrap();
    assert_eq!(health.status(), 200, "health never waits on load");
    assert_eq!(
        inner_pools.pool(Class::Control).stats().admitted,
        1,
        "only the test's own lease"
    );
    let other = service
        .oneshot(Request::get("/status").body(()).unwrap())
        .await
        .unwrap();
    assert_eq!(other.status(), 503, "the bypass is for the route it names");
}

#[tokio::test(start_paused = true)]
async fn a_queued_refusal_carries_the_apps_page() {
    let pools = RequestPools::new(1, 1).unwrap();
    let held = pools.clone();
    // Held by another task (a lease of this task would be shared, not waited for).
    let _held = tokio::spawn(async move { held.try_lease(Class::Control).unwrap() })
        .await
        .unwrap();
    let service = AdmissionLayer::new(pools.clone())
        .refusal_body(|_refusal, _head| {
            Some((
                HeaderValue::from_static("text/html"),
                Bytes::from_static(b"<h1>Busy</h1>"),
            ))
        })
        .queue()
        .layer(ok());
    let refused = tokio::time::timeout(
        Duration::from_secs(60),
        service.oneshot(Request::get("/page").body(()).unwrap()),
    )
    .await
    .expect("a queued request is refused at the queue's limit")
    .unwrap();
    assert_eq!(refused.status(), 503);
    assert_eq!(refused.headers()["content-type"], "text/html");
    assert_eq!(
        refused.headers()["x-admission-refusal"],
        "ADMISSION_WAIT_TIMEOUT"
    );
    assert!(refused.headers().contains_key("retry-after"));
    let body = refused.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "<h1>Busy</h1>");
}

#[tokio::test]
async fn a_queued_layer_lets_its_bypass_through() {
    // Before the shared step, the queueing service never looked at the
    // bypass: a health route behind `.queue()` waited on load.
    let pools = RequestPools::new(1, 1).unwrap();
    let held = pools.clone();
    let _held = tokio::spawn(async move { held.try_lease(Class::Control).unwrap() })
        .await
        .unwrap();
    let service = AdmissionLayer::new(pools.clone())
        .bypass(health)
        .queue()
        .layer(ok());
    let health = tokio::time::timeout(
        Duration::from_secs(60),
        service.oneshot(Request::get("/healthz").body(()).unwrap()),
    )
    .await
    .expect("a bypassed request never waits in the queue")
    .unwrap();
    assert_eq!(health.status(), 200);
    assert_eq!(
        pools.pool(Class::Control).stats().admitted,
        1,
        "only the test's own lease"
    );
}
