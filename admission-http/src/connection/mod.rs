//! Connection admission, one for every adapter: a bound on open
//! connections, a header timeout, an idle keep-alive timeout, a
//! write-progress timeout and descriptor exhaustion handled, over any
//! accept stream (feature `connections`).
//!
//! Request admission bounds the work a request may start; it cannot help
//! once a client holds the process at the connection layer. A client that
//! opens connections and never finishes a request head (slowloris) keeps
//! each one open, a client that never reads keeps each response's memory,
//! and at the descriptor limit nothing else, health included, is accepted
//! any more. [`Incoming`] is the accept loop with the knobs, generic over
//! an [`Accept`] source (a [`TcpListener`](tokio::net::TcpListener) or
//! your own); axum's `admission_axum::serve`, tonic's
//! `admission_tonic::connections` and actix-web's `admission_actix::serve`
//! wrap it in their framework's listener trait.
//!
//! This module owns nothing about HTTP beyond the length of the HTTP/2
//! preface: it must never parse a request, and never read a byte from a
//! connection it refuses.
//!
//! * **A bound on open connections**
//!   ([`ConnectionLimits::max_connections`]). Past it, a new connection
//!   takes the place of the connection that has waited longest for a
//!   request head, *however briefly* (a half-sent request, an idle
//!   keep-alive, an HTTP/2 connection that has not sent its preface),
//!   which is closed (*evicted*; a connection that sent part of a head
//!   and stopped goes first, then one that sent nothing yet, then one the
//!   server has not read from, whose whole request may be waiting in its
//!   socket); when every open connection is busy, the
//!   new one is closed at once, before a byte is read (*refused*): a
//!   client sees a closed connection at once and may retry, rather than
//!   waiting in the kernel's backlog for a place that may not free. There
//!   is no grace period an attacker could stay under by re-opening at
//!   once. Requests in flight are never cut for a newcomer. The default
//!   leaves room for the descriptors the process holds and a reserve (see
//!   [`ConnectionLimits::new`]).
//! * **A header timeout** ([`ConnectionLimits::header_timeout`], 10 s by
//!   default): a request head (HTTP/1) or the client preface (HTTP/2)
//!   must be complete within it, counted from the accept, or from the
//!   first byte of the next request on a kept-alive connection.
//! * **An idle timeout** ([`ConnectionLimits::idle_timeout`], 60 s): a
//!   kept-alive HTTP/1 connection with no request in flight and no byte
//!   received for that long is closed. (HTTP/2 connections are busy from
//!   their preface on: keepalive pings find the dead ones.)
//! * **A write-progress timeout** ([`ConnectionLimits::write_timeout`],
//!   10 s): a connection whose socket accepted no byte for that long while
//!   a write waits is closed, with the response. The exact rule, and why a
//!   slow reader is never cut, is on
//!   [`ConnectionLimits::with_write_timeout`].
//! * **Descriptor exhaustion**: when accepting fails because the process
//!   is out of descriptors (`EMFILE`, `ENFILE`), the longest-waiting
//!   connection is evicted to make room; otherwise accepting backs off
//!   ([`ConnectionLimits::accept_backoff`]) and tries again. It never
//!   spins.
//! * **Visible, not loud**: [`Connections`] counts connections open,
//!   accepted, refused, evicted and timed out ([`ConnectionStats`]);
//!   refusals, evictions, header and write timeouts and accept errors are
//!   also logged as one `WARN` line at most per
//!   [`ConnectionLimits::log_every`] (10 s), with the counts since the
//!   previous line and a stable `code` ([`CONNECTION_EVICTED`],
//!   [`ACCEPT_FAILED`]), never a client's address or bytes.
//! * **Shutdown**: [`Connections::close_waiting`] closes the connections
//!   that wait for a request head and leaves busy ones to finish.
//!
//! # Examples
//!
//! ```
//! use std::time::Duration;
//! use admission_http::connection::{ConnectionLimits, Incoming};
//! use tokio::io::AsyncReadExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = tcp.local_addr()?;
//! let limits = ConnectionLimits::new().with_header_timeout(Duration::from_millis(100));
//! let mut incoming = Incoming::new(tcp, limits)?;
//!
//! let mut client = tokio::net::TcpStream::connect(addr).await?;
//! let (mut connection, _peer) = incoming.admit().await;
//! let _requests = connection.requests();
//! // The client sends nothing: the server's read fails at the header timeout.
//! let mut buf = [0; 16];
//! assert!(connection.read(&mut buf).await.is_err());
//! assert_eq!(incoming.connections().stats().header_timeouts, 1);
//! drop(connection);
//! assert_eq!(client.read(&mut buf).await?, 0, "closed");
//! # Ok(())
//! # }
//! ```

mod admit;
mod descriptors;
mod io;
mod limits;
mod state;
mod stats;

pub use self::admit::{Accept, Connections, Incoming};
pub use self::io::Connection;
pub use self::limits::ConnectionLimits;
pub use self::state::{InFlight, Requests};
pub use self::stats::{ACCEPT_FAILED, CONNECTION_EVICTED, ConnectionStats};
