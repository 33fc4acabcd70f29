//! The accept loop: admit or refuse each connection, evict the one that
//! has waited longest when room is needed, and shut down gracefully.
//!
//! This module owns [`Serve`] and [`serve`]. It must never block the accept
//! loop on a connection, never read a byte from a refused connection, and
//! never let an accept error spin: it evicts or backs off.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt;
use std::future::{Future, IntoFuture, Pending, pending};
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tower_service::Service;

use super::connection::{self, ConnState};
use super::limits::ConnectionLimits;
use super::stats::{Connections, Counters};

/// How long a connection must have waited for a request head before a
/// newcomer may evict it: a client that connected a moment ago and is
/// sending its request is not a slow one.
const EVICTABLE_AFTER: Duration = Duration::from_secs(1);

/// How long accepting pauses after an error it could not make room for.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Serves `service` (an axum [`Router`](axum::Router), or any tower
/// service of requests with an [`axum::body::Body`]) on `listener` under
/// [`ConnectionLimits`]: the knobs `axum::serve` does not have.
///
/// It is built with the default limits (see [`ConnectionLimits::new`]);
/// change them with [`Serve::limits`], stop it with
/// [`Serve::with_graceful_shutdown`], and `.await` it to serve.
///
/// # Examples
///
/// ```no_run
/// use admission_axum::serve::ConnectionLimits;
/// use axum::{Router, routing::get};
///
/// # #[tokio::main]
/// # async fn main() -> std::io::Result<()> {
/// let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// admission_axum::serve(listener, app)
///     .limits(ConnectionLimits::new().max_connections(1000))
///     .with_graceful_shutdown(async { drop(tokio::signal::ctrl_c().await) })
///     .await
/// # }
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limits = ConnectionLimits::new();
    Serve {
        listener,
        service,
        limits,
        signal: pending(),
        counters: Arc::new(Counters::new(limits.get_max_connections())),
    }
}

/// A server not yet started: [`serve`] builds it, `.await` runs it.
///
/// # Cancel safety
///
/// Awaiting it serves until the shutdown signal completes and every
/// connection has closed. Dropping the future stops accepting at once and
/// asks every connection to close as shutdown would: waiting ones close,
/// busy ones finish their response first, on their own tasks.
#[must_use = "a server does nothing until it is awaited"]
pub struct Serve<S, F = Pending<()>> {
    listener: TcpListener,
    service: S,
    limits: ConnectionLimits,
    signal: F,
    counters: Arc<Counters>,
}

impl<S, F> fmt::Debug for Serve<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl<S, F> Serve<S, F> {
    /// The same server under `limits`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::serve::ConnectionLimits;
    /// use axum::Router;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = admission_axum::serve(listener, Router::new())
    ///     .limits(ConnectionLimits::new().max_connections(64));
    /// assert_eq!(server.connections().stats().max, 64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn limits(self, limits: ConnectionLimits) -> Serve<S, F> {
        Serve {
            limits,
            counters: Arc::new(Counters::new(limits.get_max_connections())),
            ..self
        }
    }

    /// The same server, stopping gracefully when `signal` completes: it
    /// stops accepting, closes the connections that wait for a request,
    /// lets the requests in flight finish, and resolves once every
    /// connection has closed. Bound that wait with a deadline of your own
    /// (`tokio::time::timeout`) if a response may take long.
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::Router;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// // A signal that has already fired: it stops at once.
    /// admission_axum::serve(listener, Router::new())
    ///     .with_graceful_shutdown(async {})
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_graceful_shutdown<G>(self, signal: G) -> Serve<S, G>
    where
        G: Future<Output = ()> + Send + 'static,
    {
        Serve {
            listener: self.listener,
            service: self.service,
            limits: self.limits,
            signal,
            counters: self.counters,
        }
    }

    /// The live counters of this server's connections.
    pub fn connections(&self) -> Connections {
        Connections {
            counters: Arc::clone(&self.counters),
        }
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    ///
    /// As [`TcpListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }
}

