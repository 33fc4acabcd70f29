//! The layer over hyper-util's client against a scripted server on
//! 127.0.0.1: each answer in turn, each arrival recorded with its time and
//! headers, so what the client sent and when is seen from the server's side.

mod server;

use std::time::Duration;

use admission_client::{
    AdaptiveThrottle, Error, Retries, RetryAnyway, RetryBudget, RetryLayer, RetryPolicy,
};
use admission_core::{Caller, Criticality};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tower::{Layer, ServiceExt};

use crate::server::{Answer, Scripted};

type Bare = Client<HttpConnector, Full<Bytes>>;

fn bare() -> Bare {
    Client::builder(TokioExecutor::new()).build_http()
}

fn quick() -> RetryPolicy {
    // The throttle is tested on its own below: here one refusal would make
    // the next call a coin flip.
    RetryPolicy::default()
        .backoff(Duration::from_millis(2), Duration::from_millis(4))
        .throttle(None)
}

fn get(server: &Scripted) -> Request<Full<Bytes>> {
    Request::get(server.url()).body(Full::default()).unwrap()
}

/// A GET through the layer against `refusal` then `200`: the gap between
/// the two arrivals and the hint the layer recorded for its retry.
async fn refused_then_served(refusal: Answer) -> (Duration, Option<Duration>) {
    let server = Scripted::start(vec![refusal, Answer::ok()]).await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let response = client.oneshot(get(&server)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 2);
    let retries = &response.extensions().get::<Retries>().unwrap().0;
    (arrivals[1].at - arrivals[0].at, retries[0].hint)
}

#[tokio::test]
async fn a_retry_after_of_one_second_is_waited_for_then_the_answer_is_served() {
    let (gap, hint) = refused_then_served(Answer::refused(&[("retry-after", "1")])).await;
    assert!(
        gap >= Duration::from_secs(1),
        "retried {gap:?} after, before the hint"
    );
    assert!(
        gap < Duration::from_secs(3),
        "{gap:?}: a generous bound on a loaded machine"
    );
    assert_eq!(hint, Some(Duration::from_secs(1)));
}

#[tokio::test]
async fn an_admission_servers_millisecond_hint_is_waited_instead_of_its_whole_second() {
    // What an admission server sends for 30 ms work: `Retry-After` must say
    // 1 s, `x-admission-retry-after-ms` says 30.
    let (gap, hint) = refused_then_served(Answer::refused(&[
        ("retry-after", "1"),
        ("x-admission-retry-after-ms", "30"),
    ]))
    .await;
    assert!(
        gap >= Duration::from_millis(30),
        "retried {gap:?} after, before the hint"
    );
    assert!(
        gap < Duration::from_millis(900),
        "{gap:?}: the millisecond hint, not the whole second"
    );
    assert_eq!(hint, Some(Duration::from_millis(30)));
}

#[tokio::test]
async fn a_hint_longer_than_the_policy_waits_for_ends_the_call_with_the_refusal() {
    let server = Scripted::start(vec![
        Answer::refused(&[("retry-after", "3600")]),
        Answer::ok(),
    ])
    .await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let response = client.oneshot(get(&server)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        server.arrivals().len(),
        1,
        "an hour's hint is not waited for"
    );
}

#[tokio::test]
async fn an_http_date_retry_after_is_waited_for() {
    // Two seconds ahead, in whole seconds: the wait is between one and two.
    let when = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(2));
    let (gap, _) = refused_then_served(Answer::refused_owned(vec![("retry-after", when)])).await;
    assert!(
        gap >= Duration::from_millis(900) && gap < Duration::from_secs(4),
        "{gap:?}"
    );
}

