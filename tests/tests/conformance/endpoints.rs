//! What the routes do, written once for both frameworks: registry walks the
//! test holds on a worker thread, bodies the test feeds chunk by chunk, and
//! handlers held at a gate. The harness turns each [`Endpoint`] into an axum
//! or an actix-web handler; the behaviour and every signal back to the test
//! live here.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use admission_core::{Coalescing, Pool, RegistryWork};
use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::{Semaphore, mpsc, oneshot};

use super::client::within;

/// What one route does.
#[derive(Clone)]
pub(crate) enum Endpoint {
    /// Registry work on `pool` through the adapter's `registry` helper,
    /// answered with `content_type`; the adapter renders a refusal or a
    /// failure itself.
    Registry {
        pool: Pool,
        walk: Walk,
        content_type: &'static str,
        /// Told how the handler's future ended, when the test watches it.
        watch: Option<mpsc::UnboundedSender<HandlerEnd>>,
    },
    /// A streamed body whose chunks the test feeds: each request hands the
    /// test a [`Feed`].
    Stream(mpsc::UnboundedSender<Feed>),
    /// Coalesced registry work on `scrapes` under one key, through the
    /// adapter's `registry_coalesced` helper, answered as [`METRICS`].
    Coalesced { scrapes: Scrapes, walk: Walk },
    /// A handler that reports its arrival and answers `done` once the test
    /// opens the gate for it.
    Gated(Gate),
    /// Answers the criticality the request was admitted for
    /// (`Caller::current()`): `critical`, `default` or `sheddable`.
    Criticality,
    /// Admits on `pool` as an app's library code would, and fails with the
    /// refusal three of the app's own error enums deep ([`AppError`]): the
    /// adapter's `Rejection::from_error` must find it.
    Deep(Pool),
    /// Reads the request's body to its end and answers [`READ`] (over
    /// gRPC, tonic reads the request message before the method runs);
    /// a body that fails to arrive is answered as a client error.
    Upload,
}

/// What [`Endpoint::Upload`] answers once it has read the body.
pub(crate) const READ: &str = "read";

/// The app's errors, as a service with a crypto module under its store
/// under its handlers writes them (`thiserror`, `#[source]` and
/// `#[from]`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AppError {
    #[error("the store failed")]
    Store(#[from] StoreError),
}

/// The middle level.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    #[error("deriving the key failed")]
    Crypto(#[from] CryptoError),
}

/// The bottom level, holding the pool's refusal.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CryptoError {
    #[error("no worker for the key derivation")]
    Busy(#[source] admission_core::Refusal),
}

/// What [`Endpoint::Deep`] does: admits on `pool` (at once), or fails
/// three levels deep.
pub(crate) fn deep(pool: &Pool) -> Result<&'static str, AppError> {
    let slot = pool
        .try_admit()
        .map_err(|refusal| AppError::from(StoreError::from(CryptoError::Busy(refusal))))?;
    drop(slot);
    Ok("derived")
}

/// Coalesced walks: one key (every coalesced route walks the same
/// registry), the walk's text shared.
pub(crate) type Scrapes = Coalescing<&'static str, String, Infallible>;

/// The key every coalesced route shares.
pub(crate) const WALK: &str = "walk";

impl Endpoint {
    /// A registry walk answered as `content_type`, unwatched.
    pub(crate) fn registry(pool: &Pool, walk: Walk, content_type: &'static str) -> Endpoint {
        Endpoint::Registry {
            pool: pool.clone(),
            walk,
            content_type,
            watch: None,
        }
    }
}

/// The content type of the `/metrics` scrape.
pub(crate) const METRICS: &str = "text/plain; version=0.0.4";
/// The content type of the `/` status page.
pub(crate) const HTML: &str = "text/html; charset=utf-8";

/// The blocking work behind a registry route.
#[derive(Clone)]
pub(crate) enum Walk {
    /// Answers `text` at once.
    Instant(&'static str),
    /// Hands the test a [`Release`] from its worker thread, blocks that
    /// thread until the test releases it, then answers `text`.
    Held {
        started: mpsc::UnboundedSender<Release>,
        text: &'static str,
        /// Panics once released instead of answering.
        panics: bool,
    },
    /// Panics on its worker thread.
    Panics,
}

impl Walk {
    /// A held walk answering `text`, and the test's side of it.
    pub(crate) fn held(text: &'static str) -> (Walk, Walks) {
        let (started, rx) = mpsc::unbounded_channel();
        let panics = false;
        (
            Walk::Held {
                started,
                text,
                panics,
            },
            Walks(rx),
        )
    }

    /// A held walk that panics once released, and the test's side of it.
    pub(crate) fn held_panicking() -> (Walk, Walks) {
        let (started, rx) = mpsc::unbounded_channel();
        let (text, panics) = ("", true);
        (
            Walk::Held {
                started,
                text,
                panics,
            },
            Walks(rx),
        )
    }
}

/// A walk is its own registry work: one clone per request. (A concrete
/// type rather than a boxed closure: handler futures holding a boxed
/// closure's call would not be `Send` for every lifetime, as axum needs.)
impl RegistryWork for Walk {
    type Output = String;
    type Error = Infallible;

