//! Connection admission for a tonic server: the bound on what clients can
//! hold before any call is made.
//!
//! This module owns tonic's side only: [`incoming`] (the shared accept
//! loop, [`admission_http::connection::Incoming`], in its HTTP/2 preface
//! mode, as a stream for `serve_with_incoming`), [`Connection`] (its
//! socket with tonic's `Connected`) and [`server`] (the HTTP/2 settings
//! the limits carry). What is bounded, counted and logged, and the
//! defaults, are the same on every adapter and described once in
//! [`admission_http::connection`]; [`ConnectionLimits`],
//! [`ConnectionStats`] and [`Connections`] are re-exported from there.
//! For gRPC:
//!
//! * **Open connections**: at most
//!   [`max_connections`](ConnectionLimits::max_connections). At the bound,
//!   a new connection takes the place of the one that has waited longest
//!   without sending the HTTP/2 preface, which is closed; when every
//!   connection has sent its preface, the newcomer is closed at once (its
//!   channel sees `UNAVAILABLE` and reconnects with back-off).
//! * **The preface**: a connection that has not sent the 24 bytes of the
//!   HTTP/2 client preface within
//!   [`header_timeout`](ConnectionLimits::header_timeout) is closed. From
//!   its preface on a connection is busy: never evicted, never timed out
//!   for idling; keepalive pings close it when its peer stops answering.
//! * **Descriptors**: when `accept` fails for want of descriptors, the
//!   oldest silent connection is closed, else accepting backs off.
//! * **Streams and dead peers** ([`server`]): HTTP/2
//!   `SETTINGS_MAX_CONCURRENT_STREAMS` and keepalive pings.
//!
//! # Examples
//!
//! ```no_run
//! use admission_core::RequestPools;
//! use admission_tonic::AdmissionLayer;
//! use admission_tonic::connections::{self, ConnectionLimits};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limits = ConnectionLimits::new().with_max_connections(512);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
//! let incoming = connections::incoming(listener, limits)?; // a bad setting is an error here
//! let (_reporter, health) = tonic_health::server::health_reporter();
//! connections::server(&limits, tonic::transport::Server::builder())
//!     .layer(AdmissionLayer::new(RequestPools::new(16, 4)?))
//!     .add_service(health)
//!     .serve_with_incoming(incoming)
//!     .await?;
//! # Ok(())
//! # }
//! ```

use std::convert::Infallible;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use admission_http::connection;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tonic::transport::Server;
use tonic::transport::server::{Connected, TcpConnectInfo};

pub use admission_http::connection::{
    ACCEPT_FAILED, CONNECTION_EVICTED, ConnectionLimits, ConnectionStats, Connections,
};

/// The accept loop over `listener` under `limits`, for tonic's
/// `serve_with_incoming`.
///
/// # Errors
///
/// [`ConfigError::ZeroSetting`](admission_core::ConfigError::ZeroSetting) naming a setting that is zero.
///
/// # Examples
///
/// ```
/// use admission_tonic::connections::{self, ConnectionLimits};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let none = ConnectionLimits::new().with_max_connections(0);
/// let err = connections::incoming(listener, none).unwrap_err();
/// assert_eq!(err.to_string(), "`max_connections` must be above zero");
/// # Ok(())
/// # }
/// ```
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
) -> Result<Incoming, admission_core::ConfigError> {
    Ok(Incoming(
        connection::Incoming::new(listener, limits)?.http2_preface(),
    ))
}

/// `server` with the HTTP/2 settings `limits` carry:
/// `SETTINGS_MAX_CONCURRENT_STREAMS` and keepalive pings.
///
/// # Examples
///
/// ```
/// use admission_tonic::connections::{self, ConnectionLimits};
///
/// let limits = ConnectionLimits::new().with_http2_max_concurrent_streams(32);
/// let _server = connections::server(&limits, tonic::transport::Server::builder());
/// ```
pub fn server<L>(limits: &ConnectionLimits, server: Server<L>) -> Server<L> {
    server
        .max_concurrent_streams(limits.http2_max_concurrent_streams())
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval()))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout()))
}

/// The accept loop: a stream of admitted [`Connection`]s for tonic's
/// `serve_with_incoming`, which never ends and never yields an error (a
/// failed `accept` is counted and room made or backed off from). Built by
/// [`incoming`].
pub struct Incoming(connection::Incoming<TcpListener>);

impl fmt::Debug for Incoming {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Incoming").field(&self.0).finish()
    }
}

impl Incoming {
    /// A handle on the counters, to keep before the server takes the
    /// stream.
    pub fn connections(&self) -> Connections {
        self.0.connections()
    }
}

impl futures_util::Stream for Incoming {
    type Item = Result<Connection, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0
            .poll_admit(cx)
            .map(|(connection, _peer)| Some(Ok(Connection(connection))))
    }
}

/// An admitted connection: the socket, its preface deadline until the
/// preface has come, and its place under the bound until it closes.
#[derive(Debug)]
#[doc(hidden)]
pub struct Connection(connection::Connection<TcpStream>);

impl Connected for Connection {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.0.get_ref().connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
