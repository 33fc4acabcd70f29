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

use support::{Service, frame, literal};

/// The bound on every wait that only matters when a test is about to fail.
const PATIENCE: Duration = Duration::from_secs(20);

/// Reads frames from `tcp` until the ACK of the PING carrying `payload`.
async fn pong(tcp: &mut TcpStream, payload: [u8; 8]) {
    let acked = async {
        loop {
            let mut head = [0u8; 9];
            tcp.read_exact(&mut head).await.expect("a frame's head");
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut body = vec![0u8; len];
            tcp.read_exact(&mut body).await.expect("a frame's payload");
            if head[3] == 0x6 && head[4] & 0x1 == 0x1 && body == payload {
                break;
            }
        }
    };
    tokio::time::timeout(PATIENCE, acked)
        .await
        .expect("the PING answered within the patience");
}

/// One connection opening `streams` `Walk` calls, each its HEADERS and the
/// first byte of a 10-byte message (of its 5-byte length prefix), never
/// END_STREAM. Each call is followed by a PING whose answer is awaited
/// before the next, and a last PING after them all: hyper admits a stream
/// as it accepts it, before it reads further, so once the last PING is
/// answered every call has been admitted. Returns a task that keeps the
/// connection open, its reads drained, until aborted.
async fn stalled_calls(addr: SocketAddr, streams: u32) -> tokio::task::JoinHandle<()> {
    let mut tcp = tokio::time::timeout(PATIENCE, TcpStream::connect(addr))
        .await
        .expect("a connection within the patience")
        .expect("the server accepts");
    let mut preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    preface.extend(frame(0x4, 0, 0, &[])); // SETTINGS, none changed
    tcp.write_all(&preface)
        .await
        .expect("the preface is written");
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http (static table)
    literal(&mut block, ":path", admission_examples::grpc::WALK);
    literal(&mut block, ":authority", "127.0.0.1");
    literal(&mut block, "content-type", "application/grpc");
    literal(&mut block, "te", "trailers");
    for n in 0..=streams {
        let ping = u64::from(n).to_be_bytes();
        let mut frames = Vec::new();
        if n < streams {
            let id = 1 + 2 * n;
            frames.extend(frame(0x1, 0x4, id, &block)); // HEADERS, END_HEADERS
            frames.extend(frame(0x0, 0, id, &[0])); // DATA: 1 byte, no END_STREAM
        }
        frames.extend(frame(0x6, 0, 0, &ping)); // PING
        tcp.write_all(&frames).await.expect("a call is written");
        pong(&mut tcp, ping).await;
    }
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
    // The 16 calls are admitted: an honest `Walk` finds no lease.
    let refused = walker
        .walk(WalkRequest::default())
        .await
        .expect_err("16 stalled calls hold every work lease");
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
