//! The admitting listener: accept, refuse or evict at the bound, and back
//! off on accept errors.
//!
//! This module owns [`Listener`] and what its connections share. It must
//! never read a byte from a refused connection, never evict a connection
//! with a request in flight, and never let an accept error spin: it evicts
//! or backs off, and logs at most one line per interval.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio::net::TcpListener;

use super::connection::{ConnState, Connection};
use super::limits::ConnectionLimits;
use super::stats::{Connections, Counters};

/// How long accepting pauses after an error it could not make room for.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A [`TcpListener`] that admits connections under [`ConnectionLimits`]:
/// give it to [`axum::serve()`] (through [`track`](super::track) to get the
/// header and idle timeouts and eviction) or use [`serve`](super::serve()),
/// which does both.
///
/// Past the bound a newcomer takes the place of the connection that has
/// waited longest for a request head, however briefly; when every open
/// connection has a request in flight, the newcomer is closed before a
/// byte is read. Attackers re-opening as fast as they can therefore evict
/// each other, oldest first, while a client that sends its request at once
/// is served. Every eviction and refusal is counted in
/// [`Connections`] and in one `WARN` line per interval.
///
/// # Examples
///
/// ```
/// use admission_axum::serve::{ConnectionLimits, Listener};
/// use axum::{Router, routing::get};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let listener = Listener::new(tcp, ConnectionLimits::new().max_connections(64));
/// let connections = listener.connections();
/// let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
/// let server = axum::serve(listener, admission_axum::serve::track(app));
/// drop(server); // `.await` it to serve
/// assert_eq!(connections.stats().max, 64);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Listener {
    tcp: TcpListener,
    shared: Arc<Shared>,
}

/// What the listener and every connection share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) limits: ConnectionLimits,
    epoch: Instant,
    table: Mutex<Table>,
    pub(crate) counters: Arc<Counters>,
}

/// The open connections, by id.
#[derive(Debug, Default)]
struct Table {
    next: u64,
    open: HashMap<u64, Arc<ConnState>>,
}

impl Listener {
    /// Admits connections accepted from `tcp` under `limits`.
    pub fn new(tcp: TcpListener, limits: ConnectionLimits) -> Listener {
        Listener::with_counters(
            tcp,
            limits,
            Arc::new(Counters::new(limits.get_max_connections())),
        )
    }

    pub(crate) fn with_counters(
        tcp: TcpListener,
        limits: ConnectionLimits,
        counters: Arc<Counters>,
    ) -> Listener {
        Listener {
            tcp,
            shared: Arc::new(Shared {
                limits,
                epoch: Instant::now(),
                table: Mutex::new(Table::default()),
                counters,
            }),
        }
    }

    /// The live counters of this listener's connections.
    pub fn connections(&self) -> Connections {
        Connections {
            counters: Arc::clone(&self.shared.counters),
        }
    }

    /// Closes every connection that waits for a request (shutdown).
    pub(crate) fn closer(&self) -> Closer {
        Closer(Arc::clone(&self.shared))
    }

    /// The next admitted connection.
    async fn admit(&mut self) -> (Connection, SocketAddr) {
        loop {
            match self.tcp.accept().await {
                Ok((stream, remote)) => match self.shared.admit(stream, remote) {
                    Admitted::Open(connection) => return (connection, remote),
                    Admitted::Evicting(connection) => {
                        // Let the evicted connection close before the next
                        // accept, so the bound is overshot by as little as
                        // the runtime allows.
                        tokio::task::yield_now().await;
                        return (connection, remote);
                    }
                    Admitted::Refused => {}
                },
                // The client gave up before the accept: nothing to do.
                Err(err) if is_connection_error(&err) => {}
                Err(err) => {
                    self.shared.counters.count_accept_error(&err);
                    if is_out_of_descriptors(&err) && self.shared.evict_longest_waiting() {
                        // Let the evicted connection close its socket.
                        tokio::task::yield_now().await;
                        continue;
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            }
        }
    }
}

impl axum::serve::Listener for Listener {
    type Io = Connection;
    type Addr = SocketAddr;

    /// # Cancel safety
    ///
    /// Cancel safe: a connection is admitted only when it is returned.
    async fn accept(&mut self) -> (Connection, SocketAddr) {
        self.admit().await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }
}

/// Closes the waiting connections of one listener, from shutdown.
#[derive(Debug, Clone)]
pub(crate) struct Closer(Arc<Shared>);

impl Closer {
    pub(crate) fn close_waiting(&self) {
        for state in self.0.table().open.values() {
            if state.waiting_since().is_some() {
                state.evict();
            }
        }
    }
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics under the lock.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits `stream`, or closes it at once.
    fn admit(self: &Arc<Self>, stream: tokio::net::TcpStream, remote: SocketAddr) -> Admitted {
        self.counters.count_accept();
        let evicting = self.counters.open() >= self.counters.max();
        if evicting && !self.evict_longest_waiting() {
            // Every open connection has a request in flight: close this
            // one before reading a byte.
            drop(stream);
            self.counters.count_refusal();
            return Admitted::Refused;
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
        let connection = Connection::new(stream, remote, state, Arc::clone(self), id);
        if evicting {
            Admitted::Evicting(connection)
        } else {
            Admitted::Open(connection)
        }
    }

    /// Evicts the connection that has waited longest for a request head,
    /// however briefly; whether there was one.
    fn evict_longest_waiting(&self) -> bool {
        let table = self.table();
        let longest = table
            .open
            .values()
            .filter_map(|state| state.waiting_since().map(|since| (since, state)))
            .min_by_key(|(since, _)| *since);
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

/// What became of an accepted connection.
#[derive(Debug)]
enum Admitted {
    /// Served; there was room.
    Open(Connection),
    /// Served in the place of an evicted connection, still closing.
    Evicting(Connection),
    /// Closed at once.
    Refused,
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
