//! Connection admission over real sockets on 127.0.0.1: the cap closes the
//! oldest connection that sent no HTTP/2 preface, the preface deadline
//! closes a silent one, a connection that sent its preface is never
//! evicted, and a zero setting is refused at construction.

mod common;

use std::time::Duration;

use admission_core::RequestPools;
use admission_tonic::AdmissionLayer;
use admission_tonic::connections::{self, ConnectionLimits, Connections};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tonic::transport::Server;

use common::{bind, check, client, eventually, within};

/// A health server behind `limits`; its counters.
async fn serve(limits: ConnectionLimits) -> (std::net::SocketAddr, Connections) {
    let (listener, addr) = bind().await;
    let incoming = connections::incoming(listener, limits).expect("valid limits");
    let connections = incoming.connections();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = connections::server(&limits, Server::builder())
        .layer(AdmissionLayer::new(RequestPools::new(1, 1).unwrap()))
        .add_service(health)
        .serve_with_incoming(incoming);
    tokio::spawn(server);
    (addr, connections)
}

/// Whether the server closed `stream` (EOF or reset) within the patience.
async fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 64];
    loop {
        match within("the server to close", stream.read(&mut byte)).await {
            Ok(0) | Err(_) => return true,
            // The server's own SETTINGS: keep reading.
            Ok(_) => {}
        }
    }
}

#[tokio::test]
async fn at_the_cap_the_oldest_silent_connection_makes_room() {
    let limits = ConnectionLimits::new()
        .with_max_connections(4)
        .with_header_timeout(Duration::from_secs(30));
    let (addr, connections) = serve(limits).await;
    let mut silent = Vec::new();
    for _ in 0..4 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    eventually("4 connections open", || connections.stats().open == 4).await;

    // A real client at the cap: admitted, answered, and the oldest silent
    // connection is the one closed for it.
    let mut health = client(addr).await;
    assert!(health.check(check("")).await.is_ok());
    assert!(closed(&mut silent[0]).await, "the oldest went");
    let stats = connections.stats();
    assert_eq!((stats.open, stats.evicted), (4, 1), "{stats:?}");

    // Three more silent ones: each evicts an older silent one, never the
    // client, which sent its preface.
    for _ in 0..3 {
        silent.push(TcpStream::connect(addr).await.unwrap());
    }
    eventually("3 more evictions", || connections.stats().evicted == 4).await;
    assert!(health.check(check("")).await.is_ok(), "the client stays");
}

#[tokio::test]
async fn a_connection_that_sends_no_preface_is_closed_at_the_deadline() {
    let limits = ConnectionLimits::new().with_header_timeout(Duration::from_millis(200));
    let (addr, connections) = serve(limits).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    assert!(closed(&mut silent).await);
    assert_eq!(connections.stats().header_timeouts, 1);
    eventually("the connection closed", || connections.stats().open == 0).await;

    // A client's preface comes in time: it is served past the deadline.
    let mut health = client(addr).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(health.check(check("")).await.is_ok());
    assert_eq!(connections.stats().header_timeouts, 1);
}

#[tokio::test]
async fn a_zero_setting_is_refused_by_name() {
    let (listener, _) = bind().await;
    let limits = ConnectionLimits::new().with_max_connections(0);
    let err = connections::incoming(listener, limits).unwrap_err();
    assert_eq!(err.to_string(), "`max_connections` must be above zero");
}