    fn run(self) -> Result<String, Infallible> {
        match self {
            Walk::Instant(text) => Ok(text.to_owned()),
            Walk::Held {
                started,
                text,
                panics,
            } => {
                let (release, released) = std::sync::mpsc::channel();
                if started.send(Release(release)).is_ok() {
                    // A dropped `Release` ends the wait as well, so a
                    // failing test never leaves a worker blocked.
                    let _ = released.recv();
                }
                assert!(!panics, "the registry walk exploded");
                Ok(text.to_owned())
            }
            Walk::Panics => panic!("the registry walk exploded"),
        }
    }
}

/// The test's side of a [`Walk::Held`]: one [`Release`] per walk started.
pub(crate) struct Walks(mpsc::UnboundedReceiver<Release>);

impl Walks {
    /// Waits until a held walk is running on a worker thread.
    pub(crate) async fn started(&mut self) -> Release {
        within("a held walk to start on a worker", self.0.recv())
            .await
            .expect("the route keeps its walk")
    }

    /// Whether a walk started that the test has not taken yet.
    pub(crate) fn more_started(&mut self) -> bool {
        self.0.try_recv().is_ok()
    }
}

/// Holds one running walk's worker thread until released or dropped.
pub(crate) struct Release(std::sync::mpsc::Sender<()>);

impl Release {
    /// Lets the walk finish.
    pub(crate) fn release(self) {
        let _ = self.0.send(());
    }
}

/// How a watched handler's future ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandlerEnd {
    /// It returned its answer.
    Completed,
    /// The server dropped it before it returned (the client went away).
    Dropped,
}

/// Lives in a watched handler's future; says how that future ended.
pub(crate) struct Watch {
    tx: Option<mpsc::UnboundedSender<HandlerEnd>>,
    completed: bool,
}

impl Watch {
    pub(crate) fn new(tx: Option<mpsc::UnboundedSender<HandlerEnd>>) -> Watch {
        Watch {
            tx,
            completed: false,
        }
    }

    /// The handler is about to return.
    pub(crate) fn complete(&mut self) {
        self.completed = true;
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let end = if self.completed {
                HandlerEnd::Completed
            } else {
                HandlerEnd::Dropped
            };
            let _ = tx.send(end);
        }
    }
}

/// A response body's chunks, fed by the test through its [`Feed`].
pub(crate) struct Fed {
    chunks: mpsc::UnboundedReceiver<Bytes>,
    dropped: Option<oneshot::Sender<()>>,
}

/// The test's side of one streamed body.
pub(crate) struct Feed {
    pub(crate) chunks: mpsc::UnboundedSender<Bytes>,
    /// Resolves when the server dropped the body (ended or abandoned).
    pub(crate) dropped: oneshot::Receiver<()>,
}

impl Fed {
    /// A new body; its [`Feed`] goes to the test through `feeds`.
    pub(crate) fn new(feeds: &mpsc::UnboundedSender<Feed>) -> Fed {
        let (chunks_tx, chunks) = mpsc::unbounded_channel();
        let (dropped_tx, dropped) = oneshot::channel();
        let _ = feeds.send(Feed {
            chunks: chunks_tx,
            dropped,
        });
        Fed {
            chunks,
            dropped: Some(dropped_tx),
        }
    }
}

impl Stream for Fed {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        self.chunks.poll_recv(cx)
    }
}

impl Drop for Fed {
    fn drop(&mut self) {
        if let Some(dropped) = self.dropped.take() {
            let _ = dropped.send(());
        }
    }
}

/// The test's side of [`Endpoint::Stream`]: one [`Feed`] per request.
pub(crate) struct Feeds(pub(crate) mpsc::UnboundedReceiver<Feed>);

impl Feeds {
    /// A streaming endpoint and the test's side of it.
    pub(crate) fn endpoint() -> (Endpoint, Feeds) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Endpoint::Stream(tx), Feeds(rx))
    }

    /// Waits for the next request's body.
    pub(crate) async fn next(&mut self) -> Feed {
        within("a streaming handler to run", self.0.recv())
            .await
            .expect("the route keeps its feeds")
    }
}

/// Where gated handlers wait.
#[derive(Clone)]
pub(crate) struct Gate {
    arrived: mpsc::UnboundedSender<()>,
    open: Arc<Semaphore>,
}

/// The test's side of a [`Gate`].
pub(crate) struct GateControl {
    arrived: mpsc::UnboundedReceiver<()>,
    open: Arc<Semaphore>,
}

impl Gate {
    /// A gated endpoint and the test's side of its gate.
    pub(crate) fn endpoint() -> (Endpoint, GateControl) {
        let (arrived, arrivals) = mpsc::unbounded_channel();
        let open = Arc::new(Semaphore::new(0));
        let gate = Gate {
            arrived,
            open: Arc::clone(&open),
        };
        let control = GateControl {
            arrived: arrivals,
            open,
        };
        (Endpoint::Gated(gate), control)
    }

    /// Reports the arrival, then waits until the test lets one through.
    pub(crate) async fn pass(&self) {
        let _ = self.arrived.send(());
        // An owned permit: a future borrowing the semaphore would not be
        // `Send` for every lifetime, as axum's handlers must be.
        Arc::clone(&self.open)
            .acquire_owned()
            .await
            .expect("the gate is never closed")
            .forget();
    }
}

impl GateControl {
    /// Waits until `n` more handlers have arrived.
    pub(crate) async fn arrivals(&mut self, n: usize) {
        for _ in 0..n {
            within("a handler to arrive at the gate", self.arrived.recv())
                .await
                .expect("the route keeps its gate");
        }
    }

    /// How many handlers arrived that were not counted yet.
    pub(crate) fn more_arrived(&mut self) -> usize {
        std::iter::from_fn(|| self.arrived.try_recv().ok()).count()
    }

    /// Lets `n` handlers through.
    pub(crate) fn open(&self, n: usize) {
        self.open.add_permits(n);
    }
}
