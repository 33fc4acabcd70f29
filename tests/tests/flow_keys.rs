//! Issue 39's hostile case over HTTP: one client, trusted to name flows
//! (`trust_peers()`), sends 100,000 requests each naming a new flow in
//! `x-admission-flow` to a saturated class. Every one is answered at once
//! with a refusal, `/healthz` (outside the layer) is answered throughout,
//! and the process's resident memory stays within a bound the flow table
//! cannot explain away: its table is fixed (256 buckets a pool), so 100,000
//! keys leave no trace of their own. Its own test binary, so no other test
//! allocates meanwhile; Linux only (it reads `/proc/self/statm`).

#![cfg(target_os = "linux")]

use admission_axum::AdmissionLayer;
use admission_core::{Class, RequestPools};
use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Distinct flow keys the client sends.
const KEYS: u32 = 100_000;
/// Requests written at once on the connection (pipelined).
const BATCH: u32 = 500;
/// Resident growth allowed: the server's buffers and the allocator's
/// arenas, not a few dozen bytes a key (100,000 keys at 32 bytes would be
/// 3 MiB more on their own, in a map that grows, at least 6).
const BOUND: u64 = 8 << 20;

fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Reads `n` answers off `stream` (each ends with its body, whose length
/// `content-length` gives) and returns how many were `503`s naming an
/// overload code; no answer is kept past its count.
async fn refusals(stream: &mut TcpStream, n: u32, buffer: &mut Vec<u8>) -> u32 {
    let mut refused = 0;
    let mut answered = 0;
    let mut chunk = [0_u8; 64 * 1024];
    while answered < n {
        // Whole answers at the front of the buffer.
        while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buffer[..end])
                .unwrap()
                .to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |l| l.trim().parse().unwrap());
            if buffer.len() < end + 4 + length {
                break;
            }
            let body = &buffer[end + 4..end + 4 + length];
            if head.starts_with("http/1.1 503")
                && (body.windows(20).any(|w| w == b"ADMISSION_FLOW_SHARE")
                    || body.windows(19).any(|w| w == b"ADMISSION_SATURATED"))
            {
                refused += 1;
            }
            buffer.drain(..end + 4 + length);
            answered += 1;
        }
        if answered == n {
            break;
        }
        let read = stream.read(&mut chunk).await.unwrap();
        assert!(
            read > 0,
            "the server closed the connection after {answered} answers"
        );
        buffer.extend_from_slice(&chunk[..read]);
    }
    refused
}

#[tokio::test(flavor = "current_thread")]
async fn a_hundred_thousand_flow_keys_from_a_trusted_client_keep_memory_bounded_and_health_answered()
 {
    let pools = RequestPools::new(4, 1).unwrap();
    let app = Router::new()
        .route("/work", get(|| async { "done\n" }))
        .layer(AdmissionLayer::class(pools.clone(), Class::Work).trust_peers())
        .route("/healthz", get(|| async { "ok\n" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    // The class is saturated by the app's own callers: every flow asks.
    let _held: Vec<_> = (0..4)
        .map(|_| pools.try_lease(Class::Work).unwrap())
        .collect();

    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut buffer = Vec::new();
    let health = |addr| async move {
        let mut probe = TcpStream::connect(addr).await.unwrap();
        probe
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        probe.read_to_string(&mut answer).await.unwrap();
        answer.starts_with("HTTP/1.1 200")
    };
    // Warm the server's buffers and the allocator before measuring.
    let mut refused = 0;
    let mut batch = String::new();
    let mut send = async |stream: &mut TcpStream, from: u32, buffer: &mut Vec<u8>| {
        batch.clear();
        for key in from..from + BATCH {
            batch.push_str(&format!(
                "GET /work HTTP/1.1\r\nHost: x\r\nX-Admission-Flow: tenant-{key}\r\n\r\n"
            ));
        }
        stream.write_all(batch.as_bytes()).await.unwrap();
        refusals(stream, BATCH, buffer).await
    };
    refused += send(&mut stream, KEYS, &mut buffer).await;
    let before = resident_bytes();
    for from in (0..KEYS).step_by(BATCH as usize) {
        refused += send(&mut stream, from, &mut buffer).await;
        if from % 20_000 == 0 {
            assert!(
                health(addr).await,
                "/healthz answered with {from} keys sent"
            );
        }
    }
    let grown = resident_bytes().saturating_sub(before);
    eprintln!("{KEYS} flow keys: resident memory grew {grown} bytes");
    assert_eq!(
        refused,
        KEYS + BATCH,
        "every request refused at once, by a stable code"
    );
    assert!(health(addr).await, "/healthz answered after the flood");
    assert!(
        grown <= BOUND,
        "resident memory grew {grown} bytes for {KEYS} flow keys (bound {BOUND})"
    );
    let stats = pools.pool(Class::Work).stats();
    assert!(
        stats.active_flows <= 256,
        "the flow table stays its size: {} active",
        stats.active_flows
    );
    server.abort();
}
