//! Hostile input against a saturated server, through both adapters: a
//! refusal never echoes request data. Requests carry a secret and markup
//! in the path, the query and headers; the `503` they get (status line,
//! headers and body, read raw off the socket) must contain none of it.
//!
//! Two saturations: the registry pool (its only worker held by a walk, the
//! handler's `registry` call refused) and the request class (its only lease
//! held by a gated handler, the middleware refusing before any handler).
//!
//! Tests are `axum::<case>` and `actix::<case>`; the servers are the
//! conformance suite's harness.

// The conformance suite's modules, shared: this suite uses a part of them.
#[allow(dead_code)]
#[path = "conformance/client.rs"]
mod client;
#[allow(dead_code)]
#[path = "conformance/endpoints.rs"]
mod endpoints;
#[allow(dead_code)]
#[path = "conformance/harness.rs"]
mod harness;

use std::net::SocketAddr;

use admission_core::{Pool, RequestPools};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use client::{answer, spawn_get, within};
use endpoints::{Endpoint, Gate, METRICS, Walk};
use harness::Adapter;

/// What a hostile request carries; none of it may come back.
const SECRET: &str = "secret-42";
/// Fragments of the hostile input that must never come back, compared
/// without regard to case.
const NEVER_ECHOED: [&str; 8] = [
    "secret-42",
    "secret%2d42",
    "<script",
    "script>",
    "%3cscript",
    "x-tenant",
    "tenant=",
    "evil.invalid",
];

/// Header lines every hostile request carries.
fn hostile_headers() -> String {
    [
        format!("X-Tenant: {SECRET}"),
        format!("Cookie: session={SECRET}"),
        format!("Authorization: Bearer {SECRET}"),
        format!("User-Agent: <script>{SECRET}</script>"),
        format!("X-Forwarded-For: {SECRET}"),
        format!("Referer: http://evil.invalid/{SECRET}"),
        format!("Accept-Language: {SECRET}"),
    ]
    .map(|line| line + "\r\n")
    .concat()
}

/// Hostile targets of route `path` (which must be routed to it), and the
/// status each gets while the pool is full: markup and the secret in the
/// query, percent-encoded (a refusal), a JSON-breaking query, repeated
/// keys, and raw markup (which the HTTP parser itself rejects with `400`,
/// before any admission; that answer must not echo either).
fn hostile_targets(path: &str) -> Vec<(String, &'static str)> {
    vec![
        (
            format!("{path}?x=%3Cscript%3E{SECRET}%3C%2Fscript%3E&tenant={SECRET}"),
            "503",
        ),
        (
            format!("{path}?x=%22%7D%2C%22pool%22%3A%22{SECRET}%22%7D"),
            "503",
        ),
        (
            format!("{path}?tenant={SECRET}&tenant=secret%2d42&x"),
            "503",
        ),
        (format!("{path}?{SECRET}"), "503"),
        (format!("{path}?x=<script>{SECRET}</script>"), "400"),
    ]
}

/// Sends `GET target` with the hostile headers on a fresh connection and
/// reads the raw answer to its end (`Connection: close`).
async fn exchange(addr: SocketAddr, target: &str) -> String {
    within(&format!("an answer to GET {target}"), async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {addr}\r\n{}Connection: close\r\n\r\n",
            hostile_headers()
        );
        stream
            .write_all(request.as_bytes())
            .await
            .expect("send the request");
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.expect("read the answer");
        String::from_utf8(raw).expect("the answer is UTF-8")
    })
    .await
}

/// `raw` has status `expected` (a `503` refusal naming `pool`), and echoes
/// nothing hostile.
fn assert_echoes_nothing(raw: &str, target: &str, expected: &str, pool: &str) {
    let status = raw.lines().next().unwrap_or_default();
    assert!(
        status.starts_with(&format!("HTTP/1.1 {expected} ")),
        "GET {target} with the pool full is answered {expected}, got {status:?}"
    );
    if expected == "503" {
        assert!(
            raw.contains(&format!(r#""pool":"{pool}""#)),
            "the refusal names the pool {pool}: {raw:?}"
        );
    }
    let lower = raw.to_ascii_lowercase();
    for fragment in NEVER_ECHOED {
        assert!(
            !lower.contains(fragment),
            "the answer to GET {target} echoes {fragment:?}: {raw:?}"
        );
    }
}

/// With the registry's only worker held, every hostile scrape is refused
/// by the handler's `registry` call, and the refusal echoes none of it.
async fn saturated_registry_refusal_echoes_no_request_data(adapter: Adapter) {
    let requests = RequestPools::new(8, 8).expect("valid request pools");
    let registry = Pool::new("registry", 1).expect("a valid registry pool");
    let (walk, mut walks) = Walk::held("# EOF\n");
    let routes =
        harness::Routes::new().route("/metrics", Endpoint::registry(&registry, walk, METRICS));
    let server = adapter.serve(&requests, routes).await;

    let holding = spawn_get(server.url("/metrics"));
    let held = walks.started().await;
    for (target, expected) in hostile_targets(&server.path("/metrics")) {
        let raw = exchange(server.addr(), &target).await;
        assert_echoes_nothing(&raw, &target, expected, "registry");
    }
    assert!(!walks.more_started(), "no hostile scrape reached a worker");

    held.release();
    assert_eq!(
        answer(holding).await.status,
        reqwest::StatusCode::OK,
        "the held scrape is answered"
    );
    server.stop().await;
}

/// With the only *control* lease held by a gated handler, the middleware
/// refuses every hostile read before any handler runs, and the refusal
/// echoes none of it.
async fn full_request_class_refusal_echoes_no_request_data(adapter: Adapter) {
    let requests = RequestPools::new(1, 1).expect("valid request pools");
    let (gated, mut gate) = Gate::endpoint();
    let routes = harness::Routes::new().route("/held", gated);
    let server = adapter.serve(&requests, routes).await;

    let holding = spawn_get(server.url("/held"));
    gate.arrivals(1).await;
    let mut targets = hostile_targets(&server.path("/held"));
    // The middleware refuses before routing: an unknown path as well.
    let unknown = format!("/{SECRET}/%3Cscript%3E?tenant={SECRET}");
    targets.push((server.path(&unknown), "503"));
    for (target, expected) in targets {
        let raw = exchange(server.addr(), &target).await;
        assert_echoes_nothing(&raw, &target, expected, "control");
    }
    assert_eq!(gate.more_arrived(), 0, "no hostile read reached a handler");

    gate.open(1);
    assert_eq!(
        answer(holding).await.status,
        reqwest::StatusCode::OK,
        "the held read is answered"
    );
    server.stop().await;
}

/// Both cases for `$adapter`.
macro_rules! every_case {
    ($adapter:expr) => {
        #[tokio::test]
        async fn saturated_registry_refusal_echoes_no_request_data() {
            crate::saturated_registry_refusal_echoes_no_request_data($adapter).await;
        }

        #[tokio::test]
        async fn full_request_class_refusal_echoes_no_request_data() {
            crate::full_request_class_refusal_echoes_no_request_data($adapter).await;
        }
    };
}

mod axum {
    //! The cases against `admission-axum`, layer mounted router-wide.

    use super::Adapter;

    every_case!(Adapter::AXUM);
}

mod actix {
    //! The cases against `admission-actix`, middleware on the `App`.

    use super::Adapter;

    every_case!(Adapter::ACTIX);
}
