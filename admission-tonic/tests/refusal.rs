//! The refusal on the wire, over real HTTP/2 on 127.0.0.1: a trailers-only
//! response (one HEADERS frame that ends the stream) with `UNAVAILABLE` or
//! `RESOURCE_EXHAUSTED`, the stable code and the pool in `grpc-message`,
//! and `grpc-retry-pushback-ms`; registry work refused, failed and
//! panicked through `Rejection`.

mod common;

use std::time::{Duration, Instant};

use admission_core::{Class, RequestPools};
use admission_tonic::AdmissionLayer;
use admission_tonic::GrpcRefusalStatus;
use admission_tonic::status::{self, Hint};
use bytes::Bytes;
use http_body::Body as _;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tonic::Code;

use common::{check, client, eventually, probe, serve, within};

/// A `Check` of service `what` as raw HTTP/2: the gRPC message framing
/// (flag 0, a 4-byte length) of a `HealthCheckRequest` whose field 1 is
/// `what` (empty: no field at all).
fn raw_check(what: &str) -> http::Request<Full<Bytes>> {
    let mut message = Vec::new();
    if !what.is_empty() {
        message.extend([0x0a, u8::try_from(what.len()).expect("a short name")]);
        message.extend(what.as_bytes());
    }
    let mut frame = vec![0];
    frame.extend(u32::try_from(message.len()).unwrap().to_be_bytes());
    frame.extend(message);
    http::Request::post("http://127.0.0.1/grpc.health.v1.Health/Check")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(Bytes::from(frame)))
        .expect("a valid request")
}

/// Sends `raw_check("")` with hyper's own HTTP/2 client, so that the test
/// sees the frames tonic's client would hide: the head, and whether the
/// stream ended with it.
async fn raw_call(addr: std::net::SocketAddr) -> http::Response<hyper::body::Incoming> {
    raw_call_of(addr, "").await
}

/// [`raw_call`] of a `Check` of service `what`.
async fn raw_call_of(
    addr: std::net::SocketAddr,
    what: &str,
) -> http::Response<hyper::body::Incoming> {
    raw_send(addr, raw_check(what)).await
}

/// Sends `request` on a connection of its own with hyper's HTTP/2 client.
async fn raw_send(
    addr: std::net::SocketAddr,
    request: http::Request<Full<Bytes>>,
) -> http::Response<hyper::body::Incoming> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .expect("an HTTP/2 handshake");
    tokio::spawn(connection);
    within("an answer", sender.send_request(request))
        .await
        .expect("the server answers")
}

/// The `grpc-message` bytes of a refused call's answer, from its head
/// (trailers-only) or its trailers.
async fn grpc_message(answer: http::Response<hyper::body::Incoming>) -> Vec<u8> {
    if let Some(message) = answer.headers().get("grpc-message") {
        return message.as_bytes().to_vec();
    }
    let trailers = within("the answer's end", answer.into_body().collect())
        .await
        .expect("a whole body")
        .trailers()
        .cloned()
        .expect("trailers");
    trailers["grpc-message"].as_bytes().to_vec()
}

/// tonic's server acts on a `grpc-timeout` too (its first well-formed
/// value): were a repeated header ignored here, an expired deadline would
/// reach the handler and end in tonic's `CANCELLED "Timeout expired"`.
/// (Raw HTTP/2: tonic's own client would time the call out itself.)
#[tokio::test]
async fn an_expired_deadline_is_deadline_exceeded_however_the_header_repeats() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, _control) = probe(&requests);
    let layer = AdmissionLayer::new(requests.clone());
    let addr = serve(layer.clone(), probe).await;

    for values in [
        &["1n", "2S"][..],
        &["2S", "1n"],
        &["soon", "1n"],
        &["1n", "soon"],
        &["1n", "1n"],
    ] {
        // `held` waits at the gate until the test opens it, which it never
        // does: only a refusal before the handler answers.
        let mut request = raw_check("held");
        for &value in values {
            request
                .headers_mut()
                .append("grpc-timeout", http::HeaderValue::from_static(value));
        }
        let refused = raw_send(addr, request).await;
        assert_eq!(
            refused
                .headers()
                .get("grpc-status")
                .map(http::HeaderValue::as_bytes),
            Some(&b"4"[..]),
            "{values:?}: DEADLINE_EXCEEDED, trailers-only: {:?}",
            refused.headers()
        );
        assert!(
            refused.headers()["grpc-message"]
                .as_bytes()
                .starts_with(b"ADMISSION_BUDGET_TOO_SHORT:"),
            "{values:?}"
        );
    }
    assert_eq!(layer.malformed_headers(), 5, "each repeat is counted");
    assert_eq!(requests.pool(Class::Control).stats().in_use, 0);
}

/// A refusal the layer answers and one a handler returns from its registry
/// pool (`Rejection` into a `tonic::Status`, written by tonic) carry
/// `grpc-message` in one percent-encoding, byte for byte.
#[tokio::test]
async fn grpc_message_is_encoded_one_way_from_the_layer_and_from_a_handler() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, control) = probe(&requests);
    let addr = serve(AdmissionLayer::new(requests.clone()), probe).await;

    let _walking = control.registry.try_admit().unwrap();
    let from_handler = grpc_message(raw_call_of(addr, "walk").await).await;
    let held = requests.try_lease(Class::Control).unwrap();
    let from_layer = grpc_message(raw_call(addr).await).await;
    drop(held);

    let encoded = |pool: &str| {
        format!(
            "ADMISSION_SATURATED:%20pool%20%60{pool}%60%20refused%20the%20call;%20retry%20in%201%20s"
        )
    };
    assert_eq!(
        String::from_utf8_lossy(&from_handler),
        encoded("registry"),
        "the handler's refusal, as tonic writes a Status"
    );
    assert_eq!(
        String::from_utf8_lossy(&from_layer),
        encoded("control"),
        "the layer's refusal, in the same encoding"
    );
}

