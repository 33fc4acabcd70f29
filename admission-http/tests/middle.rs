//! The middle as a plain tower stack: what it asks of the inner service in
//! each wait mode, one scope for caller and lease, and the gRPC refusal's
//! trailers-only shape.

use std::convert::Infallible;
use std::future::Ready;
use std::task::{Context, Poll};

use admission_core::{Caller, Class, Criticality, Lease, RequestPools};
use admission_http::{AdmissionLayer, GrpcRefusalStatus, ProtocolLayer};
use http::{Request, Response};
use http_body::Body as _;
use tower::{Layer, Service, ServiceExt};

/// A service that is not `Clone`: a fail-fast layer must take it as it is.
struct Once;

impl<B> Service<Request<B>> for Once {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _request: Request<B>) -> Self::Future {
        // The call itself runs in the request's scope.
        let seen = format!(
            "{} {:?}",
            Caller::current().criticality(),
            Lease::current().map(|lease| lease.class())
        );
        std::future::ready(Ok(Response::new(seen)))
    }
}

#[tokio::test]
async fn a_fail_fast_layer_serves_a_service_that_is_not_clone_in_one_scope() {
    let pools = RequestPools::new(1, 1).unwrap();
    let service = AdmissionLayer::new(pools.clone()).layer(Once);
    let request = Request::post("/items")
        .header("x-admission-criticality", "sheddable")
        .body(())
        .unwrap();
    let response = service.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        1,
        "the body holds the lease"
    );
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(body, "sheddable Some(Work)");
    assert_eq!(pools.pool(Class::Work).stats().in_use, 0);
}

#[tokio::test]
async fn a_grpc_refusal_is_one_head_and_no_body() {
    let pools = RequestPools::new(1, 1).unwrap();
    let service = ProtocolLayer::<GrpcRefusalStatus>::new(pools.clone()).layer(tower::service_fn(
        |_: Request<_>| async { Ok::<_, Infallible>(Response::new(String::new())) },
    ));
    let _held = pools.try_lease(Class::Work).unwrap();
    let call = Request::post("/shop.v1.Orders/Create").body(()).unwrap();
    let refused = service.oneshot(call).await.unwrap();
    assert_eq!(refused.status(), 200, "gRPC answers in its own status");
    assert_eq!(refused.headers()["grpc-status"], "14");
    assert_eq!(refused.headers()["content-type"], "application/grpc");
    assert!(
        refused.headers()["grpc-message"]
            .to_str()
            .unwrap()
            .starts_with("ADMISSION_SATURATED:%20pool%20%60work%60%20refused%20the%20call")
    );
    assert_eq!(refused.headers()["grpc-retry-pushback-ms"], "1000");
    assert!(
        refused.body().is_end_stream(),
        "trailers-only: the head ends the stream"
    );
    assert!(!refused.body().holds_lease());
}

#[tokio::test]
async fn a_route_fixed_criticality_holds_under_the_default_trust() {
    // The app's own word (what `#[admitted(criticality = critical)]` sets)
    // is not a client's claim: it is never lowered.
    let pools = RequestPools::new(1, 1).unwrap();
    let service = AdmissionLayer::new(pools).layer(tower::service_fn(|_: Request<_>| async {
        let level = Caller::current()
            .with_criticality(Criticality::Critical)
            .scope(async { Caller::current().criticality() })
            .await;
        Ok::<_, Infallible>(Response::new(level.to_string()))
    }));
    let response = service.oneshot(Request::new(())).await.unwrap();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap()
        .to_bytes();
    assert_eq!(body, "critical");
}

#[tokio::test]
async fn the_caller_layer_reads_under_the_same_trust_as_the_admission_layer() {
    use admission_http::CallerLayer;
    let echo = || {
        tower::service_fn(|_: Request<_>| async {
            Ok::<_, Infallible>(Response::new(Caller::current().criticality().to_string()))
        })
    };
    let claim = || {
        Request::get("/")
            .header("x-admission-criticality", "critical")
            .body(())
            .unwrap()
    };
    let outside = CallerLayer::new();
    let answer = outside
        .clone()
        .layer(echo())
        .oneshot(claim())
        .await
        .unwrap();
    assert_eq!(answer.into_body(), "default");
    assert_eq!(outside.lowered_claims(), 1);
    let peers = CallerLayer::new().trust_peers();
    let answer = peers.clone().layer(echo()).oneshot(claim()).await.unwrap();
    assert_eq!(answer.into_body(), "critical");
    assert_eq!(peers.lowered_claims(), 0);
}

/// A response whose reader stops asking after its first frame gives its
/// lease back at the layer's progress bound (here 50 ms, on the paused
/// clock), without being polled again; with the default bound (30 s) it
/// would still hold it.
#[tokio::test(start_paused = true)]
async fn an_unread_response_gives_its_lease_back_at_the_layers_progress_bound() {
    use admission_http::body::ProgressTimeout;
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::{BodyExt as _, StreamBody};

    let pools = RequestPools::new(1, 1).unwrap();
    let bound = ProgressTimeout::new(std::time::Duration::from_millis(50)).unwrap();
    let layer = AdmissionLayer::class(pools.clone(), Class::Work).progress_timeout(bound);
    let service = layer.layer(tower::service_fn(|_req: Request<_>| async {
        let frames =
            ["first", "second"].map(|text| Ok::<_, Infallible>(Frame::data(Bytes::from(text))));
        Ok::<_, Infallible>(Response::new(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
    }));
    let mut body = service.oneshot(Request::new(())).await.unwrap().into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert_eq!(first.into_data().unwrap(), "first");
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        1,
        "held while the reader reads"
    );

    // The reader stops asking: the watchdog takes the lease at the bound.
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        0,
        "returned at the bound"
    );
    assert!(
        body.frame().await.unwrap().is_err(),
        "the stalled body ends with an error"
    );
}

