//! One plain HTTP/1.1 `GET` on a connection of its own, for the fleet's
//! own looks at a replica or a balancer (readiness, metrics, HAProxy's
//! stats, Envoy's admin page).
//!
//! This module owns [`get`]. It never retries and never waits past its
//! bound; what to do with a refusal is its caller's business.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper::{Request, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// `GET path` on `addr`: the status and the body as text, within `bound`.
///
/// # Cancel safety
///
/// Cancel safe: dropping the future closes the connection.
///
/// # Errors
///
/// A connection or protocol failure, or the bound passed.
pub(crate) async fn get(
    addr: SocketAddr,
    path: &str,
    bound: Duration,
) -> io::Result<(u16, String)> {
    let exchange = async {
        let stream = TcpStream::connect(addr).await?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(io::Error::other)?;
        let driver = tokio::spawn(connection);
        let request = Request::get(path)
            .header(header::HOST, addr.to_string())
            .header(header::CONNECTION, "close")
            .body(Empty::<Bytes>::new())
            .map_err(io::Error::other)?;
        let response = sender
            .send_request(request)
            .await
            .map_err(io::Error::other)?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(io::Error::other)?
            .to_bytes();
        driver.abort();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(bound, exchange)
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")))
}
