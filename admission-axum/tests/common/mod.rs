//! Shared helpers for the HTTP tests: a real server on 127.0.0.1 and a gate
//! that holds handlers until the test opens it.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};

/// The bound on every wait in these tests: generous, since it only matters
/// when a test is about to fail.
pub(crate) const PATIENCE: Duration = Duration::from_secs(5);

/// Serves `router` with `axum::serve` on an ephemeral port of 127.0.0.1.
pub(crate) async fn serve(router: Router) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    tokio::spawn(async move { axum::serve(listener, router).await.expect("server") });
    addr
}

/// A client with its own connection pool, so that each one opens its own
/// connection.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("reqwest client")
}

/// Where handlers wait: each one reports its entry, then waits for the test.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    entered: mpsc::UnboundedSender<()>,
    release: Arc<Semaphore>,
}

/// The test's side of a [`Gate`].
#[derive(Debug)]
pub(crate) struct GateControl {
    entered: mpsc::UnboundedReceiver<()>,
    release: Arc<Semaphore>,
}

pub(crate) fn gate() -> (Gate, GateControl) {
    let (entered_tx, entered_rx) = mpsc::unbounded_channel();
    let release = Arc::new(Semaphore::new(0));
    (
        Gate {
            entered: entered_tx,
            release: Arc::clone(&release),
        },
        GateControl {
            entered: entered_rx,
            release,
        },
    )
}

impl Gate {
    /// Reports the entry and waits until the test lets one handler through.
    pub(crate) async fn pass(&self) {
        self.entered.send(()).expect("the test is listening");
        self.release
            .acquire()
            .await
            .expect("the gate is never closed")
            .forget();
    }
}

impl GateControl {
    /// Waits until `n` more handlers have entered.
    pub(crate) async fn entered(&mut self, n: usize) {
        for i in 0..n {
            tokio::time::timeout(PATIENCE, self.entered.recv())
                .await
                .unwrap_or_else(|_| panic!("only {i} of {n} handlers entered in time"))
                .expect("gate sender alive");
        }
    }

    /// How many handlers entered that were not counted yet.
    pub(crate) fn entered_now(&mut self) -> usize {
        let mut n = 0;
        while self.entered.try_recv().is_ok() {
            n += 1;
        }
        n
    }

    /// Lets `n` handlers through.
    pub(crate) fn open(&self, n: usize) {
        self.release.add_permits(n);
    }
}

/// Polls `condition` until it holds, for at most [`PATIENCE`], yielding in
/// between. For facts no channel reports (a server-side drop).
pub(crate) async fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// The parsed problem body of a response.
pub(crate) async fn problem(response: reqwest::Response) -> serde_json::Value {
    let text = response.text().await.expect("body");
    serde_json::from_str(&text).expect("problem body is JSON")
}
