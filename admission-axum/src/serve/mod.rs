//! Connection admission for axum: serving an app with a bound on open
//! connections, a header-read timeout, an idle keep-alive timeout and a
//! write-progress timeout.
//!
//! This module owns axum's side only: [`serve`], which gives
//! `axum::serve` a listener over the shared accept loop
//! ([`admission_http::connection::Incoming`]) and an app that tells each
//! connection when a request is in flight, with a shutdown that closes
//! waiting connections.
//! What is bounded, counted and logged, and the defaults, are the same on
//! every adapter and described once in [`admission_http::connection`];
//! [`ConnectionLimits`], [`ConnectionStats`] and [`Connections`] are
//! re-exported from there.
//!
//! Connections are served by `axum::serve`: HTTP/1.1, HTTP/2 (cleartext,
//! prior knowledge) and upgrades such as WebSocket pass through. An
//! HTTP/2 connection is busy while any of its streams is; an upgraded
//! connection counts as waiting once its `101` is sent, so it is closed
//! after the idle timeout of silence (keep it alive with pings) and may be
//! evicted at the bound. Every request carries
//! [`ConnectInfo<SocketAddr>`](axum::extract::ConnectInfo) for handlers
//! that want the peer's address. (`axum::serve` has no HTTP/2 settings:
//! the `http2_*` limits are tonic's.)
//!
//! **Graceful shutdown** ([`Serve::with_graceful_shutdown`]): when the
//! signal completes it stops accepting, closes the connections waiting
//! for a request head, lets requests in flight finish (a response nobody
//! reads is dropped after the write-progress timeout) and resolves when
//! every connection is closed. Bound the wait with your own deadline.
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
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let limits = ConnectionLimits::new()
//!     .with_max_connections(512)
//!     .with_header_timeout(Duration::from_secs(5))
//!     .with_idle_timeout(Duration::from_secs(30));
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! let server = admission_axum::serve(listener, app)
//!     .limits(limits)?
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
//! served.await??;
//! let stats = connections.stats();
//! assert_eq!((stats.accepted, stats.open, stats.max), (1, 0, 512));
//! # Ok(())
//! # }
//! ```

mod listener;
mod server;
mod track;

pub use self::server::{Serve, serve};
pub use admission_http::connection::{ConnectionLimits, ConnectionStats, Connections};
