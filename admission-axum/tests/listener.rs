//! The admitting listener `serve` gives `axum::serve`: HTTP/2 passes
//! through, and eviction has no grace period an attacker could stay under.

use std::time::Duration;

use admission_axum::serve::{ConnectionLimits, Connections};
use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const WAIT: Duration = Duration::from_secs(5);

async fn served(limits: ConnectionLimits) -> (std::net::SocketAddr, Connections) {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
    let server = admission_axum::serve(tcp, app)
        .limits(limits)
        .expect("valid limits");
    let connections = server.connections();
    tokio::spawn(std::future::IntoFuture::into_future(server));
    (addr, connections)
}

#[tokio::test]
async fn http2_with_prior_knowledge_passes_through() {
    let (addr, _) = served(ConnectionLimits::new()).await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    // The client preface, then an empty SETTINGS frame.
    stream
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        .await
        .unwrap();
    let mut frame = [0_u8; 9];
    tokio::time::timeout(WAIT, stream.read_exact(&mut frame))
        .await
        .expect("the server answers the preface")
        .unwrap();
    assert_eq!(
        frame[3], 0x4,
        "a SETTINGS frame: HTTP/2 was spoken, got {frame:?}"
    );
}

#[tokio::test]
async fn a_newcomer_evicts_the_oldest_waiting_connection_however_young() {
    let (addr, connections) = served(
        ConnectionLimits::new()
            .with_max_connections(2)
            .with_header_timeout(Duration::from_secs(60)),
    )
    .await;
    let mut attackers = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nX: ")
            .await
            .unwrap();
        attackers.push(stream);
    }
    tokio::time::timeout(WAIT, async {
        while connections.stats().open < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("both attackers are admitted");
    // At once, well inside the old 1 s grace.
    let mut probe = TcpStream::connect(addr).await.unwrap();
    probe
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    tokio::time::timeout(WAIT, probe.read_to_string(&mut answer))
        .await
        .expect("the newcomer is answered")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer:?}");
    let stats = connections.stats();
    assert_eq!((stats.evicted, stats.refused), (1, 0), "{stats:?}");
    // The oldest attacker went.
    let mut byte = [0_u8; 1];
    let first = tokio::time::timeout(WAIT, attackers[0].read(&mut byte)).await;
    assert!(
        matches!(first, Ok(Ok(0) | Err(_))),
        "the oldest was closed: {first:?}"
    );
}