#[tokio::test]
async fn a_pushback_of_minus_one_or_malformed_stops_a_grpc_call() {
    for stop in ["-1", "soon"] {
        let server = Scripted::start(vec![Answer::grpc(14, Some(stop)), Answer::ok()]).await;
        let client = RetryLayer::new(quick()).unwrap().layer(bare());
        let call = Request::post(server.url())
            .header("content-type", "application/grpc")
            .body(Full::new(Bytes::from_static(b"\0\0\0\0\0")))
            .unwrap();
        let response = client.oneshot(call).await.unwrap();
        assert_eq!(response.headers()["grpc-status"], "14", "{stop}");
        assert_eq!(
            server.arrivals().len(),
            1,
            "{stop}: the server asked not to retry"
        );
    }
    // A pushback the client may follow is followed, and the call is retried
    // though its method is POST: gRPC retries by code.
    let server = Scripted::start(vec![Answer::grpc(14, Some("30")), Answer::grpc(0, None)]).await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let call = Request::post(server.url())
        .header("content-type", "application/grpc")
        .body(Full::new(Bytes::from_static(b"\0\0\0\0\x01x")))
        .unwrap();
    let response = client.oneshot(call).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "0");
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 2);
    assert!(arrivals[1].at - arrivals[0].at >= Duration::from_millis(30));
    assert_eq!(
        arrivals[1].body, b"\0\0\0\0\x01x",
        "the message is replayed whole"
    );
}

