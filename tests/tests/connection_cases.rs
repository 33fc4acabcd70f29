//! Connection-limit conformance: one list of cases, run on every
//! adapter's server (axum's `serve`, tonic's `connections`, actix-web's
//! `serve`), all built on `admission_http::connection::Incoming`. Real
//! sockets on 127.0.0.1; a slow sender sends the start of its protocol's
//! head and never the rest (half an HTTP/1 head; 16 of the 24 bytes of the
//! HTTP/2 preface).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

use admission_http::connection::{ConnectionLimits, Connections};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long any one wait lasts before the case fails.
const WAIT: Duration = Duration::from_secs(5);

/// What a slow sender sends over HTTP/1: the start of a head.
const SLOW_HTTP1: &[u8] = b"GET / HTTP/1.1\r\nX: ";
/// ... and over HTTP/2 with prior knowledge: the start of the preface.
const SLOW_HTTP2: &[u8] = b"PRI * HTTP/2.0\r\n";

type Probe = Box<dyn Fn(SocketAddr) -> Pin<Box<dyn Future<Output = Result<(), String>>>>>;

/// One adapter's server under test.
struct Served {
    addr: SocketAddr,
    connections: Connections,
    /// A real client's request on a fresh connection: `Ok` once answered.
    probe: Probe,
    /// What a slow sender sends.
    slow: &'static [u8],
}

/// The adapters, by name: each serves a health route under `limits`.
async fn adapters(limits: ConnectionLimits) -> Vec<(&'static str, Served)> {
    vec![
        ("axum", axum_server(limits).await),
        ("tonic", tonic_server(limits).await),
        ("actix-web", actix_server(limits)),
    ]
}

fn http_probe() -> Probe {
    Box::new(|addr| {
        Box::pin(async move {
            let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            let mut answer = Vec::new();
            let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut answer)).await;
            if answer.starts_with(b"HTTP/1.1 200 ") {
                Ok(())
            } else {
                Err(format!("got {:?}", String::from_utf8_lossy(&answer)))
            }
        })
    })
}

async fn axum_server(limits: ConnectionLimits) -> Served {
    use axum::{Router, routing::get};
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
    let server = admission_axum::serve(tcp, app).limits(limits).unwrap();
    let connections = server.connections();
    tokio::spawn(std::future::IntoFuture::into_future(server));
    Served {
        addr,
        connections,
        probe: http_probe(),
        slow: SLOW_HTTP1,
    }
}

fn actix_server(limits: ConnectionLimits) -> Served {
    use actix_web::{App, web};
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = tcp.local_addr().unwrap();
    let server = admission_actix::serve::serve(|| {
        App::new().route("/healthz", web::get().to(|| async { "ok\n" }))
    })
    .limits(limits)
    .unwrap()
    .listen(tcp)
    .unwrap();
    let connections = server.connections();
    // Serves until the test's runtime ends.
    std::mem::forget(server);
    Served {
        addr,
        connections,
        probe: http_probe(),
        slow: SLOW_HTTP1,
    }
}

async fn tonic_server(limits: ConnectionLimits) -> Served {
    use admission_tonic::connections;
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let incoming = connections::incoming(tcp, limits).unwrap();
    let counted = incoming.connections();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = connections::server(&limits, tonic::transport::Server::builder())
        .add_service(health)
        .serve_with_incoming(incoming);
    tokio::spawn(server);
    let probe: Probe = Box::new(|addr| {
        Box::pin(async move {
            use tonic_health::pb::HealthCheckRequest;
            use tonic_health::pb::health_client::HealthClient;
            let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect_timeout(WAIT)
                .connect()
                .await
                .map_err(|e| e.to_string())?;
            HealthClient::new(channel)
                .check(HealthCheckRequest::default())
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        })
    });
    Served {
        addr,
        connections: counted,
        probe,
        slow: SLOW_HTTP2,
    }
}

/// A connection that sent the start of a head and nothing more.
async fn slow_sender(served: &Served) -> TcpStream {
    let mut stream = TcpStream::connect(served.addr).await.unwrap();
    stream.write_all(served.slow).await.unwrap();
    stream
}

/// Whether the server closed `stream` (EOF or reset) within [`WAIT`]; an
/// HTTP/2 server's own SETTINGS are read past.
async fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0_u8; 256];
    loop {
        match tokio::time::timeout(WAIT, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => return false,
        }
    }
}

async fn until(
    name: &str,
    what: &str,
    connections: &Connections,
    done: impl Fn(&Connections) -> bool,
) {
    let started = Instant::now();
    while !done(connections) {
        assert!(
            started.elapsed() < WAIT,
            "{name}: {what}: {:?}",
            connections.stats()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// At the bound, slow senders are evicted oldest first for newcomers, and
/// a real client is served.
async fn a_slow_header_sender_is_evicted_and_a_newcomer_served(name: &str, served: Served) {
    let mut slow = Vec::new();
    for _ in 0..4 {
        slow.push(slow_sender(&served).await);
    }
    until(name, "four open", &served.connections, |c| {
        c.stats().open == 4
    })
    .await;
    (served.probe)(served.addr)
        .await
        .unwrap_or_else(|err| panic!("{name}: the newcomer is served: {err}"));
    assert!(
        closed(&mut slow[0]).await,
        "{name}: the oldest slow sender went"
    );
    let stats = served.connections.stats();
    assert!(stats.evicted >= 1, "{name}: counted as evicted: {stats:?}");
    assert_eq!(stats.refused, 0, "{name}: nobody refused: {stats:?}");
}

/// A slow sender is closed at the header timeout, counted, and a client
/// after it is served.
async fn a_slow_header_sender_is_closed_at_the_header_timeout(name: &str, served: Served) {
    let sent = Instant::now();
    let mut slow = slow_sender(&served).await;
    assert!(closed(&mut slow).await, "{name}: closed");
    let took = sent.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{name}: closed at the 300 ms header timeout, after {took:?}"
    );
    until(name, "one header timeout", &served.connections, |c| {
        c.stats().header_timeouts == 1
    })
    .await;
    (served.probe)(served.addr)
        .await
        .unwrap_or_else(|err| panic!("{name}: a client after it is served: {err}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_adapter_evicts_a_slow_header_sender_for_a_newcomer() {
    let limits = ConnectionLimits::new()
        .with_max_connections(4)
        .with_header_timeout(Duration::from_secs(60));
    for (name, served) in adapters(limits).await {
        a_slow_header_sender_is_evicted_and_a_newcomer_served(name, served).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_adapter_closes_a_slow_header_sender_at_the_header_timeout() {
    let limits = ConnectionLimits::new().with_header_timeout(Duration::from_millis(300));
    for (name, served) in adapters(limits).await {
        a_slow_header_sender_is_closed_at_the_header_timeout(name, served).await;
    }
}
