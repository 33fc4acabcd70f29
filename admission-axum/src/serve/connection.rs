//! One connection: where it is in its life, the watchdog that enforces the
//! timeouts, and the wrappers that tell the watchdog what happened.
//!
//! This module owns [`ConnState`] and [`run`]. A connection is *waiting*
//! (for a request head: just accepted, half-sent, or kept alive with no
//! request in flight) or *busy* (a request was read and its response has
//! not ended). It must never close a busy connection for a timeout or an
//! eviction: only waiting ones are closed early, and shutdown lets a busy
//! one finish its response.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::ConnectInfo;
use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};
use tower_service::Service;

use super::limits::ConnectionLimits;
use super::stats::Counters;

/// Waiting for a request head (since the accept, or since the first byte
/// of the next request on a kept-alive connection).
const HEAD: u8 = 0;
/// A request was read and its response has not ended.
const BUSY: u8 = 1;
/// Kept alive with no request in flight and no byte of the next one.
const IDLE: u8 = 2;

/// Where one connection is, shared by its watchdog, its I/O, its requests'
/// bodies and the accept loop (which reads it to pick a connection to
/// evict). Everything but eviction happens on the connection's own task.
#[derive(Debug)]
pub(crate) struct ConnState {
    epoch: Instant,
    phase: AtomicU8,
    /// Microseconds since `epoch` when the phase began.
    since: AtomicU64,
    evicted: AtomicBool,
    /// Woken when the phase changes or eviction is asked for.
    wake: Notify,
}

/// Why the watchdog closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timeout {
    Header,
    Idle,
}

impl ConnState {
    /// A connection accepted now, waiting for its first request head.
    pub(crate) fn new(epoch: Instant) -> ConnState {
        let state = ConnState {
            epoch,
            phase: AtomicU8::new(HEAD),
            since: AtomicU64::new(0),
            evicted: AtomicBool::new(false),
            wake: Notify::new(),
        };
        state.since.store(state.now(), Relaxed);
        state
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Since when (microseconds since the epoch) it has been waiting for a
    /// request head, if it is, and is not already being evicted.
    pub(crate) fn waiting_since(&self) -> Option<u64> {
        let waiting = self.phase.load(Relaxed) != BUSY && !self.evicted.load(Relaxed);
        waiting.then(|| self.since.load(Relaxed))
    }

    /// Asks the connection to close (it is waiting: nothing is cut).
    pub(crate) fn evict(&self) {
        self.evicted.store(true, Relaxed);
        self.wake.notify_one();
    }

    fn enter(&self, phase: u8) {
        self.since.store(self.now(), Relaxed);
        self.phase.store(phase, Relaxed);
        self.wake.notify_one();
    }

    /// Bytes arrived: an idle connection starts its next request head.
    fn on_bytes(&self) {
        if self.phase.load(Relaxed) == IDLE {
            self.enter(HEAD);
        }
    }

    /// When the current phase times out, and as what.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, Timeout)> {
        let since = self.epoch + Duration::from_micros(self.since.load(Relaxed));
        match self.phase.load(Relaxed) {
            HEAD => Some((since + limits.get_header_read_timeout(), Timeout::Header)),
            IDLE => Some((since + limits.get_idle_timeout(), Timeout::Idle)),
            _ => None,
        }
    }
}