#[tokio::test]
async fn a_budget_too_short_or_deadline_exceeded_is_never_retried() {
    let server = Scripted::start(vec![
        Answer::refused(&[
            ("retry-after", "0"),
            ("x-admission-refusal", "ADMISSION_BUDGET_TOO_SHORT"),
        ]),
        Answer::ok(),
    ])
    .await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let response = client.oneshot(get(&server)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(server.arrivals().len(), 1);

    let server = Scripted::start(vec![Answer::grpc(4, None), Answer::grpc(0, None)]).await;
    let client = RetryLayer::new(quick().grpc_codes(&[4, 14]))
        .unwrap()
        .layer(bare());
    let call = Request::post(server.url())
        .header("content-type", "application/grpc")
        .body(Full::default())
        .unwrap();
    let response = client.oneshot(call).await.unwrap();
    assert_eq!(response.headers()["grpc-status"], "4");
    assert_eq!(
        server.arrivals().len(),
        1,
        "DEADLINE_EXCEEDED, even when listed"
    );
}

#[tokio::test]
async fn only_idempotent_methods_are_retried_unless_the_caller_says_so() {
    let script = || vec![Answer::refused(&[("retry-after", "0")]), Answer::ok()];
    let server = Scripted::start(script()).await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let post = |server: &Scripted| {
        Request::post(server.url())
            .body(Full::new(Bytes::from_static(b"order=1")))
            .unwrap()
    };
    let response = client.clone().oneshot(post(&server)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(server.arrivals().len(), 1, "POST is not retried by default");

    let server = Scripted::start(script()).await;
    let mut request = post(&server);
    request.extensions_mut().insert(RetryAnyway);
    let response = client.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 2);
    assert_eq!(arrivals[1].method, Method::POST);
    assert_eq!(arrivals[1].body, b"order=1", "the body is replayed");
}

#[tokio::test]
async fn each_attempt_carries_the_time_left_and_none_starts_that_cannot_finish() {
    // A 1 s hint does not fit a 400 ms deadline: the refusal is the answer
    // at once, not after a second.
    let server =
        Scripted::start(vec![Answer::refused(&[("retry-after", "1")]), Answer::ok()]).await;
    let client = RetryLayer::new(quick().timeout(Duration::from_millis(400)))
        .unwrap()
        .layer(bare());
    let started = std::time::Instant::now();
    let response = client.clone().oneshot(get(&server)).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    let arrivals = server.arrivals();
    assert_eq!(arrivals.len(), 1);
    let budget: u64 = arrivals[0].budget_ms.unwrap();
    assert!(budget <= 400 && budget > 100, "{budget}");

    // Backed-off retries send less each time.
    let server = Scripted::start(vec![
        Answer::refused(&[]),
        Answer::refused(&[]),
        Answer::ok(),
    ])
    .await;
    let client = RetryLayer::new(
        quick()
            .backoff(Duration::from_millis(40), Duration::from_millis(80))
            .timeout(Duration::from_secs(5)),
    )
    .unwrap()
    .layer(bare());
    let response = client.oneshot(get(&server)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let budgets: Vec<u64> = server
        .arrivals()
        .iter()
        .map(|a| a.budget_ms.unwrap())
        .collect();
    assert_eq!(budgets.len(), 3);
    assert!(budgets.windows(2).all(|w| w[1] + 20 <= w[0]), "{budgets:?}");
}

#[tokio::test]
async fn the_callers_deadline_and_criticality_are_forwarded_from_its_scope() {
    let server = Scripted::start(vec![Answer::ok()]).await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let request = get(&server);
    let response = Caller::new(Criticality::Sheddable)
        .with_budget(Duration::from_millis(700))
        .scope(client.oneshot(request))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let arrival = &server.arrivals()[0];
    assert_eq!(arrival.criticality.as_deref(), Some("sheddable"));
    assert!(arrival.budget_ms.is_some_and(|ms| ms <= 700 && ms > 300));
    assert!(
        arrival.grpc_timeout.is_none(),
        "grpc-timeout only on gRPC calls"
    );

    let server = Scripted::start(vec![Answer::ok()]).await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let spent = Caller::new(Criticality::Default)
        .with_budget(Duration::ZERO)
        .scope(client.oneshot(get(&server)))
        .await;
    assert!(matches!(spent, Err(Error::DeadlineExceeded)));
    assert!(
        server.arrivals().is_empty(),
        "no attempt starts without time left"
    );
}

#[tokio::test]
async fn a_caller_extension_stands_for_the_scope_on_its_call() {
    let server = Scripted::start(vec![Answer::ok()]).await;
    let client = RetryLayer::new(quick()).unwrap().layer(bare());
    let mut request = get(&server);
    request
        .extensions_mut()
        .insert(Caller::new(Criticality::Critical).with_budget(Duration::from_millis(600)));
    // The scope says otherwise; the call's own caller wins.
    let response = Caller::new(Criticality::Sheddable)
        .scope(client.oneshot(request))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let arrival = &server.arrivals()[0];
    assert_eq!(arrival.criticality.as_deref(), Some("critical"));
    assert!(arrival.budget_ms.is_some_and(|ms| ms <= 600 && ms > 200));
}

#[tokio::test]
async fn the_budget_bounds_retries_across_calls() {
    // No ratio and no minimum: nothing is ever retried.
    let server = Scripted::start(vec![Answer::refused(&[("retry-after", "0")])]).await;
    let policy = quick()
        .budget(Some(
            RetryBudget::new(0.0, 0, Duration::from_secs(10)).unwrap(),
        ))
        .throttle(None);
    let client = RetryLayer::new(policy).unwrap().layer(bare());
    for _ in 0..5 {
        let response = client.clone().oneshot(get(&server)).await.unwrap();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
    assert_eq!(server.arrivals().len(), 5, "one attempt per call");

    // 50% and no minimum: 20 calls of 3 attempts make at most 10 retries.
    let server = Scripted::start(vec![Answer::refused(&[("retry-after", "0")])]).await;
    let policy = quick()
        .budget(Some(
            RetryBudget::new(0.5, 0, Duration::from_secs(10)).unwrap(),
        ))
        .throttle(None);
    let client = RetryLayer::new(policy).unwrap().layer(bare());
    for _ in 0..20 {
        client.clone().oneshot(get(&server)).await.unwrap();
    }
    assert_eq!(server.arrivals().len(), 30, "20 calls and 10 retries");
}

#[tokio::test]
async fn a_server_that_refuses_everything_is_soon_spared_by_the_throttle() {
    // A GET with no body makes its first attempt in `call`; a PUT with a
    // body, retryable, reads it first in the layer's loop. The throttle
    // has its say on both (no retries: the budget grants none).
    let put = |server: &Scripted| {
        Request::put(server.url())
            .body(Full::new(Bytes::from_static(b"v=1")))
            .unwrap()
    };
    for request in [get as fn(&Scripted) -> Request<Full<Bytes>>, put] {
        let server = Scripted::start(vec![Answer::refused(&[])]).await;
        let policy = quick()
            .max_attempts(2)
            .budget(Some(
                RetryBudget::new(0.0, 0, Duration::from_secs(10)).unwrap(),
            ))
            .throttle(Some(
                AdaptiveThrottle::new(1.5, Duration::from_secs(60)).unwrap(),
            ));
        let client = RetryLayer::new(policy).unwrap().layer(bare());
        let mut throttled = 0;
        for _ in 0..200 {
            match client.clone().oneshot(request(&server)).await {
                Ok(response) => assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE),
                Err(Error::Throttled) => throttled += 1,
                Err(other) => panic!("{other}"),
            }
        }
        let sent = server.arrivals().len();
        assert_eq!(sent + throttled, 200);
        assert!(
            sent < 40,
            "{sent} of 200 reached a server that accepts none"
        );
    }
}