/// Two layers on the same pools (a router-wide one and one on a route, or
/// one layer stacked by mistake) hold one slot, and the outer layer's body
/// owns it: an unread response gives the slot back at the outer layer's
/// progress bound, not at the inner one's (the default 30 s here).
#[tokio::test(start_paused = true)]
async fn stacked_layers_give_the_shared_slot_back_at_the_outer_progress_bound() {
    use admission_http::body::ProgressTimeout;
    use bytes::Bytes;
    use http_body::Frame;
    use http_body_util::{BodyExt as _, StreamBody};

    let pools = RequestPools::new(1, 1).unwrap();
    let bound = ProgressTimeout::new(std::time::Duration::from_millis(50)).unwrap();
    let inner = AdmissionLayer::class(pools.clone(), Class::Work);
    let outer = AdmissionLayer::class(pools.clone(), Class::Work).progress_timeout(bound);
    let service = outer.layer(inner.layer(tower::service_fn(|_req: Request<_>| async {
        let frames =
            ["first", "second"].map(|text| Ok::<_, Infallible>(Frame::data(Bytes::from(text))));
        Ok::<_, Infallible>(Response::new(StreamBody::new(futures_util::stream::iter(
            frames,
        ))))
    })));
    let mut body = service.oneshot(Request::new(())).await.unwrap().into_body();
    body.frame().await.unwrap().unwrap();
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        1,
        "one slot for both layers"
    );

    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        0,
        "returned at the outer layer's bound"
    );
    assert!(
        body.frame().await.unwrap().is_err(),
        "the stalled body ends with an error"
    );
}

/// Reads the request's body to its end: answers whether the read failed.
async fn read_all<B: http_body::Body>(request: Request<B>) -> Result<Response<String>, Infallible> {
    use http_body_util::BodyExt as _;
    let failed = request.into_body().collect().await.is_err();
    Ok(Response::new(failed.to_string()))
}

/// Two layers of the same pools stacked (a router's and a route's): the
/// handler reads a body wrapped twice, under the one lease the outer layer
/// took; a client that stops sending still ends the read at the bound,
/// and the one slot comes back with the answer.
#[tokio::test(start_paused = true)]
async fn a_stalled_body_under_two_stacked_layers_ends_at_the_bound_with_one_slot() {
    use futures_util::StreamExt as _;
    use http_body_util::BodyExt as _;

    let pools = RequestPools::new(1, 1).unwrap();
    let bound =
        admission_http::body::ProgressTimeout::new(std::time::Duration::from_millis(200)).unwrap();
    let handler = tower::service_fn(read_all);
    let inner = AdmissionLayer::new(pools.clone()).progress_timeout(bound);
    let outer = AdmissionLayer::new(pools.clone()).progress_timeout(bound);
    let stack = outer.layer(inner.layer(handler));

    // One byte, then nothing: a client that stopped sending.
    let first = futures_util::stream::iter([Ok::<_, Infallible>(http_body::Frame::data(
        bytes::Bytes::from_static(b"x"),
    ))]);
    let stalled = http_body_util::StreamBody::new(first.chain(futures_util::stream::pending()));
    let request = Request::post("/upload").body(stalled).unwrap();
    let patience = std::time::Duration::from_secs(10);
    let response = tokio::time::timeout(patience, stack.oneshot(request))
        .await
        .expect("the handler answers once the read ends")
        .unwrap();
    assert_eq!(
        pools.pool(Class::Work).stats().admitted,
        1,
        "one slot for both layers"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "true", "the read ended with an error at the bound");
    let stats = pools.pool(Class::Work).stats();
    assert_eq!((stats.in_use, stats.released), (0, 1));
}

/// A traced set of pools under two stacked layers (router-wide and per
/// route, as an app stacks them): a request holds one lease, so the trace
/// has one entry for it, written when its body ends, and a refusal has one
/// entry, the outer layer's (the inner layer never sees the request).
#[tokio::test]
async fn stacked_layers_over_traced_pools_write_one_entry_per_request() {
    use admission_core::trace::Trace;
    use http_body_util::BodyExt as _;

    let json_lines = |trace: &Trace| {
        let mut out = Vec::new();
        trace.write_json_lines(&mut out).unwrap();
        String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
            .collect::<Vec<_>>()
    };
    let pools = RequestPools::new(1, 1).unwrap();
    let trace = Trace::new(64).unwrap();
    pools.trace_into(&trace).unwrap();
    let service = AdmissionLayer::new(pools.clone()).layer(
        AdmissionLayer::class(pools.clone(), Class::Work).layer(tower::service_fn(
            |_req: Request<_>| async { Ok::<_, Infallible>(Response::new(String::from("walked"))) },
        )),
    );

    let response = service
        .clone()
        .oneshot(Request::post("/walks").body(()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        pools.pool(Class::Work).stats().in_use,
        1,
        "one slot for both"
    );
    assert!(json_lines(&trace).is_empty(), "written when the lease ends");
    response.into_body().collect().await.unwrap();
    let lines = json_lines(&trace);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["outcome"], "admitted");
    assert_eq!(lines[0]["pool"], "work");

    let _held = pools.try_lease(Class::Work).unwrap();
    let refused = service
        .oneshot(Request::post("/walks").body(()).unwrap())
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    let lines = json_lines(&trace);
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[1]["outcome"], "refused");
    assert_eq!(lines[1]["code"], "ADMISSION_SATURATED");
}
