//! The accept loop: admit, refuse or evict at the bound, and degrade on
//! accept errors.
//!
//! This module owns [`Accept`], [`Incoming`], [`Connections`] and what the
//! loop and its connections share. It must never read a byte from a
//! refused connection, never evict a connection with a request in flight,
//! and never let an accept error spin: it evicts or backs off, and logs at
//! most one line per interval.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Sleep;

use super::io::Connection;
use super::limits::ConnectionLimits;
use super::state::ConnState;
use super::stats::{ConnectionStats, Counters};
use admission_core::ConfigError;

/// The most bytes a TCP socket holds that the peer's window does not yet
/// let out (`TCP_NOTSENT_LOWAT`): a write waits only while the reader
/// takes nothing, not until a large send buffer drains.
pub(crate) const NOT_SENT_AT_MOST: u32 = 16 * 1024;

/// A source of connections: anything that accepts tokio sockets.
///
/// Implemented for [`TcpListener`]; implement it for another listener
/// (a Unix socket, a TLS acceptor's output) to admit its connections.
///
/// # Examples
///
/// ```
/// use std::task::{Context, Poll};
/// use admission_http::connection::{Accept, ConnectionLimits, Incoming};
///
/// struct Unix(tokio::net::UnixListener);
///
/// impl Accept for Unix {
///     type Io = tokio::net::UnixStream;
///     type Addr = tokio::net::unix::SocketAddr;
///     fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<(Self::Io, Self::Addr)>> {
///         self.0.poll_accept(cx)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("admission-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_file(&dir);
/// let listener = Unix(tokio::net::UnixListener::bind(&dir)?);
/// let incoming = Incoming::new(listener, ConnectionLimits::new())?;
/// assert_eq!(incoming.connections().stats().open, 0);
/// # drop(incoming);
/// # std::fs::remove_file(&dir)?;
/// # Ok(())
/// # }
/// ```
pub trait Accept {
    /// The accepted socket.
    type Io: AsyncRead + AsyncWrite + Unpin;
    /// The peer's address.
    type Addr;

    /// The next connection, or the error accepting it.
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(Self::Io, Self::Addr)>>;
}

impl Accept for TcpListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    /// Sets `TCP_NODELAY` (small responses go out at once) and, on Linux,
    /// `TCP_NOTSENT_LOWAT` of 16 KiB on each accepted socket (see
    /// [`ConnectionLimits::with_write_timeout`]).
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let (stream, remote) = ready!(TcpListener::poll_accept(self, cx))?;
        drop(stream.set_nodelay(true));
        #[cfg(any(target_os = "linux", target_os = "android"))]
        drop(socket2::SockRef::from(&stream).set_tcp_notsent_lowat(NOT_SENT_AT_MOST));
        Poll::Ready(Ok((stream, remote)))
    }
}

/// An accept loop that admits connections under [`ConnectionLimits`]:
/// axum's `serve`, tonic's `connections::Incoming` and
/// actix-web's `serve` are built on it.
///
/// Past the bound a newcomer takes the place of the connection that has
/// waited longest for a request head, however briefly; when every open
/// connection is busy, the newcomer is closed before a byte is read.
/// Attackers re-opening as fast as they can therefore evict each other,
/// oldest first, while a client that sends its request at once is served.
/// When accepting fails for want of descriptors (`EMFILE`, `ENFILE`), the
/// longest-waiting connection is closed to make room; otherwise (or when
/// none waits) accepting pauses for the back-off. Every eviction, refusal
/// and failure is counted in [`Connections`] and in one `WARN` line per
/// interval.
///
/// # Examples
///
/// ```
/// use admission_http::connection::{ConnectionLimits, Incoming};
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = tcp.local_addr()?;
/// let mut incoming = Incoming::new(tcp, ConnectionLimits::new().with_max_connections(1))?;
/// let connections = incoming.connections();
///
/// let mut slow = tokio::net::TcpStream::connect(addr).await?;
/// slow.write_all(b"GET / HTTP/1.1\r\n").await?; // half a head
/// let (mut first, _) = incoming.admit().await;
/// let _requests = first.requests(); // the server tells it when it is busy
/// let mut head = [0; 16];
/// first.read_exact(&mut head).await?; // the server reads what came
/// // At the bound, a newcomer evicts the first, which waits for a head.
/// let _second = tokio::net::TcpStream::connect(addr).await?;
/// let (_second, _) = incoming.admit().await;
/// assert!(first.read(&mut head).await.is_err(), "evicted");
/// assert_eq!(connections.stats().evicted, 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Incoming<A> {
    accept: A,
    shared: Arc<Shared>,
    preface: bool,
    backoff: Option<Pin<Box<Sleep>>>,
}

/// What the accept loop and every connection share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) limits: ConnectionLimits,
    epoch: Instant,
    table: Mutex<Table>,
    pub(crate) counters: Counters,
    /// Set by [`Connections::close_waiting`]: a connection that waits for
    /// a request from then on closes.
    pub(crate) closing: AtomicBool,
}

/// The open connections, by id.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Arc<ConnState>>,
}

impl<A: Accept> Incoming<A> {
    /// Admits connections from `accept` under `limits`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] naming a setting that is zero.
    pub fn new(accept: A, limits: ConnectionLimits) -> Result<Incoming<A>, ConfigError> {
        limits.validate()?;
        Ok(Incoming::build(accept, limits))
    }

