//! The client-noise throttle's counts, against the `workflow` binary
//! (actix-web logs one error per malformed request) over 127.0.0.1
//! (issue 38, finding 6): the first event is written at once, the rest of
//! the interval when it ends (no event needs to follow) and what is left
//! at shutdown; the counts of all lines add up to every event counted.
//! Before, only the first line and the lines of later events were
//! written: a burst's last interval was never logged.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use admission_examples::cli::CLIENT_NOISE_EVERY;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use support::Service;

/// `n` malformed requests, each on its own connection, each answered (or
/// closed) before the next.
async fn malformed(addr: SocketAddr, n: usize) {
    for _ in 0..n {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let _ = stream.write_all(b"GARBAGE\r\n\r\n").await;
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut answer)).await;
    }
}

/// The `count=` of every throttled line in `logs`.
fn counts(logs: &str) -> Vec<u64> {
    logs.lines()
        .filter(|line| line.contains("client errors from the HTTP framework"))
        .map(|line| {
            let count = line.split("count=").nth(1).expect("a count");
            let digits: String = count.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().expect("a number")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_error_is_in_a_line_by_the_interval_or_the_shutdown() {
    let workflow = Service::workflow(&[]).await;
    let started = Instant::now();
    malformed(workflow.addr, 200).await;
    assert_eq!(counts(&workflow.logs()).len(), 1, "one line at once");

    // The interval ends with no event after it: its count is written.
    let by = started + CLIENT_NOISE_EVERY + Duration::from_secs(5);
    while counts(&workflow.logs()).len() < 2 {
        assert!(
            Instant::now() < by,
            "the burst's rest was never written: {}",
            workflow.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let flushed = Instant::now() - started;

    // A burst within the next interval, then the signal: written at the exit.
    malformed(workflow.addr, 50).await;
    workflow.terminate();
    let (status, logs) = workflow.exit_within(Duration::from_secs(15)).await;
    assert!(status.success(), "a clean exit, got {status}");
    let counts = counts(&logs);
    let total: u64 = counts.iter().sum();
    let counted: u64 = logs
        .lines()
        .find_map(|line| line.split("client_errors=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("the shutdown line counts client errors");
    println!("lines {counts:?} (the second {flushed:?} after the burst), {counted} counted");
    assert!(
        counts.len() >= 3,
        "at once, at the interval's end, at the exit: {counts:?}"
    );
    assert!(counted >= 250, "every malformed request counted: {counted}");
    assert_eq!(
        total, counted,
        "the lines carry every event counted: {counts:?}"
    );
}
