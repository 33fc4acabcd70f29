//! The write timeout means no progress (issue 38.5): a reader that keeps
//! taking bytes, however slowly, is never cut; one that takes none for
//! the timeout is. Real sockets on 127.0.0.1, the reader's receive buffer
//! small so the pace is the reader's, not the kernel's.

#![cfg(feature = "serve")]

use std::time::{Duration, Instant};

use admission_axum::serve::{ConnectionLimits, Connections};
use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// The body: 4 MiB (64 s at 64 KiB/s), more than the send buffer the
/// kernel gives a loopback connection (about 2.6 MiB at the start).
const BODY: usize = 4 << 20;
/// The write timeout under test.
const WRITE_TIMEOUT: Duration = Duration::from_secs(1);

async fn served() -> (std::net::SocketAddr, Connections) {
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = tcp.local_addr().unwrap();
    let app = Router::new().route("/big", get(|| async { vec![b'x'; BODY] }));
    let server = admission_axum::serve(tcp, app)
        .limits(ConnectionLimits::new().with_write_timeout(WRITE_TIMEOUT))
        .expect("valid limits");
    let connections = server.connections();
    tokio::spawn(std::future::IntoFuture::into_future(server));
    (addr, connections)
}

/// A connection whose receive buffer is 8 KiB, with `GET /big` sent.
async fn small_window_request(addr: std::net::SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(8 * 1024).unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    stream
        .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    stream
}

#[tokio::test]
async fn a_steady_64_kib_per_second_reader_is_never_cut_and_a_stalled_one_is() {
    let (addr, connections) = served().await;

    // The stalled reader: takes nothing after its request.
    let stalled = small_window_request(addr).await;

    // The slow reader: 8 KiB every 125 ms, never pausing a whole second.
    let mut slow = small_window_request(addr).await;
    let started = Instant::now();
    let mut read = 0_usize;
    let mut chunk = vec![0_u8; 8 * 1024];
    let mut next = tokio::time::Instant::now();
    loop {
        next += Duration::from_millis(125);
        tokio::time::sleep_until(next).await;
        let mut taken = 0;
        while taken < chunk.len() {
            match slow.read(&mut chunk[taken..]).await {
                Ok(0) => break,
                Ok(n) => taken += n,
                Err(err) => panic!("the slow reader was cut after {read} bytes: {err}"),
            }
        }
        read += taken;
        if taken < chunk.len() {
            break;
        }
    }
    let took = started.elapsed();
    println!(
        "read {read} bytes in {took:?} ({:.0} KiB/s); {:?}",
        read as f64 / 1024.0 / took.as_secs_f64(),
        connections.stats()
    );
    assert!(
        read > BODY,
        "the whole body and its head were read: {read} bytes"
    );
    let stats = connections.stats();
    assert_eq!(
        stats.write_timeouts, 1,
        "the stalled reader, and only it, was cut: {stats:?}"
    );
    drop(stalled);
}