    /// Admits connections from `accept` under [`ConnectionLimits::new`]
    /// (valid by construction: no error).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::connection::{ConnectionLimits, Incoming};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let incoming = Incoming::with_default_limits(tcp);
    /// assert_eq!(incoming.limits().max_connections(), ConnectionLimits::new().max_connections());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_default_limits(accept: A) -> Incoming<A> {
        Incoming::build(accept, ConnectionLimits::new())
    }

    fn build(accept: A, limits: ConnectionLimits) -> Incoming<A> {
        let limits = limits.resolved();
        Incoming {
            accept,
            shared: Arc::new(Shared {
                limits,
                epoch: Instant::now(),
                table: Mutex::new(Table::default()),
                counters: Counters::new(limits.max_connections(), limits.log_every()),
                closing: AtomicBool::new(false),
            }),
            preface: false,
            backoff: None,
        }
    }

    /// The listener back, to admit its connections under other limits
    /// (connections admitted so far keep theirs).
    pub fn into_inner(self) -> A {
        self.accept
    }

    /// The same loop for HTTP/2 with prior knowledge (gRPC): a connection
    /// waits (header timeout, eviction) until it has sent the 24 bytes of
    /// the client preface, and is busy from then on until it closes (its
    /// streams are the HTTP/2 server's to bound). Nothing needs to call
    /// [`Connection::requests`].
    #[must_use]
    pub fn http2_preface(self) -> Incoming<A> {
        Incoming {
            preface: true,
            ..self
        }
    }

    /// The live counters of this loop's connections.
    pub fn connections(&self) -> Connections {
        Connections(Arc::clone(&self.shared))
    }

    /// The limits it admits under.
    pub fn limits(&self) -> &ConnectionLimits {
        &self.shared.limits
    }

    /// The listener.
    pub fn get_ref(&self) -> &A {
        &self.accept
    }

    /// The next admitted connection and its peer's address; accept errors
    /// are handled here (counted, room made or backed off from), never
    /// returned.
    pub fn poll_admit(&mut self, cx: &mut Context<'_>) -> Poll<(Connection<A::Io>, A::Addr)> {
        loop {
            if let Some(backoff) = &mut self.backoff {
                ready!(backoff.as_mut().poll(cx));
                self.backoff = None;
            }
            match ready!(self.accept.poll_accept(cx)) {
                Ok((io, remote)) => {
                    if let Some(connection) = self.shared.admit(io, self.preface) {
                        return Poll::Ready((connection, remote));
                    }
                }
                // The client gave up before the accept: nothing to do.
                Err(err) if is_connection_error(&err) => {}
                Err(err) => {
                    self.shared.counters.count_accept_error(&err);
                    if is_out_of_descriptors(&err) && self.shared.evict_longest_waiting() {
                        // The evicted connection closes its socket when its
                        // task runs: try again after it.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    let pause = self.shared.limits.accept_backoff();
                    self.backoff = Some(Box::pin(tokio::time::sleep(pause)));
                }
            }
        }
    }

    /// [`poll_admit`](Self::poll_admit) as a future.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a connection is admitted only when it is returned.
    pub async fn admit(&mut self) -> (Connection<A::Io>, A::Addr) {
        std::future::poll_fn(|cx| self.poll_admit(cx)).await
    }
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics under the lock.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits `io`, or closes it at once.
    fn admit<IO>(self: &Arc<Self>, io: IO, preface: bool) -> Option<Connection<IO>> {
        self.counters.count_accept();
        let at_bound = self.counters.open() >= self.counters.max();
        if at_bound && !self.evict_longest_waiting() {
            // Every open connection is busy: close this one before
            // reading a byte.
            drop(io);
            self.counters.count_refusal();
            return None;
        }
        let state = Arc::new(ConnState::new(self.epoch));
        let id = {
            let mut table = self.table();
            table.next += 1;
            let id = table.next;
            table.open.insert(id, Arc::clone(&state));
            id
        };
        self.counters.count_open();
        Some(Connection::new(io, state, Arc::clone(self), id, preface))
    }

    /// Evicts the connection that has waited longest for a request head,
    /// however briefly, in the order of [`ConnState::eviction_class`]
    /// (slow senders that showed a partial head first); whether there was
    /// one.
    fn evict_longest_waiting(&self) -> bool {
        let table = self.table();
        let longest = table
            .open
            .values()
            .filter_map(|state| state.waiting_since().map(|since| (since, state)))
            .min_by_key(|(since, state)| (state.eviction_class(), *since));
        match longest {
            Some((_, state)) => {
                state.evict();
                drop(table);
                self.counters.count_eviction();
                true
            }
            None => false,
        }
    }

    /// A connection closed.
    pub(crate) fn close(&self, id: u64) {
        self.table().open.remove(&id);
        self.counters.count_close();
    }
}

/// A live view of one [`Incoming`]'s connections: clone it freely, read it
/// any time (also after the server took the loop and stopped).
///
/// # Examples
///
/// ```
/// use admission_http::connection::{ConnectionLimits, Incoming};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let incoming = Incoming::new(tcp, ConnectionLimits::new().with_max_connections(8))?;
/// let connections = incoming.connections();
/// drop(incoming);
/// connections.close_waiting(); // at shutdown
/// assert_eq!(connections.stats().max, 8);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Connections(Arc<Shared>);

impl Connections {
    /// The counters now.
    pub fn stats(&self) -> ConnectionStats {
        self.0.counters.snapshot()
    }

    /// Closes every connection that waits for a request head (at
    /// shutdown: a graceful shutdown would otherwise wait for them);
    /// busy ones are left to finish, and close when they wait again
    /// (their response ended).
    pub fn close_waiting(&self) {
        self.0.closing.store(true, Relaxed);
        for state in self.0.table().open.values() {
            if state.waiting_since().is_some() {
                state.evict();
            }
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
