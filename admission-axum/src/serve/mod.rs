//! Connection admission: serving an axum app with a bound on open
//! connections, a header-read timeout and an idle keep-alive timeout.
//!
//! Request admission bounds the work a request may start; it cannot help
//! once a client holds the process at the connection layer. A plain
//! `TcpListener` under `axum::serve` has no knobs for that: a client that
//! opens connections and never finishes a request head (slowloris) keeps
//! each one open, a client that never reads keeps each response's memory,
//! and at the descriptor limit nothing else, `/healthz` included, is
//! accepted any more. [`Listener`] is a listener `axum::serve` accepts
//! with the knobs, [`track`] the make-service that tells it when a request
//! is in flight, and [`serve`] both in one call:
//!
//! * **A bound on open connections**
//!   ([`ConnectionLimits::max_connections`]). Past it, a new connection
//!   takes the place of the connection that has waited longest for a
//!   request head, *however briefly* (a half-sent request or an idle
//!   keep-alive), which is closed (*evicted*); when every open connection
//!   is in the middle of a request, the new one is closed at once, before
//!   a byte is read (*refused*). Both are counted. There is no grace
//!   period an attacker could stay under by re-opening at once: attackers
//!   re-opening as fast as they can evict each other, oldest first, and a
//!   newcomer that sends its request at once is served while
//!   `max_connections - 1` newer connections arrive after it. Requests in
//!   flight are never cut for a newcomer. The default is three quarters of
//!   the process's open-file limit, at most 4096, so the bound is reached
//!   before the descriptors run out.
//! * **A header-read timeout** ([`ConnectionLimits::header_read_timeout`],
//!   10 s by default): a request head must be complete within it, counted
//!   from the accept, or from the first byte of the next request on a
//!   kept-alive connection.
//! * **An idle timeout** ([`ConnectionLimits::idle_timeout`], 60 s by
//!   default): a kept-alive connection with no request in flight and no
//!   byte received for that long is closed.
//! * **A write-progress timeout** ([`ConnectionLimits::write_timeout`],
//!   10 s by default): a response the client has taken no byte of for that
//!   long (the socket stays full) is dropped with its connection, so a
//!   client that never reads holds a response's memory for at most this
//!   long. Bound the bytes such responses hold across connections in the
//!   app (the exporter's `--max-held-mb` does).
//! * **Descriptor exhaustion**: when accepting fails because the process
//!   is out of descriptors (`EMFILE`, `ENFILE`), the longest-waiting
//!   connection is evicted to make room; otherwise accepting backs off
//!   (50 ms) and tries again.
//! * **Visible, not loud**: [`Connections`] counts connections open,
//!   accepted, refused, evicted and timed out (export them as metrics);
//!   refusals, evictions, header and write timeouts and accept errors are
//!   also logged as one `WARN` line at most every 10 s, carrying the
//!   counts since the previous line and never a client's address or
//!   bytes. Idle timeouts are ordinary keep-alive housekeeping and are
//!   only counted.
//! * **Graceful shutdown** ([`Serve::with_graceful_shutdown`]): when the
//!   signal completes it stops accepting, closes the connections waiting
//!   for a request head, lets requests in flight finish (their
//!   connections close after the response; a response nobody reads is
//!   dropped after the write-progress timeout) and resolves when every
//!   connection is closed. Bound the wait with your own deadline.
//!
//! Connections are served by `axum::serve`: HTTP/1.1, HTTP/2 (cleartext,
//! prior knowledge) and upgrades such as WebSocket pass through. An
//! HTTP/2 connection is busy while any of its streams is; an upgraded
//! connection counts as waiting once its `101` is sent, so it is closed
//! after the idle timeout of silence (keep it alive with pings) and may be
//! evicted at the bound. Every request carries
//! [`ConnectInfo<SocketAddr>`](axum::extract::ConnectInfo) for handlers
//! that want the peer's address.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//!
//! use admission_axum::serve::ConnectionLimits;
//! use axum::{Router, routing::get};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let limits = ConnectionLimits::new()
//!     .max_connections(512)
//!     .header_read_timeout(Duration::from_secs(5))
//!     .idle_timeout(Duration::from_secs(30));
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = admission_axum::serve(listener, app)
//!     .limits(limits)
//!     .with_graceful_shutdown(async {
//!         let _ = stopped.await;
//!     });
//! let connections = server.connections();
//! let served = tokio::spawn(std::future::IntoFuture::into_future(server));
//!
//! // A plain HTTP/1.1 request over a socket.
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//! let mut socket = tokio::net::TcpStream::connect(addr).await?;
//! socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await?;
//! let mut answer = String::new();
//! socket.read_to_string(&mut answer).await?;
//! assert!(answer.starts_with("HTTP/1.1 200 OK"));
//! assert!(answer.ends_with("ok\n"));
//!
//! stop.send(()).unwrap();
//! served.await.unwrap()?;
//! let stats = connections.stats();
//! assert_eq!((stats.accepted, stats.open, stats.max), (1, 0, 512));
//! # Ok(())
//! # }
//! ```

mod connection;
mod limits;
mod listener;
mod server;
mod stats;
mod track;

pub use self::connection::Connection;
pub use self::limits::ConnectionLimits;
pub use self::listener::Listener;
pub use self::server::{Serve, serve};
pub use self::stats::{ConnectionStats, Connections};
pub use self::track::{Track, Tracked, TrackedFuture, track};