/// Serves one accepted connection until it ends, times out, is evicted, or
/// shutdown closes it.
pub(crate) async fn run<S, B>(
    stream: TcpStream,
    remote: SocketAddr,
    service: S,
    state: Arc<ConnState>,
    limits: ConnectionLimits,
    counters: &Counters,
    mut stop: watch::Receiver<bool>,
) where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let io = TokioIo::new(Tracked {
        stream,
        state: Arc::clone(&state),
    });
    let service = ConnService {
        service,
        state: Arc::clone(&state),
        remote,
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog below owns every timeout: hyper's own header timer
    // would also close idle kept-alive connections at the header timeout.
    builder.header_read_timeout(None).keep_alive(true);
    let mut conn = pin!(builder.serve_connection(io, service));
    let mut sleep = pin!(tokio::time::sleep(Duration::ZERO));
    let mut stopping = false;
    loop {
        let deadline = state.deadline(&limits);
        if let Some((at, _)) = deadline {
            sleep.as_mut().reset(tokio::time::Instant::from_std(at));
        }
        tokio::select! {
            biased;
            // Served to its end, or the client went away, or it broke the
            // protocol: hyper has answered what it could.
            _ = conn.as_mut() => return,
            () = state.wake.notified() => {
                if state.evicted.load(Relaxed) {
                    counters.count_eviction();
                    return;
                }
            }
            () = sleep.as_mut(), if deadline.is_some() => {
                // The phase may have moved on since the deadline was set.
                if let Some((at, timeout)) = state.deadline(&limits)
                    && Instant::now() >= at
                {
                    match timeout {
                        Timeout::Header => counters.count_header_timeout(),
                        Timeout::Idle => counters.count_idle_timeout(),
                    }
                    return;
                }
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                if state.phase.load(Relaxed) != BUSY {
                    return;
                }
                // Finish the response in flight, then close.
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The connection's socket, telling the state when bytes arrive.
#[derive(Debug)]
struct Tracked {
    stream: TcpStream,
    state: Arc<ConnState>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.state.on_bytes();
        }
        read
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// The app as hyper calls it on one connection: each request marks the
/// connection busy until its response body ends, and carries the peer's
/// address as [`ConnectInfo`].
#[derive(Debug)]
struct ConnService<S> {
    service: S,
    state: Arc<ConnState>,
    remote: SocketAddr,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for ConnService<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone,
{
    type Response = Response<InFlightBody<B>>;
    type Error = Infallible;
    type Future = ResponseFuture<S, S::Future>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        self.state.enter(BUSY);
        let mut request = request.map(Body::new);
        request.extensions_mut().insert(ConnectInfo(self.remote));
        ResponseFuture {
            call: Call::Ready {
                service: self.service.clone(),
                request: Some(request),
            },
            in_flight: Some(InFlight(Arc::clone(&self.state))),
        }
    }
}

/// Marks its connection busy while it lives: a request's response has not
/// ended. Dropping it (the body ended, or the request was abandoned) makes
/// the connection idle.
#[derive(Debug)]
#[must_use = "the connection counts as busy only while this lives"]
#[clippy::has_significant_drop]
struct InFlight(Arc<ConnState>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.enter(IDLE);
    }
}

pin_project_lite::pin_project! {
    /// The app's response to one request, on its way.
    struct ResponseFuture<S, F> {
        #[pin]
        call: Call<S, F>,
        // Moves into the response body: the connection is busy until the
        // body ends, not only until the handler returns.
        in_flight: Option<InFlight>,
    }
}

pin_project_lite::pin_project! {
    #[project = CallProj]
    enum Call<S, F> {
        Ready { service: S, request: Option<Request<Body>> },
        Called { #[pin] future: F },
    }
}

impl<S, B> Future for ResponseFuture<S, S::Future>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible>,
{
    type Output = Result<Response<InFlightBody<B>>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.call.as_mut().project() {
                CallProj::Ready { service, request } => {
                    let Ok(()) = ready!(service.poll_ready(cx));
                    let Some(request) = request.take() else {
                        // Polled again after it completed: nothing left.
                        return Poll::Pending;
                    };
                    let future = service.call(request);
                    this.call.set(Call::Called { future });
                }
                CallProj::Called { future } => {
                    let Ok(response) = ready!(future.poll(cx));
                    let in_flight = this.in_flight.take();
                    return Poll::Ready(
                        Ok(response.map(|inner| InFlightBody { inner, in_flight })),
                    );
                }
            }
        }
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its connection busy until it ends.
    struct InFlightBody<B> {
        #[pin]
        inner: B,
        in_flight: Option<InFlight>,
    }
}

impl<B: http_body::Body<Data = Bytes>> http_body::Body for InFlightBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let frame = ready!(this.inner.poll_frame(cx));
        if frame.is_none() {
            drop(this.in_flight.take());
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