impl<S, B, F> IntoFuture for Serve<S, F>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl<S, F> Serve<S, F> {
    async fn run<B>(self) -> io::Result<()>
    where
        S: Service<Request<Body>, Response = Response<B>, Error = Infallible>
            + Clone
            + Send
            + 'static,
        S::Future: Send,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        F: Future<Output = ()> + Send + 'static,
    {
        let Serve {
            listener,
            service,
            limits,
            signal,
            counters,
        } = self;
        let shared = Arc::new(Shared {
            limits,
            epoch: Instant::now(),
            table: Mutex::new(Table::default()),
            counters,
            all_closed: Notify::new(),
        });
        // Dropping the sender (this future dropped) stops connections too.
        let (stop, _) = watch::channel(false);
        let mut signal = pin!(signal);
        loop {
            let accepted = tokio::select! {
                biased;
                () = signal.as_mut() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, remote)) => {
                    if shared.admit(stream, remote, &service, &stop) == Admitted::Evicting {
                        // Let the evicted connection close before the next
                        // accept, so the bound is overshot by as little as
                        // the runtime allows.
                        tokio::task::yield_now().await;
                    }
                }
                // The client gave up before the accept: nothing to do.
                Err(err) if is_connection_error(&err) => {}
                Err(err) => {
                    shared.counters.count_accept_error(&err);
                    if is_out_of_descriptors(&err) && shared.evict_longest_waiting(Duration::ZERO) {
                        // Let the evicted connection close its socket.
                        tokio::task::yield_now().await;
                        continue;
                    }
                    tokio::select! {
                        biased;
                        () = signal.as_mut() => break,
                        () = tokio::time::sleep(ACCEPT_BACKOFF) => {}
                    }
                }
            }
        }
        drop(listener);
        stop.send_replace(true);
        shared.closed().await;
        Ok(())
    }
}

/// What the accept loop and every connection task share.
#[derive(Debug)]
struct Shared {
    limits: ConnectionLimits,
    epoch: Instant,
    table: Mutex<Table>,
    counters: Arc<Counters>,
    /// Woken when the last connection closes.
    all_closed: Notify,
}

/// The open connections, by id.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Arc<ConnState>>,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics under the lock.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves `stream` on a task of its own, or closes it at once.
    #[must_use]
    fn admit<S, B>(
        self: &Arc<Self>,
        stream: TcpStream,
        remote: SocketAddr,
        service: &S,
        stop: &watch::Sender<bool>,
    ) -> Admitted
    where
        S: Service<Request<Body>, Response = Response<B>, Error = Infallible>
            + Clone
            + Send
            + 'static,
        S::Future: Send,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.counters.count_accept();
        let mut admitted = Admitted::Open;
        if self.counters.open() >= self.counters.max() {
            if !self.evict_longest_waiting(EVICTABLE_AFTER) {
                // Every open connection has a request in flight (or has
                // only just arrived): close this one before reading a byte.
                drop(stream);
                self.counters.count_refusal();
                return Admitted::Refused;
            }
            admitted = Admitted::Evicting;
        }
        // Small responses go out at once.
        drop(stream.set_nodelay(true));
        let state = Arc::new(ConnState::new(self.epoch));
        let id = {
            let mut table = self.table();
            table.next += 1;
            let id = table.next;
            table.open.insert(id, Arc::clone(&state));
            id
        };
        self.counters.count_open();
        let registered = Registered {
            shared: Arc::clone(self),
            id,
        };
        let (service, limits, stop) = (service.clone(), self.limits, stop.subscribe());
        tokio::spawn(async move {
            let counters = Arc::clone(&registered.shared.counters);
            connection::run(stream, remote, service, state, limits, &counters, stop).await;
            drop(registered);
        });
        admitted
    }

    /// Evicts the connection that has waited longest for a request head,
    /// if one has waited at least `at_least`; whether one was.
    fn evict_longest_waiting(&self, at_least: Duration) -> bool {
        let now = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let at_least = u64::try_from(at_least.as_micros()).unwrap_or(u64::MAX);
        let table = self.table();
        let longest = table
            .open
            .values()
            .filter_map(|state| state.waiting_since().map(|since| (since, state)))
            .filter(|(since, _)| now.saturating_sub(*since) >= at_least)
            .min_by_key(|(since, _)| *since);
        match longest {
            Some((_, state)) => {
                state.evict();
                true
            }
            None => false,
        }
    }

    /// Resolves once no connection is open.
    async fn closed(&self) {
        loop {
            let notified = self.all_closed.notified();
            let mut notified = pin!(notified);
            notified.as_mut().enable();
            if self.counters.open() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// What became of an accepted connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admitted {
    /// Served; there was room.
    Open,
    /// Served in the place of an evicted connection, still closing.
    Evicting,
    /// Closed at once.
    Refused,
}

/// Keeps a connection in the table until its task ends.
#[derive(Debug)]
struct Registered {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.shared.table().open.remove(&self.id);
        if self.shared.counters.count_close() {
            self.shared.all_closed.notify_waiters();
        }
    }
}

/// An error about one connection that ended before it was accepted.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

/// `EMFILE` or `ENFILE`: the process or the system is out of descriptors
/// (the same numbers on Linux, the BSDs and macOS).
fn is_out_of_descriptors(err: &io::Error) -> bool {
    matches!(err.raw_os_error(), Some(23 | 24))
}
