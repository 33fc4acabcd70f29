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
//!
//! `connections::<case>` holds the hostile clients of the connection
//! layer against `admission_axum::serve`: slowloris past the bound,
//! every connection busy, and shutdown with both kinds open.

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
    exchange_with(addr, target, "").await
}

/// [`exchange`], with `more` header lines (each ending in CRLF).
async fn exchange_with(addr: SocketAddr, target: &str, more: &str) -> String {
    within(&format!("an answer to GET {target}"), async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let request = format!(
            "GET {target} HTTP/1.1\r\nHost: {addr}\r\n{}{more}Connection: close\r\n\r\n",
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

/// Hostile `x-admission-flow` header lines: markup, 10 KB, a value outside
/// the grammar, a repeat, and a well-formed key; each carries the secret.
fn hostile_flow_headers() -> [String; 5] {
    [
        format!("X-Admission-Flow: <script>{SECRET}</script>\r\n"),
        format!(
            "X-Admission-Flow: {}\r\n",
            SECRET.repeat(10 * 1024 / SECRET.len())
        ),
        format!("X-Admission-Flow: \"{SECRET}\"}}\r\n"),
        format!("X-Admission-Flow: {SECRET}\r\nX-Admission-Flow: {SECRET}\r\n"),
        format!("X-Admission-Flow: {SECRET}\r\n"),
    ]
}

/// With the only *control* lease held and the app naming flows, under
/// either trust policy, every hostile flow header (markup, 10 KB, a repeat,
/// a well-formed key) gets the middleware's refusal, which echoes none of
/// it, and no handler runs.
async fn hostile_flow_headers_are_refused_without_an_echo(adapter: Adapter) {
    for trust in [admission_http::Trust::Nobody, admission_http::Trust::Peers] {
        let requests = RequestPools::new(1, 1).expect("valid request pools");
        let (gated, mut gate) = Gate::endpoint();
        let routes = harness::Routes::new().route("/held", gated);
        let config = harness::Config {
            trust,
            flow: true,
            ..harness::Config::default()
        };
        let server = adapter.serve_with(&requests, routes, config).await;

        let holding = spawn_get(server.url("/held"));
        gate.arrivals(1).await;
        let target = server.path("/held");
        for flow in hostile_flow_headers() {
            let raw = exchange_with(server.addr(), &target, &flow).await;
            assert_echoes_nothing(&raw, &target, "503", "control");
        }
        assert_eq!(
            gate.more_arrived(),
            0,
            "{trust:?}: no hostile read reached a handler"
        );

        gate.open(1);
        assert_eq!(
            answer(holding).await.status,
            reqwest::StatusCode::OK,
            "the held read is answered"
        );
        server.stop().await;
    }
}

/// Every case for `$adapter`.
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

        #[tokio::test]
        async fn hostile_flow_headers_are_refused_without_an_echo() {
            crate::hostile_flow_headers_are_refused_without_an_echo($adapter).await;
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

mod connections {
    //! Connection admission (`admission_axum::serve`) against clients that
    //! hold connections: each test serves a small router on 127.0.0.1 with
    //! a small bound, and stops it.

    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use admission_axum::serve::{ConnectionLimits, Connections};
    use axum::Router;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;
    use tokio::sync::{mpsc, oneshot};
    use tokio::task::JoinHandle;

    /// How long any one read waits before the test fails.
    const WAIT: Duration = Duration::from_secs(5);
    /// The eviction grace of `serve`: a connection waiting for its head
    /// less than this is not evicted.
    const GRACE: Duration = Duration::from_millis(1100);

    /// A served router: its address, counters, stop switch and task.
    struct Served {
        addr: SocketAddr,
        connections: Connections,
        stop: oneshot::Sender<()>,
        task: JoinHandle<std::io::Result<()>>,
    }

    /// Serves `/healthz` and `/slow` (which tells `entered` it runs, then
    /// waits for `release` to close) under `limits`.
    async fn serve(
        limits: ConnectionLimits,
        entered: mpsc::UnboundedSender<()>,
        release: tokio::sync::watch::Receiver<bool>,
    ) -> Served {
        let slow = move || {
            let (entered, mut release) = (entered.clone(), release.clone());
            async move {
                let _ = entered.send(());
                let _ = release.wait_for(|released| *released).await;
                "done\n"
            }
        };
        let app = Router::new()
            .route("/healthz", get(|| async { "ok\n" }))
            .route("/slow", get(slow));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = admission_axum::serve(listener, app)
            .limits(limits)
            .expect("valid limits")
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            });
        let connections = server.connections();
        let task = tokio::spawn(std::future::IntoFuture::into_future(server));
        Served {
            addr,
            connections,
            stop,
            task,
        }
    }

    /// A connection that has sent half a request head.
    async fn half_sent(addr: SocketAddr) -> TcpStream {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        stream
    }

    /// Sends a whole request for `path` and returns the connection.
    async fn request(addr: SocketAddr, path: &str) -> TcpStream {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        stream
    }

    /// Everything until the server closes, at most [`WAIT`].
    async fn read_all(stream: &mut TcpStream) -> String {
        let mut answer = Vec::new();
        tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
            .await
            .expect("the server answers or closes in time")
            .unwrap_or_default();
        String::from_utf8_lossy(&answer).into_owned()
    }

    /// Waits (at most [`WAIT`]) until `done` holds of the counters.
    async fn until(connections: &Connections, what: &str, done: impl Fn(&Connections) -> bool) {
        let started = Instant::now();
        while !done(connections) {
            assert!(
                started.elapsed() < WAIT,
                "{what}: {:?}",
                connections.stats()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn past_the_bound_a_newcomer_evicts_the_longest_waiting_slowloris() {
        let (entered, _) = mpsc::unbounded_channel();
        let (_release, released) = tokio::sync::watch::channel(false);
        let limits = ConnectionLimits::new()
            .with_max_connections(8)
            .with_header_timeout(Duration::from_secs(60));
        let served = serve(limits, entered, released).await;
        let mut attackers = Vec::new();
        for _ in 0..8 {
            attackers.push(half_sent(served.addr).await);
        }
        until(&served.connections, "eight open", |c| c.stats().open == 8).await;
        // Past the grace, the attackers are the longest waiting.
        tokio::time::sleep(GRACE).await;
        for round in 0..3 {
            let answer = read_all(&mut request(served.addr, "/healthz").await).await;
            assert!(
                answer.starts_with("HTTP/1.1 200 ") && answer.ends_with("ok\n"),
                "round {round}: /healthz is served at the bound, got {answer:?}"
            );
            // The attacker takes the room back (a young one, which the
            // next newcomer does not pick while older ones wait).
            until(&served.connections, "the answered one closed", |c| {
                c.stats().open == 7
            })
            .await;
            attackers.push(half_sent(served.addr).await);
            until(&served.connections, "at the bound again", |c| {
                c.stats().open == 8
            })
            .await;
        }
        let stats = served.connections.stats();
        assert_eq!(
            stats.evicted, 3,
            "one attacker evicted per newcomer: {stats:?}"
        );
        assert_eq!(stats.refused, 0, "{stats:?}");
        // The longest waiting went first, in order; the others still wait.
        for (i, attacker) in attackers.iter_mut().enumerate().take(4) {
            let mut byte = [0; 1];
            let read =
                tokio::time::timeout(Duration::from_millis(200), attacker.read(&mut byte)).await;
            match read {
                Ok(Ok(0)) => assert!(i < 3, "attacker {i} was evicted out of turn"),
                Err(_still_open) => assert_eq!(i, 3, "attacker {i} was not evicted"),
                other => panic!("attacker {i}: an evicted connection gets no answer: {other:?}"),
            }
        }
        served.stop.send(()).unwrap();
        served.task.await.unwrap().unwrap();
        assert_eq!(
            served.connections.stats().open,
            0,
            "shutdown closed every connection"
        );
    }

    #[tokio::test]
    async fn past_the_bound_with_every_request_in_flight_a_newcomer_is_closed_at_once() {
        let (entered, mut running) = mpsc::unbounded_channel();
        let (release, released) = tokio::sync::watch::channel(false);
        let served = serve(
            ConnectionLimits::new().with_max_connections(2),
            entered,
            released,
        )
        .await;
        let mut busy = vec![
            request(served.addr, "/slow").await,
            request(served.addr, "/slow").await,
        ];
        for _ in 0..2 {
            running.recv().await.expect("a slow request runs");
        }
        tokio::time::sleep(GRACE).await;
        let started = Instant::now();
        let refused = read_all(&mut request(served.addr, "/healthz").await).await;
        assert!(
            refused.is_empty(),
            "closed without an answer, got {refused:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(1), "closed at once");
        let stats = served.connections.stats();
        assert_eq!((stats.refused, stats.evicted), (1, 0), "{stats:?}");

        release.send(true).unwrap();
        for stream in &mut busy {
            let answer = read_all(stream).await;
            assert!(
                answer.ends_with("done\n"),
                "requests in flight are never cut: {answer:?}"
            );
        }
        served.stop.send(()).unwrap();
        served.task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn shutdown_closes_waiting_connections_and_finishes_requests_in_flight() {
        let (entered, mut running) = mpsc::unbounded_channel();
        let (release, released) = tokio::sync::watch::channel(false);
        let served = serve(ConnectionLimits::new(), entered, released).await;
        let mut waiting = half_sent(served.addr).await;
        let mut busy = request(served.addr, "/slow").await;
        running.recv().await.expect("the slow request runs");
        until(&served.connections, "two open", |c| c.stats().open == 2).await;

        served.stop.send(()).unwrap();
        let closed = read_all(&mut waiting).await;
        assert!(
            closed.is_empty(),
            "a waiting connection is closed at once: {closed:?}"
        );
        assert!(
            !served.task.is_finished(),
            "the request in flight is still served"
        );
        release.send(true).unwrap();
        let answer = read_all(&mut busy).await;
        assert!(answer.ends_with("done\n"), "and finishes: {answer:?}");
        tokio::time::timeout(WAIT, served.task)
            .await
            .expect("serving ends once every connection closed")
            .unwrap()
            .unwrap();
        assert_eq!(served.connections.stats().open, 0);
    }
}
