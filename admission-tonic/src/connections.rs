//! Connection admission for a tonic server: the bound on what clients can
//! hold before any call is made.
//!
//! This module owns [`ConnectionLimits`] (the settings and the tonic
//! `Server` options they imply), [`Incoming`] (an accept loop for
//! `serve_with_incoming`), [`Connection`] (an accepted socket with its
//! HTTP/2 preface deadline) and [`Connections`] (their stats). It must
//! never spin on an accept error, never log one line per connection or per
//! error (one `WARN` per interval, with a count), never read a byte of a
//! request beyond counting the preface's, and never evict a connection
//! that has sent its preface: only those still silent, oldest first.
//!
//! # What it bounds
//!
//! * **Open connections**: at most [`max_connections`](ConnectionLimits::max_connections)
//!   (one more while an evicted one closes). At the cap, a new connection
//!   takes the place of the one that has waited longest without sending
//!   the HTTP/2 preface, which is closed; when every connection has sent
//!   its preface, accepting pauses until one closes (the kernel's backlog
//!   holds the rest).
//! * **The preface**: a connection that has not sent the 24 bytes of the
//!   HTTP/2 client preface within
//!   [`preface_timeout`](ConnectionLimits::preface_timeout) is closed.
//! * **Descriptors**: when `accept` fails for want of descriptors or
//!   memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`), the loop closes the
//!   oldest silent connection and backs off for
//!   [`accept_backoff`](ConnectionLimits::accept_backoff) when there is
//!   none, instead of retrying at once, and logs one `WARN` per
//!   [`warn_every`](ConnectionLimits::warn_every) with the count.
//! * **Streams and dead peers** ([`ConnectionLimits::server`]): HTTP/2
//!   `SETTINGS_MAX_CONCURRENT_STREAMS` and keepalive pings, which close a
//!   connection whose peer stopped answering.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures_util::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tonic::transport::Server;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The HTTP/2 client preface's length: `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
const PREFACE_LEN: usize = 24;

/// The stable code logged when connections are closed for sending no
/// preface in time, or to make room for a new one.
pub const CONNECTION_EVICTED: &str = "ADMISSION_CONNECTION_EVICTED";

/// The stable code logged when `accept` fails (descriptors or memory ran
/// out) and the accept loop backs off.
pub const ACCEPT_FAILED: &str = "ADMISSION_ACCEPT_FAILED";

