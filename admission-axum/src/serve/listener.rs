//! The admitting listener axum's server accepts from.
//!
//! This module owns [`Listener`], axum's `Listener` trait over
//! [`admission_http::connection::Incoming`]. It must never admit, evict
//! or count anything itself: that is the shared accept loop's.

use std::io;
use std::net::SocketAddr;

use admission_core::ConfigError;
use admission_http::connection::{Connection, ConnectionLimits, Connections, Incoming};
use tokio::net::{TcpListener, TcpStream};

/// A [`TcpListener`] that admits connections under [`ConnectionLimits`]:
/// give it to [`axum::serve()`] (through [`track`](super::track) to get the
/// header and idle timeouts and eviction) or use [`serve`](super::serve()),
/// which does both. What it enforces is described in the
/// [module docs](super).
///
/// # Examples
///
/// ```
/// use admission_axum::serve::{ConnectionLimits, Listener};
/// use axum::{Router, routing::get};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let listener = Listener::new(tcp, ConnectionLimits::new().with_max_connections(64))?;
/// let connections = listener.connections();
/// let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
/// let server = axum::serve(listener, admission_axum::serve::track(app));
/// drop(server); // `.await` it to serve
/// assert_eq!(connections.stats().max, 64);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Listener(Incoming<TcpListener>);

impl Listener {
    /// Admits connections accepted from `tcp` under `limits`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] naming a setting that is zero.
    pub fn new(tcp: TcpListener, limits: ConnectionLimits) -> Result<Listener, ConfigError> {
        Incoming::new(tcp, limits).map(Listener)
    }

    pub(crate) fn with_default_limits(tcp: TcpListener) -> Listener {
        Listener(Incoming::with_default_limits(tcp))
    }

    pub(crate) fn into_inner(self) -> TcpListener {
        self.0.into_inner()
    }

    /// The live counters of this listener's connections.
    pub fn connections(&self) -> Connections {
        self.0.connections()
    }
}

impl axum::serve::Listener for Listener {
    type Io = Connection<TcpStream>;
    type Addr = SocketAddr;

    /// # Cancel safety
    ///
    /// Cancel safe: a connection is admitted only when it is returned.
    async fn accept(&mut self) -> (Connection<TcpStream>, SocketAddr) {
        self.0.admit().await
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.get_ref().local_addr()
    }
}
