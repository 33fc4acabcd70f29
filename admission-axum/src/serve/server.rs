//! The one-call server: [`axum::serve()`] over a [`Listener`] with
//! [`track`], and a shutdown that closes waiting connections at once.
//!
//! This module owns [`Serve`] and [`serve`]. It must never serve a
//! connection itself: HTTP/1, HTTP/2 and upgrades are `axum::serve`'s.

use std::convert::Infallible;
use std::fmt;
use std::future::{Future, IntoFuture, Pending, pending};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;

use admission_core::ConfigError;
use admission_http::connection::{ConnectionLimits, Connections};
use axum::body::Body;
use bytes::Bytes;
use http::{Request, Response};
use tokio::net::TcpListener;
use tower_service::Service;

use super::listener::Listener;
use super::track::track;

/// Serves `service` (an axum [`Router`](axum::Router), or any tower
/// service of requests with an [`axum::body::Body`]) on `listener` under
/// [`ConnectionLimits`]: the knobs `axum::serve` does not have.
///
/// It is built with the default limits (see [`ConnectionLimits::new`]);
/// change them with [`Serve::limits`], stop it with
/// [`Serve::with_graceful_shutdown`], and `.await` it to serve.
///
/// # Examples
///
/// ```no_run
/// use admission_axum::serve::ConnectionLimits;
/// use axum::{Router, routing::get};
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// admission_axum::serve(listener, app)
///     .limits(ConnectionLimits::new().with_max_connections(1000))?
///     .with_graceful_shutdown(async { drop(tokio::signal::ctrl_c().await) })
///     .await?;
/// # Ok(())
/// # }
/// ```
pub fn serve<S, B>(listener: TcpListener, service: S) -> Serve<S>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    Serve {
        listener: Listener::with_default_limits(listener),
        service,
        signal: pending(),
    }
}

/// A server not yet started: [`serve`] builds it, `.await` runs it.
///
/// # Cancel safety
///
/// Awaiting it serves until the shutdown signal completes and every
/// connection has closed. Dropping the future stops accepting at once;
/// open connections are served on their own tasks until they end or a
/// timeout closes them.
#[must_use = "a server does nothing until it is awaited"]
pub struct Serve<S, F = Pending<()>> {
    listener: Listener,
    service: S,
    signal: F,
}

impl<S, F> fmt::Debug for Serve<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl<S, F> Serve<S, F> {
    /// The same server under `limits`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::serve::ConnectionLimits;
    /// use axum::Router;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// let server = admission_axum::serve(listener, Router::new())
    ///     .limits(ConnectionLimits::new().with_max_connections(64))?;
    /// assert_eq!(server.connections().stats().max, 64);
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] naming a setting that is zero.
    pub fn limits(self, limits: ConnectionLimits) -> Result<Serve<S, F>, ConfigError> {
        Ok(Serve {
            listener: Listener::new(self.listener.into_inner(), limits)?,
            ..self
        })
    }

    /// The same server, stopping gracefully when `signal` completes: it
    /// stops accepting, closes the connections that wait for a request,
    /// lets the requests in flight finish, and resolves once every
    /// connection has closed. Bound that wait with a deadline of your own
    /// (`tokio::time::timeout`) if a response may take long.
    ///
    /// # Examples
    ///
    /// ```
    /// use axum::Router;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// // A signal that has already fired: it stops at once.
    /// admission_axum::serve(listener, Router::new())
    ///     .with_graceful_shutdown(async {})
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_graceful_shutdown<G>(self, signal: G) -> Serve<S, G>
    where
        G: Future<Output = ()> + Send + 'static,
    {
        Serve {
            listener: self.listener,
            service: self.service,
            signal,
        }
    }

    /// The live counters of this server's connections.
    pub fn connections(&self) -> Connections {
        self.listener.connections()
    }

    /// The address the listener is bound to.
    ///
    /// # Errors
    ///
    /// As [`tokio::net::TcpListener::local_addr`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        axum::serve::Listener::local_addr(&self.listener)
    }
}

impl<S, B, F> IntoFuture for Serve<S, F>
where
    S: Service<Request<Body>, Response = Response<B>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        let Serve {
            listener,
            service,
            signal,
        } = self;
        let connections = listener.connections();
        let signal = async move {
            signal.await;
            // hyper closes idle keep-alives and lets responses finish; a
            // connection half-way through a head is closed here.
            connections.close_waiting();
        };
        Box::pin(
            axum::serve(listener, track(service))
                .with_graceful_shutdown(signal)
                .into_future(),
        )
    }
}