/// The bounds on a tonic server's connections.
///
/// # Examples
///
/// ```no_run
/// use admission_core::RequestPools;
/// use admission_tonic::AdmissionLayer;
/// use admission_tonic::connections::ConnectionLimits;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let limits = ConnectionLimits { max_connections: 512, ..ConnectionLimits::default() };
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
/// let incoming = limits.incoming(listener)?; // a bad setting is an error here
/// let (_reporter, health) = tonic_health::server::health_reporter();
/// limits
///     .server(tonic::transport::Server::builder())
///     .layer(AdmissionLayer::new(RequestPools::new(16, 4)?))
///     .add_service(health)
///     .serve_with_incoming(incoming)
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Open connections at most (default 1024). Keep it below the
    /// process's descriptor limit less what else the process opens.
    pub max_connections: usize,
    /// How long a new connection may take to send the HTTP/2 preface
    /// (default 5 s).
    pub preface_timeout: Duration,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` (default 100, what gRPC servers
    /// commonly announce).
    pub max_concurrent_streams: u32,
    /// How often an HTTP/2 keepalive ping is sent on a quiet connection
    /// (default 30 s) ...
    pub keepalive_interval: Duration,
    /// ... and how long its answer may take before the connection is
    /// closed (default 10 s).
    pub keepalive_timeout: Duration,
    /// How long the accept loop pauses after `accept` failed for want of
    /// descriptors or memory (default 100 ms).
    pub accept_backoff: Duration,
    /// How often, at most, a `WARN` line reports accept failures and
    /// evictions, with their count since the previous line (default 10 s).
    pub warn_every: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            max_connections: 1024,
            preface_timeout: Duration::from_secs(5),
            max_concurrent_streams: 100,
            keepalive_interval: Duration::from_secs(30),
            keepalive_timeout: Duration::from_secs(10),
            accept_backoff: Duration::from_millis(100),
            warn_every: Duration::from_secs(10),
        }
    }
}

/// A [`ConnectionLimits`] setting that cannot work, named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidLimit(&'static str);

impl fmt::Display for InvalidLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connection limit `{}` must be above zero", self.0)
    }
}

impl std::error::Error for InvalidLimit {}

impl ConnectionLimits {
    /// Checks every setting, as [`incoming`](Self::incoming) does: for a
    /// configuration read at startup, before any socket is bound.
    ///
    /// # Errors
    ///
    /// [`InvalidLimit`] naming a setting that is zero.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_tonic::connections::ConnectionLimits;
    ///
    /// assert!(ConnectionLimits::default().validate().is_ok());
    /// let none = ConnectionLimits { max_concurrent_streams: 0, ..ConnectionLimits::default() };
    /// assert_eq!(none.validate().unwrap_err().to_string(), "connection limit `max_concurrent_streams` must be above zero");
    /// ```
    pub fn validate(&self) -> Result<(), InvalidLimit> {
        let zero = [
            ("max_connections", self.max_connections == 0),
            ("preface_timeout", self.preface_timeout.is_zero()),
            ("max_concurrent_streams", self.max_concurrent_streams == 0),
            ("keepalive_interval", self.keepalive_interval.is_zero()),
            ("keepalive_timeout", self.keepalive_timeout.is_zero()),
            ("accept_backoff", self.accept_backoff.is_zero()),
            ("warn_every", self.warn_every.is_zero()),
        ];
        match zero.into_iter().find(|(_, zero)| *zero) {
            Some((name, _)) => Err(InvalidLimit(name)),
            None => Ok(()),
        }
    }

    /// `server` with the HTTP/2 settings these limits imply:
    /// `max_concurrent_streams` and keepalive pings.
    pub fn server<L>(&self, server: Server<L>) -> Server<L> {
        server
            .max_concurrent_streams(self.max_concurrent_streams)
            .http2_keepalive_interval(Some(self.keepalive_interval))
            .http2_keepalive_timeout(Some(self.keepalive_timeout))
    }

    /// The accept loop over `listener`, for `serve_with_incoming`.
    ///
    /// # Errors
    ///
    /// [`InvalidLimit`] naming a setting that is zero.
    pub fn incoming(&self, listener: TcpListener) -> Result<Incoming, InvalidLimit> {
        self.validate()?;
        Ok(Incoming {
            listener,
            limits: *self,
            shared: Arc::new(Shared::default()),
            backoff: None,
            failures: Throttle::new(self.warn_every),
            evictions: Throttle::new(self.warn_every),
        })
    }
}

/// What the accept loop and its connections share.
#[derive(Debug, Default)]
struct Shared {
    open: AtomicUsize,
    /// Evicted connections not yet closed by their tasks.
    evicting: AtomicUsize,
    /// Connections that have not sent their preface, oldest first.
    silent: Mutex<VecDeque<Weak<Silent>>>,
    /// The accept loop, waiting for room.
    room: AtomicWaker,
    accepted: AtomicU64,
    evicted: AtomicU64,
    preface_timeouts: AtomicU64,
    accept_errors: AtomicU64,
}

impl Shared {
    /// Whether a connection that has not sent its preface is open (and not
    /// already closing).
    fn has_silent(&self) -> bool {
        let mut silent = self.silent.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(oldest) = silent.front() {
            match oldest.upgrade() {
                Some(oldest) if !oldest.evicted.load(Ordering::Acquire) => return true,
                _ => drop(silent.pop_front()),
            }
        }
        false
    }

    /// Closes the connection that has waited longest without a preface;
    /// whether there was one.
    fn evict_oldest(&self) -> bool {
        let mut silent = self.silent.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(oldest) = silent.pop_front() {
            if let Some(oldest) = oldest.upgrade()
                && !oldest.evicted.swap(true, Ordering::AcqRel)
            {
                self.evicting.fetch_add(1, Ordering::AcqRel);
                self.evicted.fetch_add(1, Ordering::Relaxed);
                oldest.waker.wake();
                return true;
            }
        }
        false
    }
}

