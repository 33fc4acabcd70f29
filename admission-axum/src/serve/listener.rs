//! The admitting listener axum's server accepts from.
//!
//! This module owns `Listener`, axum's `Listener` trait over
//! [`admission_http::connection::Incoming`]. It must never admit, evict
//! or count anything itself: that is the shared accept loop's.

use std::io;
use std::net::SocketAddr;

use admission_core::ConfigError;
use admission_http::connection::{Connection, ConnectionLimits, Connections, Incoming};
use tokio::net::{TcpListener, TcpStream};

/// A [`TcpListener`] that admits connections under [`ConnectionLimits`]:
/// what [`serve`](super::serve()) gives `axum::serve`, through
/// [`track`](super::track::track). What it enforces is described in the
/// [module docs](super).
#[derive(Debug)]
pub(crate) struct Listener(Incoming<TcpListener>);

impl Listener {
    /// Admits connections accepted from `tcp` under `limits`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] naming a setting that is zero.
    pub(crate) fn new(tcp: TcpListener, limits: ConnectionLimits) -> Result<Listener, ConfigError> {
        Incoming::new(tcp, limits).map(Listener)
    }

    pub(crate) fn with_default_limits(tcp: TcpListener) -> Listener {
        Listener(Incoming::with_default_limits(tcp))
    }

    pub(crate) fn into_inner(self) -> TcpListener {
        self.0.into_inner()
    }

    /// The live counters of this listener's connections.
    pub(crate) fn connections(&self) -> Connections {
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
