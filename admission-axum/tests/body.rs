//! `LeasedBody` and `ResponseFuture` driven by hand, frame by frame: when
//! the body lets go of its lease, what it says about its end and its size,
//! and what the future's `Debug` shows in each state (never the response).

use std::convert::Infallible;
use std::future::{Ready, ready};

use admission_axum::AdmissionLayer;
use admission_axum::body::LeasedBody;
use admission_core::{Class, RequestPools};
use axum::body::HttpBody;
use axum::http::{Request, Response};
use http_body_util::BodyExt;
use tower::{Layer, Service, ServiceExt};

fn in_use(pools: &RequestPools) -> usize {
    pools.pool(Class::Work).stats().in_use
}

#[tokio::test]
async fn a_leased_body_lets_go_of_its_lease_with_its_last_frame() {
    let pools = RequestPools::new(1, 1).unwrap();
    let mut body = LeasedBody::new(String::from("ok"), pools.try_lease(Class::Work).unwrap());
    assert!(body.holds_lease());
    assert!(!body.is_end_stream());
    assert_eq!(body.size_hint().exact(), Some(2));
    assert_eq!(in_use(&pools), 1);

    let frame = body.frame().await.expect("a frame").expect("no error");
    assert_eq!(frame.into_data().unwrap(), "ok");
    assert!(
        !body.holds_lease(),
        "the last frame ended the request's hold"
    );
    assert!(body.is_end_stream());
    assert_eq!(
        in_use(&pools),
        0,
        "the slot is back before the body is dropped"
    );
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn an_empty_leased_body_is_at_its_end_before_it_is_polled() {
    let pools = RequestPools::new(1, 1).unwrap();
    let body = LeasedBody::new(String::new(), pools.try_lease(Class::Work).unwrap());
    assert!(body.is_end_stream());
    assert!(body.holds_lease(), "held until polled or dropped");
    drop(body);
    assert_eq!(in_use(&pools), 0);
}

type Inner = Ready<Result<Response<String>, Infallible>>;

/// An inner service whose future is `Debug` (`Ready`), as the future's
/// `Debug` needs.
fn inner<B>(_: Request<B>) -> Inner {
    ready(Ok(Response::new(String::from("the-inner-response"))))
}

#[tokio::test]
async fn a_refusals_body_holds_no_lease_and_reports_its_exact_size_and_end() {
    let pools = RequestPools::new(1, 1).unwrap();
    let _held = pools.try_lease(Class::Work).unwrap();
    let service = AdmissionLayer::class(pools.clone(), Class::Work).layer(tower::service_fn(inner));
    let response = service.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), 503);
    let mut body = response.into_body();
    assert!(!body.holds_lease());
    assert!(!body.is_end_stream());
    let size = body.size_hint().exact().expect("an exact size");

    let data = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(data.len() as u64, size);
    assert!(data.starts_with(b"{\"code\":\"ADMISSION_SATURATED\""));
    assert!(body.is_end_stream(), "one frame, then the end");
    assert_eq!(body.size_hint().exact(), Some(0));
    assert!(body.frame().await.is_none());
}

#[tokio::test]
async fn the_response_futures_debug_names_its_state_and_never_the_response() {
    let pools = RequestPools::new(1, 1).unwrap();
    let layer = AdmissionLayer::class(pools.clone(), Class::Work);
    let mut service = layer.layer(tower::service_fn(inner));
    let admitted = service
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()));
    assert_eq!(
        format!("{admitted:?}"),
        r#"ResponseFuture { state: "Admitted" }"#,
        "the state, never the response"
    );

    // The slot is the admitted request's: a queued request waits.
    let mut queued = layer.queue().layer(tower::service_fn(inner));
    let waiting = queued
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()));
    assert_eq!(
        format!("{waiting:?}"),
        r#"ResponseFuture { state: "Queued" }"#
    );
    drop(waiting);

    let response = admitted.await.unwrap();
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        "the-inner-response"
    );
    assert_eq!(in_use(&pools), 0);
}