#[tokio::test]
async fn a_refusal_is_trailers_only_unavailable_naming_code_and_pool_with_pushback() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, mut control) = probe(&requests);
    let addr = serve(AdmissionLayer::new(requests.clone()), probe).await;

    // Admitted first: a head, then messages and trailers.
    let admitted = raw_call(addr).await;
    assert_eq!(admitted.status(), 200);
    assert!(
        admitted.headers().get("grpc-status").is_none(),
        "an admitted call's status comes in its trailers"
    );
    assert!(
        !admitted.body().is_end_stream(),
        "an admitted call's stream goes on after its head"
    );
    let trailers = within("the admitted call's end", admitted.into_body().collect())
        .await
        .expect("a whole body")
        .trailers()
        .cloned()
        .expect("trailers");
    assert_eq!(trailers["grpc-status"], "0");
    control.seen().await;

    let held = requests.try_lease(Class::Control).unwrap();
    let asked = Instant::now();
    let refused = raw_call(addr).await;
    let took = asked.elapsed();
    assert_eq!(refused.status(), 200, "gRPC answers travel in a 200");
    assert!(
        refused.body().is_end_stream(),
        "trailers-only: the HEADERS frame ended the stream"
    );
    let headers = refused.headers();
    assert_eq!(headers["content-type"], "application/grpc");
    assert_eq!(headers["grpc-status"], "14", "UNAVAILABLE");
    // The class learned its hold from the admitted call above: the
    // pushback is that, in milliseconds, not the cold 1 s.
    let pushback: u32 = headers["grpc-retry-pushback-ms"]
        .to_str()
        .unwrap()
        .parse()
        .expect("the pushback is whole milliseconds");
    assert!((1..=1000).contains(&pushback), "pushback {pushback} ms");
    let message = percent_decode(headers["grpc-message"].as_bytes());
    assert_eq!(
        message, "ADMISSION_SATURATED: pool `control` refused the call; retry in 1 s",
        "the message names the code, the pool and the retry hint"
    );
    assert!(
        took < Duration::from_secs(2),
        "a refusal never waits ({took:?})"
    );
    assert!(
        !control.more_seen(),
        "the refused call never reached the handler"
    );
    assert_eq!(requests.pool(Class::Control).stats().refused, 1);
    drop(held);
}

/// `grpc-message` is percent-encoded (gRPC over HTTP/2); the refusal's
/// message only needs spaces and backticks decoded.
fn percent_decode(value: &[u8]) -> String {
    let text = std::str::from_utf8(value).expect("ASCII");
    text.replace("%20", " ").replace("%60", "`")
}

#[tokio::test]
async fn resource_exhausted_when_the_layer_says_so() {
    let requests = RequestPools::new(1, 1).unwrap();
    let (probe, _control) = probe(&requests);
    let layer =
        AdmissionLayer::new(requests.clone()).refusal_status(GrpcRefusalStatus::ResourceExhausted);
    let addr = serve(layer, probe).await;
    let mut client = client(addr).await;

    let _held = requests.try_lease(Class::Control).unwrap();
    let refused = client.check(check("")).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused
            .message()
            .starts_with("ADMISSION_SATURATED: pool `control`")
    );
    assert_eq!(
        status::pushback(refused.metadata()),
        Hint::After(Duration::from_secs(1)),
        "the pushback is the same"
    );
}

#[tokio::test]
async fn registry_work_is_refused_fails_and_panics_as_rejections() {
    let requests = RequestPools::new(2, 2).unwrap();
    let (probe, mut control) = probe(&requests);
    let addr = serve(AdmissionLayer::new(requests.clone()), probe).await;
    let mut client = client(addr).await;
    let registry = control.registry.clone();

    assert!(client.check(check("walk")).await.is_ok());

    let walking = registry.try_admit().unwrap();
    let refused = client.check(check("walk")).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(
        refused
            .message()
            .starts_with("ADMISSION_SATURATED: pool `registry`"),
        "the registry pool refused: {}",
        refused.message()
    );
    // The first walk took microseconds: the pushback is the pool's
    // millisecond hint (a millisecond or so), where Retry-After says 1 s.
    let pushback: u32 = refused
        .metadata()
        .get("grpc-retry-pushback-ms")
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..1000).contains(&pushback), "{pushback}");
    drop(walking);

    let panicked = client.check(check("panic")).await.unwrap_err();
    assert_eq!(panicked.code(), Code::Internal);
    assert_eq!(
        panicked.message(),
        "ADMISSION_WORK_PANICKED",
        "a code, no panic message"
    );
    assert_eq!(
        status::pushback(panicked.metadata()),
        Hint::None,
        "a panic is no refusal"
    );
    let stats = registry.stats();
    assert_eq!(
        (stats.panicked, stats.in_use, stats.released),
        (1, 0, 3),
        "the panic released its slot (after the walk's and the test's own)"
    );
    assert!(
        client.check(check("walk")).await.is_ok(),
        "the slot serves the next call"
    );
    for _ in 0..4 {
        control.seen().await;
    }
    eventually("every call's lease is back", || {
        requests.stats().iter().all(|stats| stats.in_use == 0)
    })
    .await;
}
