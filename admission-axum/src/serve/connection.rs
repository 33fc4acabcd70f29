//! One admitted connection: where it is in its life, and the socket
//! wrapper that enforces its timeouts and its eviction.
//!
//! This module owns [`ConnState`] and [`Connection`] (the
//! [`Listener`](super::Listener)'s I/O type). A connection is *waiting*
//! (for a request head: just accepted, half-sent, or kept alive with no
//! request in flight) or *busy* (at least one request was read and its
//! response has not ended). It must never close a busy connection for a
//! header or idle timeout or an eviction: only waiting ones are closed
//! early. A busy one is closed only when its response made no progress
//! (the client took no byte) for the write-progress timeout.
//!
//! Closing is done from inside the socket: the next read or write hyper
//! asks for fails, and hyper drops the connection. The timers are polled
//! where hyper waits (a pending read while waiting, a pending write while
//! a response is stuck), so they fire without a task of their own.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::listener::Shared;

/// Where one connection is, shared by its socket wrapper, its requests
/// (through the tracking service) and the listener (which reads it to pick
/// a connection to evict).
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
    /// Whether a tracking service marks its requests: only then does it
    /// know request from wait, and only then do the header and idle
    /// timeouts and eviction apply.
    tracked: AtomicBool,
    evicted: AtomicBool,
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
            waker: Mutex::new(None),
        };
        state.since.store(state.now(), Relaxed);
        state
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// A tracking service serves this connection's requests.
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
    pub(crate) fn end_request(&self) {
        if self.in_flight.fetch_sub(1, Relaxed) == 1 {
            self.head.store(false, Relaxed);
            self.since.store(self.now(), Relaxed);
        }
    }

    /// Bytes arrived: an idle connection starts its next request head.
    fn on_bytes(&self) {
        if self.in_flight.load(Relaxed) == 0 && !self.head.load(Relaxed) {
            self.since.store(self.now(), Relaxed);
            self.head.store(true, Relaxed);
        }
    }

    /// When the current wait times out and as what, if it is waiting.
    fn deadline(&self, shared: &Shared) -> Option<(Instant, Timeout)> {
        self.waiting_since()?;
        let since = self.epoch + Duration::from_micros(self.since.load(Relaxed));
        let limits = &shared.limits;
        Some(if self.head.load(Relaxed) {
            (since + limits.get_header_read_timeout(), Timeout::Header)
        } else {
            (since + limits.get_idle_timeout(), Timeout::Idle)
        })
    }

    fn register(&self, cx: &Context<'_>) {
        let mut waker = self.waker.lock().unwrap_or_else(PoisonError::into_inner);
        match &mut *waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
    }
}

/// Why a waiting connection was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timeout {
    Header,
    Idle,
}

/// An admitted connection: the [`Listener`](super::Listener)'s I/O type,
/// a [`TcpStream`] that enforces the [`ConnectionLimits`](super::ConnectionLimits)
/// and leaves the listener's count when dropped.
///
/// Reads and writes fail (and hyper closes the connection) when it is
/// evicted, when a wait for a request head or an idle keep-alive outlasts
/// its timeout, or when a write makes no progress for the write-progress
/// timeout.
///
/// # Examples
///
/// ```
/// use admission_axum::serve::{ConnectionLimits, Listener};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let addr = tcp.local_addr()?;
/// let mut listener = Listener::new(tcp, ConnectionLimits::new());
/// let _client = tokio::net::TcpStream::connect(addr).await?;
/// let (connection, _peer) = axum::serve::Listener::accept(&mut listener).await;
/// assert_eq!(connection.remote_addr(), _client.local_addr()?);
/// assert_eq!(listener.connections().stats().open, 1);
/// drop(connection);
/// assert_eq!(listener.connections().stats().open, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    remote: SocketAddr,
    pub(crate) state: Arc<ConnState>,
    shared: Arc<Shared>,
    id: u64,
    /// The wait's deadline timer (header or idle), polled with reads.
    read_timer: Option<Pin<Box<Sleep>>>,
    /// Armed when a write found the socket full; cleared by progress.
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl Connection {
    pub(crate) fn new(
        stream: TcpStream,
        remote: SocketAddr,
        state: Arc<ConnState>,
        shared: Arc<Shared>,
        id: u64,
    ) -> Connection {
        Connection {
            stream,
            remote,
            state,
            shared,
            id,
            read_timer: None,
            write_timer: None,
        }
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    /// Fails the read if it was evicted or its wait timed out.
    fn check_wait(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.state.evicted.load(Relaxed) {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        self.state.register(cx);
        let Some((at, timeout)) = self.state.deadline(&self.shared) else {
            self.read_timer = None;
            return Ok(());
        };
        if Instant::now() >= at {
            match timeout {
                Timeout::Header => self.shared.counters.count_header_timeout(),
                Timeout::Idle => self.shared.counters.count_idle_timeout(),
            }
            return Err(io::ErrorKind::TimedOut.into());
        }
        let at = tokio::time::Instant::from_std(at);
        let timer = self
            .read_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if timer.deadline() != at {
            timer.as_mut().reset(at);
        }
        // Registers the wake-up at the deadline; the next read checks it.
        if timer.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
        Ok(())
    }

    /// What a write found: progress clears the stall timer, a full socket
    /// arms it, and a stall past the bound fails the write.
    fn after_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        written: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.state.evicted.load(Relaxed) {
            // Waiting, so this is the tail of an ended response nobody
            // reads: the eviction drops it too.
            return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
        }
        if written.is_ready() {
            self.write_timer = None;
            return written;
        }
        let bound = self.shared.limits.get_write_timeout();
        let timer = self
            .write_timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(bound)));
        if timer.as_mut().poll(cx).is_ready() {
            self.shared.counters.count_write_timeout();
            return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
        }
        Poll::Pending
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shared.close(self.id);
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Err(err) = this.check_wait(cx) {
            return Poll::Ready(Err(err));
        }
        let before = buf.filled().len();
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.state.on_bytes();
        }
        read
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.after_write(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        // Lets hyper queue a response's `Bytes` instead of copying them.
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
