//! Shared helpers for the gRPC tests: a real tonic server on 127.0.0.1
//! whose health service the test drives (handlers held at a gate, registry
//! work on a pool, streams fed message by message), and real tonic clients,
//! one connection each.
//!
//! The service is tonic-health's generated `grpc.health.v1.Health`, with an
//! implementation of its own: no code generation at build time. It stands
//! in for leased work, so [`serve`] turns off the layer's exemption of
//! health checks (`unleased([])`); `tests/health.rs` tests the exemption. `Check`'s
//! `service` field says what the handler does; `Watch` streams what the
//! test feeds.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use admission_core::{Admission, Caller, Class, Lease, Pool, RequestPools};
use admission_tonic::{AdmissionLayer, Rejection};
use futures_util::Stream;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

/// The bound on every wait in these tests: generous, since it only matters
/// when a test is about to fail.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Awaits `future`, failing the test if it takes longer than [`PATIENCE`].
pub(crate) async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `condition` until it holds, for at most [`PATIENCE`]. Only for
/// state nothing can signal: a pool's counters after the server released a
/// slot on one of its own tasks.
pub(crate) async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

/// What a `Check` handler saw when it ran.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// What was left of its caller's deadline when it ran.
    pub(crate) remaining: Option<Duration>,
    /// The class of the lease its task ran under.
    pub(crate) lease: Option<Class>,
}

/// What the test controls of the service.
#[derive(Clone)]
pub(crate) struct Probe {
    seen: mpsc::UnboundedSender<Seen>,
    open: Arc<Semaphore>,
    registry: Pool,
    requests: RequestPools,
    feeds: mpsc::UnboundedSender<Feed>,
}

/// The test's side of a [`Probe`].
pub(crate) struct Control {
    seen: mpsc::UnboundedReceiver<Seen>,
    open: Arc<Semaphore>,
    feeds: mpsc::UnboundedReceiver<Feed>,
    /// The pool `walk` and `panic` run on (one slot).
    pub(crate) registry: Pool,
}

impl Control {
    /// Waits for the next handler to report what it saw.
    pub(crate) async fn seen(&mut self) -> Seen {
        within("a handler to run", self.seen.recv())
            .await
            .expect("the service keeps its sender")
    }

    /// Whether a handler ran that the test has not looked at.
    pub(crate) fn more_seen(&mut self) -> bool {
        self.seen.try_recv().is_ok()
    }

    /// Lets `n` held handlers through.
    pub(crate) fn open(&self, n: usize) {
        self.open.add_permits(n);
    }

    /// Waits for the next `Watch` call's feed.
    pub(crate) async fn feed(&mut self) -> Feed {
        within("a watch to start", self.feeds.recv())
            .await
            .expect("the service keeps its sender")
    }
}

/// A probe over `requests` and its test-side control.
pub(crate) fn probe(requests: &RequestPools) -> (Probe, Control) {
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let (feeds_tx, feeds) = mpsc::unbounded_channel();
    let open = Arc::new(Semaphore::new(0));
    let registry = Pool::new("registry", 1).expect("a valid pool");
    let probe = Probe {
        seen: seen_tx,
        open: Arc::clone(&open),
        registry: registry.clone(),
        requests: requests.clone(),
        feeds: feeds_tx,
    };
    let control = Control {
        seen,
        open,
        feeds,
        registry,
    };
    (probe, control)
}

fn serving() -> Response<HealthCheckResponse> {
    Response::new(HealthCheckResponse {
        status: ServingStatus::Serving as i32,
    })
}

#[tonic::async_trait]
impl Health for Probe {
    /// `service` says what to do: `held` waits at the gate, `walk` runs
    /// registry work, `panic` runs registry work that panics, `pure` runs
    /// pure work of the *control* class, anything else answers at once.
    /// Every call reports what it saw first.
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        let seen = Seen {
            remaining: Caller::current().remaining(),
            lease: Lease::current().map(|lease| lease.class()),
        };
        let _ = self.seen.send(seen);
        match request.get_ref().service.as_str() {
            "held" => {
                Arc::clone(&self.open)
                    .acquire_owned()
                    .await
                    .expect("the gate is never closed")
                    .forget();
            }
            "walk" => {
                let walk = || Ok::<_, std::fmt::Error>(());
                self.registry
                    .run(walk, Admission::FailFast)
                    .await
                    .map_err(Rejection::from)?;
            }
            "panic" => {
                let walk = || -> Result<(), std::fmt::Error> { panic!("the walk exploded") };
                self.registry
                    .run(walk, Admission::FailFast)
                    .await
                    .map_err(Rejection::from)?;
            }
            "pure" => {
                let work = || Ok::<_, std::fmt::Error>(());
                self.requests
                    .execute_pure(Class::Control, work)
                    .await
                    .map_err(Rejection::from)?;
            }
            _ => {}
        }
        Ok(serving())
    }

    type WatchStream = Fed;

    async fn watch(&self, _request: Request<HealthCheckRequest>) -> Result<Response<Fed>, Status> {
        Ok(Response::new(Fed::new(&self.feeds)))
    }
}

/// A `Watch` stream whose messages the test feeds through its [`Feed`].
pub(crate) struct Fed {
    statuses: mpsc::UnboundedReceiver<ServingStatus>,
    dropped: Option<oneshot::Sender<()>>,
}

/// The test's side of one `Watch` stream.
pub(crate) struct Feed {
    /// Each status sent is one message; dropping it ends the stream.
    pub(crate) statuses: mpsc::UnboundedSender<ServingStatus>,
    /// Resolves when the server dropped the stream (ended or abandoned).
    pub(crate) dropped: oneshot::Receiver<()>,
}

impl Fed {
    fn new(feeds: &mpsc::UnboundedSender<Feed>) -> Fed {
        let (statuses_tx, statuses) = mpsc::unbounded_channel();
        let (dropped_tx, dropped) = oneshot::channel();
        let _ = feeds.send(Feed {
            statuses: statuses_tx,
            dropped,
        });
        Fed {
            statuses,
            dropped: Some(dropped_tx),
        }
    }
}

impl Stream for Fed {
    type Item = Result<HealthCheckResponse, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.statuses.poll_recv(cx).map(|status| {
            status.map(|status| {
                Ok(HealthCheckResponse {
                    status: status as i32,
                })
            })
        })
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        if let Some(dropped) = self.dropped.take() {
            let _ = dropped.send(());
        }
    }
}

/// Serves `probe` under `layer` (server-wide, with health leased like any
/// service) on 127.0.0.1:0.
pub(crate) async fn serve(layer: AdmissionLayer, probe: Probe) -> SocketAddr {
    let (listener, addr) = bind().await;
    let server = Server::builder()
        .layer(layer.unleased([]))
        .add_service(HealthServer::new(probe))
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(async move { server.await.expect("the server runs") });
    addr
}

/// A listener on an ephemeral port of 127.0.0.1.
pub(crate) async fn bind() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local address");
    (listener, addr)
}

/// A health client on a connection of its own.
pub(crate) async fn client(addr: SocketAddr) -> HealthClient<Channel> {
    let endpoint = Endpoint::from_shared(format!("http://{addr}")).expect("a valid URI");
    let channel = within("a connection", endpoint.connect())
        .await
        .expect("the server accepts");
    HealthClient::new(channel)
}

/// A `Check` asking the handler to do `what`.
pub(crate) fn check(what: &str) -> HealthCheckRequest {
    HealthCheckRequest {
        service: what.to_owned(),
    }
}