/// A connection that has not sent its preface, as the accept loop sees it.
#[derive(Debug, Default)]
struct Silent {
    evicted: AtomicBool,
    waker: AtomicWaker,
}

/// What [`Incoming`] and its [`Connection`]s have counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Connections open now.
    pub open: usize,
    /// Connections accepted since start.
    pub accepted: u64,
    /// Silent connections closed to make room (the cap, or `EMFILE`).
    pub evicted: u64,
    /// Connections closed for sending no preface in time.
    pub preface_timeouts: u64,
    /// `accept` calls that failed and were backed off from.
    pub accept_errors: u64,
}

/// A handle on an [`Incoming`]'s counters and its silent connections,
/// usable after the server took the stream.
#[derive(Debug, Clone)]
pub struct Connections(Arc<Shared>);

impl Connections {
    /// The counters now.
    pub fn stats(&self) -> ConnectionStats {
        let s = &self.0;
        ConnectionStats {
            open: s.open.load(Ordering::Acquire),
            accepted: s.accepted.load(Ordering::Relaxed),
            evicted: s.evicted.load(Ordering::Relaxed),
            preface_timeouts: s.preface_timeouts.load(Ordering::Relaxed),
            accept_errors: s.accept_errors.load(Ordering::Relaxed),
        }
    }

    /// Closes every connection that has not sent its preface (at
    /// shutdown: a graceful shutdown would otherwise wait for them).
    pub fn close_silent(&self) {
        while self.0.evict_oldest() {}
    }
}

/// One `WARN` per interval at most, carrying how many events it covers.
#[derive(Debug)]
struct Throttle {
    every: Duration,
    last: Option<Instant>,
    count: u64,
}

impl Throttle {
    fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            last: None,
            count: 0,
        }
    }

    /// Counts an event; `Some(count)` when a line is due.
    fn event(&mut self) -> Option<u64> {
        self.count += 1;
        let due = self.last.is_none_or(|last| last.elapsed() >= self.every);
        due.then(|| {
            self.last = Some(Instant::now());
            std::mem::take(&mut self.count)
        })
    }
}

/// The accept loop: a stream of admitted [`Connection`]s for tonic's
/// `serve_with_incoming`, which never ends and never yields an error (a
/// failed `accept` is backed off from and counted).
pub struct Incoming {
    listener: TcpListener,
    limits: ConnectionLimits,
    shared: Arc<Shared>,
    backoff: Option<Pin<Box<Sleep>>>,
    failures: Throttle,
    evictions: Throttle,
}

impl fmt::Debug for Incoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incoming")
            .field("limits", &self.limits)
            .field("stats", &self.connections().stats())
            .finish_non_exhaustive()
    }
}

impl Incoming {
    /// A handle on the counters, to keep before the server takes the
    /// stream.
    pub fn connections(&self) -> Connections {
        Connections(Arc::clone(&self.shared))
    }

    fn admit(&self, stream: TcpStream) -> Connection {
        let _ = stream.set_nodelay(true);
        self.shared.open.fetch_add(1, Ordering::AcqRel);
        self.shared.accepted.fetch_add(1, Ordering::Relaxed);
        let silent = Arc::new(Silent::default());
        self.shared
            .silent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push_back(Arc::downgrade(&silent));
        Connection {
            io: stream,
            preface: Some(Preface {
                deadline: Box::pin(tokio::time::sleep(self.limits.preface_timeout)),
                read: 0,
                silent,
            }),
            shared: Arc::clone(&self.shared),
        }
    }

