//! Where one admitted connection is in its life, and the handle that
//! tells it when a request is in flight.
//!
//! This module owns the connection state shared by the socket wrapper,
//! its requests and the accept loop, plus [`Requests`] and [`InFlight`].
//! A connection is *waiting* (for a request head: just accepted,
//! half-sent, or kept alive with no request in flight) or *busy* (a
//! request was read and its response has not ended). It must never let a
//! busy connection be picked for eviction or a header or idle timeout.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use super::limits::ConnectionLimits;

/// Why a waiting connection is due to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A request head (or the HTTP/2 preface) is on its way.
    Head,
    /// A kept-alive connection idles between requests.
    Idle,
}

/// One connection's state.
#[derive(Debug)]
pub(crate) struct ConnState {
    epoch: Instant,
    /// Requests read whose response has not ended.
    in_flight: AtomicUsize,
    /// Microseconds since `epoch` when it began waiting (the accept, the
    /// end of its last response, or the first byte of the next head).
    since: AtomicU64,
    /// Whether it waits for a head (bytes arrived) rather than idles.
    head: AtomicBool,
    /// Whether something tells it when requests are in flight: only then
    /// does it know request from wait, and only then do the header and
    /// idle timeouts and eviction apply.
    tracked: AtomicBool,
    pub(crate) evicted: AtomicBool,
    /// Whether the server has polled it for reading: until then a request
    /// head may be sitting unread in the socket.
    polled: AtomicBool,
    /// Whether bytes of the awaited head (or preface) have arrived: a
    /// partial head read and not completed is a slow sender's mark.
    started: AtomicBool,
    /// The task to wake when it is evicted.
    waker: Mutex<Option<Waker>>,
}

impl ConnState {
    /// A connection accepted now, waiting for its first request head.
    pub(crate) fn new(epoch: Instant) -> ConnState {
        let state = ConnState {
            epoch,
            in_flight: AtomicUsize::new(0),
            since: AtomicU64::new(0),
            head: AtomicBool::new(true),
            tracked: AtomicBool::new(false),
            evicted: AtomicBool::new(false),
            polled: AtomicBool::new(false),
            started: AtomicBool::new(false),
            waker: Mutex::new(None),
        };
        state.since.store(state.now(), Relaxed);
        state
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Something tells this connection when its requests are in flight.
    pub(crate) fn track(&self) {
        self.tracked.store(true, Relaxed);
    }

    /// Since when (microseconds since the epoch) it has been waiting for a
    /// request head, if it is, is tracked, and is not already evicted.
    pub(crate) fn waiting_since(&self) -> Option<u64> {
        let waiting = self.tracked.load(Relaxed)
            && self.in_flight.load(Relaxed) == 0
            && !self.evicted.load(Relaxed);
        waiting.then(|| self.since.load(Relaxed))
    }

    /// Whether the server has polled it for reading at least once.
    pub(crate) fn polled(&self) -> bool {
        self.polled.load(Relaxed)
    }

    /// Which waiting connection goes first at the bound (lowest first): one
    /// that sent part of a head and stopped, then one read from that sent
    /// nothing yet, then one not yet read from (a whole request may be
    /// waiting in its socket).
    pub(crate) fn eviction_class(&self) -> u8 {
        if self.started.load(Relaxed) {
            0
        } else if self.polled() {
            1
        } else {
            2
        }
    }

    /// Asks the connection to close (it is waiting: nothing is cut).
    pub(crate) fn evict(&self) {
        self.evicted.store(true, Relaxed);
        let waker = self
            .waker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// A request was read: busy until [`ConnState::end_request`].
    pub(crate) fn begin_request(&self) {
        self.in_flight.fetch_add(1, Relaxed);
    }

    /// A request's response ended (or was abandoned).
    fn end_request(&self) {
        if self.in_flight.fetch_sub(1, Relaxed) == 1 {
            self.started.store(false, Relaxed);
            self.head.store(false, Relaxed);
            self.since.store(self.now(), Relaxed);
        }
    }

    /// Bytes arrived: an idle connection starts its next request head.
    pub(crate) fn on_bytes(&self) {
        if self.in_flight.load(Relaxed) == 0 {
            self.started.store(true, Relaxed);
        }
        if self.in_flight.load(Relaxed) == 0 && !self.head.load(Relaxed) {
            self.since.store(self.now(), Relaxed);
            self.head.store(true, Relaxed);
        }
    }

    /// Bytes went out: the tail of a response still being written keeps an
    /// idle connection from its idle timeout (the timeout counts silence,
    /// not the time since the server produced the response's end).
    pub(crate) fn on_write(&self) {
        if self.in_flight.load(Relaxed) == 0 && !self.head.load(Relaxed) {
            self.since.store(self.now(), Relaxed);
        }
    }

    /// When the current wait times out and as what, if it is waiting.
    pub(crate) fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, Wait)> {
        self.waiting_since()?;
        let since = self.epoch + Duration::from_micros(self.since.load(Relaxed));
        Some(if self.head.load(Relaxed) {
            (since + limits.header_timeout(), Wait::Head)
        } else {
            (since + limits.idle_timeout(), Wait::Idle)
        })
    }

    pub(crate) fn register(&self, cx: &Context<'_>) {
        self.polled.store(true, Relaxed);
        let mut waker = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
    }
}

/// Tells one connection when a request is in flight, from the service
/// that serves it: from [`Connection::requests`](super::Connection::requests).
///
/// A connection whose requests are told is *waiting* between them, so
/// the header and idle timeouts apply and it may be evicted at the bound;
/// one served without it gets the bound and the write timeout only.
///
/// # Examples
///
/// ```
/// use admission_http::connection::{ConnectionLimits, Incoming};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = tcp.local_addr()?;
/// let mut incoming = Incoming::new(tcp, ConnectionLimits::new().with_max_connections(1))?;
/// let _client = tokio::net::TcpStream::connect(addr).await?;
/// let (connection, _peer) = incoming.admit().await;
/// let requests = connection.requests();
/// let in_flight = requests.begin(); // a request head was read
/// // Busy: a newcomer at the bound finds nothing to evict and is refused.
/// let _other = tokio::net::TcpStream::connect(addr).await?;
/// # let accept = tokio::time::timeout(std::time::Duration::from_millis(50), incoming.admit());
/// # assert!(accept.await.is_err(), "the newcomer was refused, nothing admitted");
/// assert_eq!(incoming.connections().stats().refused, 1);
/// drop(in_flight); // its response ended
/// # drop(connection);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct Requests(pub(crate) Arc<ConnState>);

impl Requests {
    /// A request was read: the connection is busy until the guard drops
    /// (when its response has ended).
    pub fn begin(&self) -> InFlight {
        self.0.begin_request();
        InFlight(Arc::clone(&self.0))
    }
}

/// Marks its connection busy while it lives: from [`Requests::begin`].
#[derive(Debug)]
#[must_use = "the connection counts as busy only while this lives"]
#[clippy::has_significant_drop]
#[doc(hidden)]
pub struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end_request();
    }
}
