//! The admitted connection: a socket wrapper that enforces its timeouts
//! and its eviction.
//!
//! This module owns [`Connection`]. It must never close a busy connection
//! for a header or idle timeout or an eviction: only waiting ones are
//! closed early. A busy one is closed only when a write made no progress
//! for the write timeout.
//!
//! Closing is done from inside the socket: the next read or write the
//! server asks for fails, and the server drops the connection. The timers
//! are polled where the server waits (a pending read while waiting, a
//! pending write while a response is stuck), so they fire without a task
//! of their own.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Sleep;

use super::admit::Shared;
use super::state::{ConnState, Requests, Wait};

/// The HTTP/2 client preface's length: `PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`.
const PREFACE_LEN: usize = 24;

/// An admitted connection (from [`Incoming`](super::Incoming)): the
/// socket `IO`, which enforces the [`ConnectionLimits`](super::ConnectionLimits)
/// and leaves the accept loop's count when dropped.
///
/// Reads and writes fail (and the server closes the connection) when it
/// is evicted, when a wait for a request head or an idle keep-alive
/// outlasts its timeout, or when a write makes no progress for the write
/// timeout.
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
/// let mut incoming = Incoming::new(tcp, ConnectionLimits::new())?;
/// let client = tokio::net::TcpStream::connect(addr).await?;
/// let (connection, peer) = incoming.admit().await;
/// assert_eq!(peer, client.local_addr()?);
/// assert_eq!(connection.get_ref().peer_addr()?, client.local_addr()?);
/// assert_eq!(incoming.connections().stats().open, 1);
/// drop(connection);
/// assert_eq!(incoming.connections().stats().open, 0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Connection<IO> {
    io: IO,
    state: Arc<ConnState>,
    shared: Arc<Shared>,
    id: u64,
    /// Bytes of the HTTP/2 preface still to come, when the connection
    /// counts them itself (see [`Incoming::http2_preface`](super::Incoming::http2_preface)).
    preface: Option<usize>,
    /// The wait's deadline timer (header or idle), polled with reads.
    read_timer: Option<Pin<Box<Sleep>>>,
    /// Armed when a write found the socket full; cleared by progress.
    write_timer: Option<Pin<Box<Sleep>>>,
}

impl<IO> Connection<IO> {
    pub(crate) fn new(
        io: IO,
        state: Arc<ConnState>,
        shared: Arc<Shared>,
        id: u64,
        preface: bool,
    ) -> Connection<IO> {
        if preface {
            state.track();
        }
        Connection {
            io,
            state,
            shared,
            id,
            preface: preface.then_some(PREFACE_LEN),
            read_timer: None,
            write_timer: None,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// The handle that tells this connection when its requests are in
    /// flight; taking it turns on the header and idle timeouts and
    /// eviction between requests.
    pub fn requests(&self) -> Requests {
        self.state.track();
        Requests(Arc::clone(&self.state))
    }

    /// Fails the read if it was evicted or its wait timed out.
    fn check_wait(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        if self.state.evicted.load(Relaxed) {
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        self.state.register(cx);
        if self.shared.closing.load(Relaxed) && self.state.waiting_since().is_some() {
            // Shut down: a connection done with its requests closes.
            return Err(io::ErrorKind::ConnectionAborted.into());
        }
        let Some((at, wait)) = self.state.deadline(&self.shared.limits) else {
            self.read_timer = None;
            return Ok(());
        };
        if Instant::now() >= at {
            match wait {
                Wait::Head => self.shared.counters.count_header_timeout(),
                Wait::Idle => self.shared.counters.count_idle_timeout(),
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

    /// Bytes arrived.
    fn on_bytes(&mut self, read: usize) {
        match &mut self.preface {
            Some(left) => {
                self.state.on_bytes();
                *left = left.saturating_sub(read);
                if *left == 0 {
                    // An HTTP/2 connection is busy from its preface on:
                    // its streams are the server's to bound.
                    self.preface = None;
                    self.state.begin_request();
                }
            }
            None => self.state.on_bytes(),
        }
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
            self.state.on_write();
            return written;
        }
        let bound = self.shared.limits.write_timeout();
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

impl<IO> Drop for Connection<IO> {
    fn drop(&mut self) {
        self.shared.close(self.id);
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Connection<IO> {
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
        let read = Pin::new(&mut this.io).poll_read(cx, buf);
        let filled = buf.filled().len() - before;
        if matches!(read, Poll::Ready(Ok(()))) && filled > 0 {
            this.on_bytes(filled);
        }
        read
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Connection<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.io).poll_write(cx, buf);
        this.after_write(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let written = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.after_write(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        // Lets the server queue a response's `Bytes` instead of copying.
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