    /// `accept` failed for want of descriptors or memory: whether a
    /// silent connection was closed to make room (then the loop waits for
    /// it to close, as at the cap); otherwise it backs off.
    fn failed(&mut self, err: &io::Error) -> bool {
        self.shared.accept_errors.fetch_add(1, Ordering::Relaxed);
        if let Some(count) = self.failures.event() {
            tracing::warn!(
                code = ACCEPT_FAILED,
                count,
                error = %err,
                backoff_ms = self.limits.accept_backoff.as_millis() as u64,
                "accept failed {count} times since the last report; closing the oldest \
                 connections that sent no HTTP/2 preface, else backing off",
            );
        }
        // A descriptor held by a silent connection is worth more to the
        // next client.
        if self.shared.evict_oldest() {
            return true;
        }
        self.backoff = Some(Box::pin(tokio::time::sleep(self.limits.accept_backoff)));
        false
    }
}

/// Errors of one connection that died in the backlog: nothing to back off
/// from.
fn connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

impl futures_util::Stream for Incoming {
    type Item = Result<Connection, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(backoff) = &mut self.backoff {
                ready!(backoff.as_mut().poll(cx));
                self.backoff = None;
            }
            let shared = Arc::clone(&self.shared);
            shared.room.register(cx.waker());
            let open = shared.open.load(Ordering::Acquire);
            let closing = shared.evicting.load(Ordering::Acquire);
            // At the cap a new connection is accepted only to take the
            // place of the oldest silent one, one at a time: at most one
            // over the cap while the evicted one closes.
            let at_cap = open >= self.limits.max_connections;
            if at_cap && (closing > 0 || !shared.has_silent()) {
                return Poll::Pending;
            }
            match self.listener.poll_accept(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok((stream, _peer))) => {
                    if at_cap
                        && shared.evict_oldest()
                        && let Some(count) = self.evictions.event()
                    {
                        tracing::warn!(
                            code = CONNECTION_EVICTED,
                            count,
                            max_connections = self.limits.max_connections,
                            "connection cap reached {count} times since the last report; \
                             closed the oldest connection that sent no HTTP/2 preface",
                        );
                    }
                    return Poll::Ready(Some(Ok(self.admit(stream))));
                }
                Poll::Ready(Err(err)) if connection_error(&err) => {}
                Poll::Ready(Err(err)) => {
                    if self.failed(&err) {
                        // Woken when the evicted connection has closed.
                        return Poll::Pending;
                    }
                }
            }
        }
    }
}

/// The preface deadline of a connection that has not sent it yet.
#[derive(Debug)]
struct Preface {
    deadline: Pin<Box<Sleep>>,
    read: usize,
    silent: Arc<Silent>,
}

/// An accepted connection: the socket, its preface deadline until the
/// preface has come, and its place under the cap until it closes.
#[derive(Debug)]
pub struct Connection {
    io: TcpStream,
    preface: Option<Preface>,
    shared: Arc<Shared>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if self
            .preface
            .as_ref()
            .is_some_and(|p| p.silent.evicted.load(Ordering::Acquire))
        {
            self.shared.evicting.fetch_sub(1, Ordering::AcqRel);
        }
        self.shared.open.fetch_sub(1, Ordering::AcqRel);
        self.shared.room.wake();
    }
}

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.io.connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(preface) = &mut this.preface {
            preface.silent.waker.register(cx.waker());
            if preface.silent.evicted.load(Ordering::Acquire) {
                return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
            }
            if preface.deadline.as_mut().poll(cx).is_ready() {
                this.shared.preface_timeouts.fetch_add(1, Ordering::Relaxed);
                // Not evictable any more: it is closing.
                preface.silent.evicted.store(true, Ordering::Release);
                this.shared.evicting.fetch_add(1, Ordering::AcqRel);
                return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
            }
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.io).poll_read(cx, buf))?;
        if let Some(preface) = &mut this.preface {
            preface.read += buf.filled().len() - before;
            if preface.read >= PREFACE_LEN {
                // No longer silent: never evicted, no deadline. An eviction
                // that raced the last bytes missed; it is not counted as
                // closing.
                if preface.silent.evicted.swap(true, Ordering::AcqRel) {
                    this.shared.evicting.fetch_sub(1, Ordering::AcqRel);
                }
                this.preface = None;
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
