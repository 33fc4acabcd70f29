//! Clients that stop sending their request, against the `grpc-exporter`
//! binary over real HTTP/2 on 127.0.0.1: HEADERS and one byte of a
//! message, then nothing, on every stream of one connection (issue 38,
//! finding 1). Before the request-body bound the calls held every *work*
//! lease for as long as the client stayed; now each ends at the progress
//! bound and an honest `Walk` is admitted within the bound and 1 s.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use admission_examples::grpc::{RegistryClient, WalkRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::transport::Endpoint;

use support::Service;

/// The bound on every wait that only matters when a test is about to fail.
const PATIENCE: Duration = Duration::from_secs(20);

/// An HTTP/2 frame: its 9-byte header and `payload`.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame");
    let mut frame = len.to_be_bytes()[1..].to_vec();
    frame.extend([kind, flags]);
    frame.extend(stream.to_be_bytes());
    frame.extend(payload);
    frame
}

/// An HPACK literal header field without indexing, new name, no Huffman.
fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
    block.push(0x00);
    for text in [name, value] {
        block.push(u8::try_from(text.len()).expect("a short header"));
        block.extend(text.as_bytes());
    }
}

/// One connection opening `streams` `Walk` calls, each its HEADERS and the
/// first byte of a 10-byte message (of its 5-byte length prefix), never
/// END_STREAM. The connection stays open (its reads drained) until the
/// returned task is aborted.
async fn stalled_calls(addr: SocketAddr, streams: u32) -> tokio::task::JoinHandle<()> {
    let mut tcp = tokio::time::timeout(PATIENCE, TcpStream::connect(addr))
        .await
        .expect("a connection within the patience")
        .expect("the server accepts");
    let mut burst = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    burst.extend(frame(0x4, 0, 0, &[])); // SETTINGS, none changed
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    literal(&mut block, ":path", admission_examples::grpc::WALK);
    literal(&mut block, ":authority", "127.0.0.1");
    literal(&mut block, "content-type", "application/grpc");
    literal(&mut block, "te", "trailers");
    for n in 0..streams {
        let id = 1 + 2 * n;
        burst.extend(frame(0x1, 0x4, id, &block)); // HEADERS, END_HEADERS
        burst.extend(frame(0x0, 0, id, &[0])); // DATA: 1 byte, no END_STREAM
    }
    tcp.write_all(&burst).await.expect("the burst is written");
    tokio::spawn(async move {
        let mut sink = [0u8; 4096];
        while let Ok(n) = tcp.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
        // Closed by the server: keep nothing open, but do not end early
        // either (the test aborts this task).
        std::future::pending::<()>().await;
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_request_bodies_give_their_leases_back_at_the_progress_bound() {
    const BOUND: Duration = Duration::from_secs(3);
    let mut server = Service::start(
        env!("CARGO_BIN_EXE_grpc-exporter"),
        &[
            "--series",
            "50",
            "--work-slots",
            "16",
            "--progress-timeout-ms",
            "3000",
        ],
    )
    .await;
    let addr = server.addr;
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).expect("a URI");
    let channel = tokio::time::timeout(PATIENCE, endpoint.connect())
        .await
        .expect("a connection within the patience")
        .expect("the server accepts");
    let mut walker = RegistryClient::new(channel);

    let attacked = Instant::now();
    let attacker = stalled_calls(addr, 16).await;
    // Once the 16 calls are admitted, an honest `Walk` finds no lease.
    let refused = loop {
        match walker.walk(WalkRequest::default()).await {
            Err(status) => break status,
            Ok(_) => assert!(
                attacked.elapsed() < BOUND / 2,
                "a Walk was still admitted {:?} after 16 stalled calls",
                attacked.elapsed()
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().starts_with("ADMISSION_SATURATED"),
        "{}",
        refused.message()
    );

    // At the bound the stalled calls end and their leases are back.
    let admitted = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        match walker.walk(WalkRequest::default()).await {
            Ok(_) => break attacked.elapsed(),
            Err(status) => assert!(
                attacked.elapsed() < BOUND + Duration::from_secs(1),
                "Walk still refused {:?} after 16 stalled request bodies (bound {BOUND:?}): {:?} {}",
                attacked.elapsed(),
                status.code(),
                status.message()
            ),
        }
    };
    println!(
        "16 stalled request bodies: an honest Walk admitted {admitted:?} after the attack (bound {BOUND:?})"
    );
    server.assert_alive("16 stalled request bodies");
    let logs = server.logs();
    let stalls: Vec<&str> = logs
        .lines()
        .filter(|line| line.contains("ADMISSION_STREAM_STALLED"))
        .collect();
    assert_eq!(
        stalls.len(),
        1,
        "one line for the 16 stalls (the rest are counted for the next):\n{logs}"
    );
    assert!(
        stalls[0].contains("WARN") && stalls[0].contains("side=\"request\""),
        "{}",
        stalls[0]
    );
    attacker.abort();
}
