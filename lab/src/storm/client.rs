//! The storm's own HTTP client: hyper 1 over a `TcpStream`, HTTP/1.1 with
//! keep-alive, one connection per scraper.
//!
//! This module owns [`Target`] and the scraper loop. A scraper that gives up
//! drops its connection (the server sees the client go away) and opens a new
//! one for its next request. Every wait is bounded by the end of the phase.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until, timeout_at};

use super::{Phase, Tally};

/// Where the scrapers send `GET` requests: a plain `http://` URL.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::Target;
///
/// let target: Target = "http://127.0.0.1:9464/metrics".parse().unwrap();
/// assert_eq!(target.to_string(), "http://127.0.0.1:9464/metrics");
/// assert!("https://example.invalid/".parse::<Target>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    host: String,
    port: u16,
    authority: String,
    path: String,
}

/// A `--url` the storm cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadUrl(String);

impl fmt::Display for BadUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` is not an http://host[:port][/path] URL", self.0)
    }
}

impl std::error::Error for BadUrl {}

impl FromStr for Target {
    type Err = BadUrl;

    fn from_str(url: &str) -> Result<Target, BadUrl> {
        let bad = || BadUrl(url.to_owned());
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !authority.ends_with(']') => {
                (host, port.parse().map_err(|_| bad())?)
            }
            _ => (authority, 80),
        };
        if host.is_empty() {
            return Err(bad());
        }
        let target = Target {
            host: host.trim_matches(['[', ']']).to_owned(),
            port,
            authority: authority.to_owned(),
            path: path.to_owned(),
        };
        target.request().map_err(|_| bad())?;
        Ok(target)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.authority, self.path)
    }
}

impl Target {
    /// `path` on a local address.
    pub fn local(addr: SocketAddr, path: &str) -> Target {
        Target {
            host: addr.ip().to_string(),
            port: addr.port(),
            authority: addr.to_string(),
            path: path.to_owned(),
        }
    }

    /// A `GET` of this target's path, with its `Host`; `extra` headers
    /// (static names, values the caller built) follow.
    pub(super) fn request_with(
        &self,
        extra: &[(&'static str, &str)],
    ) -> Result<Request<Empty<Bytes>>, hyper::http::Error> {
        let mut request =
            Request::get(self.path.as_str()).header(header::HOST, self.authority.as_str());
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        request.body(Empty::new())
    }

    fn request(&self) -> Result<Request<Empty<Bytes>>, hyper::http::Error> {
        self.request_with(&[])
    }
}

/// One open connection; dropping it closes the socket.
pub(super) struct Conn {
    sender: SendRequest<Empty<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Conn {
    pub(super) async fn open(target: &Target) -> std::io::Result<Conn> {
        let stream = TcpStream::connect((target.host.as_str(), target.port)).await?;
        stream.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        let driver = tokio::spawn(async move {
            // The connection ends when the sender is dropped or the peer
            // closes; either is the end of this scraper's connection.
            let _ = connection.await;
        });
        Ok(Conn { sender, driver })
    }

    /// One `GET`, to the end of its body.
    async fn get(&mut self, target: &Target) -> Result<StatusCode, hyper::Error> {
        let request = target
            .request()
            .expect("the request was built once when the target was parsed");
        self.send(request).await
    }

    /// Sends `request` and reads its answer to the end of the body.
    pub(super) async fn send(
        &mut self,
        request: Request<Empty<Bytes>>,
    ) -> Result<StatusCode, hyper::Error> {
        self.sender.ready().await?;
        let response = self.sender.send_request(request).await?;
        let status = response.status();
        response.into_body().collect().await?;
        Ok(status)
    }
}

/// How one scraper behaves.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scraper {
    pub(crate) phase: Phase,
    pub(crate) end: Instant,
    pub(crate) refused_pause: Duration,
    pub(crate) max_requests: u64,
}

impl Scraper {
    /// Scrapes `target` until the phase ends or the request bound is hit.
    pub(crate) async fn run(self, target: &Target) -> Tally {
        let mut tally = Tally::default();
        let mut conn: Option<Conn> = None;
        while Instant::now() < self.end && tally.requests() < self.max_requests {
            let open = match conn.as_mut() {
                Some(open) => open,
                None => match timeout_at(self.end, Conn::open(target)).await {
                    Ok(Ok(open)) => conn.insert(open),
                    Ok(Err(_)) => {
                        tally.errors += 1;
                        self.pause(Duration::from_millis(10)).await;
                        continue;
                    }
                    Err(_end) => break,
                },
            };
            let started = Instant::now();
            let give_up = match self.phase {
                Phase::Patient => self.end,
                Phase::GiveUp(after) => (started + after).min(self.end),
            };
            match timeout_at(give_up, open.get(target)).await {
                Ok(Ok(StatusCode::OK)) => tally.ok.push(started.elapsed()),
                Ok(Ok(StatusCode::SERVICE_UNAVAILABLE)) => {
                    tally.refused.push(started.elapsed());
                    self.pause(self.refused_pause).await;
                }
                Ok(Ok(_other)) => tally.errors += 1,
                Ok(Err(_)) => {
                    tally.errors += 1;
                    conn = None;
                }
                Err(_gave_up) => {
                    tally.gave_up += 1;
                    // Closing the connection is how the server learns that
                    // nobody waits for this answer any more.
                    conn = None;
                }
            }
        }
        tally
    }

    async fn pause(&self, pause: Duration) {
        if !pause.is_zero() {
            sleep_until((Instant::now() + pause).min(self.end)).await;
        }
    }
}
