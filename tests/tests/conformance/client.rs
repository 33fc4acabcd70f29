//! The HTTP client side: reqwest over real sockets, one connection per
//! client, a raw socket for a client that hangs up, and bounded waits. The
//! gRPC client is in `grpc`.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The bound on every wait: generous, since it only matters when a test is
/// about to fail.
pub(crate) const PATIENCE: Duration = Duration::from_secs(10);

/// Awaits `future`, failing the test if it takes longer than [`PATIENCE`].
pub(crate) async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// Polls `condition` until it holds, for at most [`PATIENCE`]. Only for
/// state nothing can signal: a pool's counters after a server released a
/// slot on one of its own threads.
pub(crate) async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    within(what, async {
        while !condition() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
}

/// A client with no idle connections: each request opens its own.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .expect("reqwest client")
}

/// A whole answer, as the adapter's protocol gives it.
#[derive(Debug)]
pub(crate) enum Reply {
    /// An HTTP answer (axum, actix-web).
    Http(Answer),
    /// A gRPC answer (tonic): every message's bytes, or the call's status.
    Grpc(Result<Bytes, tonic::Status>),
}

impl Reply {
    /// The HTTP answer; the case runs over HTTP only.
    pub(crate) fn http(&self) -> &Answer {
        match self {
            Reply::Http(answer) => answer,
            Reply::Grpc(_) => panic!("an HTTP answer was expected"),
        }
    }
}

/// A whole HTTP answer: status, headers and body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

impl Answer {
    /// The value of header `name`, which must be there once.
    pub(crate) fn header(&self, name: &str) -> &str {
        let mut values = self.headers.get_all(name).iter();
        let value = values
            .next()
            .unwrap_or_else(|| panic!("`{name}` is sent"))
            .to_str()
            .expect("header values are ASCII");
        assert!(values.next().is_none(), "`{name}` is sent once");
        value
    }

    /// The body as text.
    pub(crate) fn text(&self) -> &str {
        std::str::from_utf8(&self.body).expect("the body is UTF-8")
    }

    /// The body as a problem document.
    pub(crate) fn problem(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("the body is a JSON problem")
    }
}

/// Header (over gRPC, metadata) names and values a request carries.
pub(crate) type Headers = &'static [(&'static str, &'static str)];

/// `GET url` on a fresh connection, read to its end.
pub(crate) async fn get(url: &str) -> Answer {
    get_with(url, &[]).await
}

/// [`get`], sending `headers`.
pub(crate) async fn get_with(url: &str, headers: Headers) -> Answer {
    within(&format!("an answer from {url}"), async {
        let request = headers
            .iter()
            .fold(client().get(url), |request, (name, value)| {
                request.header(*name, *value)
            });
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.expect("the whole body");
        Answer {
            status,
            headers,
            body,
        }
    })
    .await
}

/// [`get`] in a task of its own, for a request the test holds.
#[allow(
    dead_code,
    reason = "the hostile suite's; conformance spawns through its server"
)]
pub(crate) fn spawn_get(url: String) -> JoinHandle<Answer> {
    tokio::spawn(async move { get(&url).await })
}

/// The answer of a request spawned with [`spawn_get`].
#[allow(
    dead_code,
    reason = "the hostile suite's; conformance spawns through its server"
)]
pub(crate) async fn answer(request: JoinHandle<Answer>) -> Answer {
    within("a held request to be answered", request)
        .await
        .expect("the request task did not panic")
}

/// The reply of a request spawned with `Server::spawn_get`.
pub(crate) async fn reply(request: JoinHandle<Reply>) -> Reply {
    within("a held request to be answered", request)
        .await
        .expect("the request task did not panic")
}

/// Sends `GET path` on a raw connection and leaves it open: dropping the
/// returned stream closes the socket, a client hanging up mid-request.
/// reqwest would also close its connection when its request is dropped,
/// but through its pool's bookkeeping; a raw socket makes the hang-up the
/// test's own act.
pub(crate) async fn hang_up_later(addr: SocketAddr, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the request");
    stream.flush().await.expect("flush the request");
    stream
}

/// Sends the head of `GET path` declaring a 10-byte body, and one byte of
/// it: a client that stopped sending. Dropping the returned stream closes
/// the socket.
pub(crate) async fn stall_body(addr: SocketAddr, path: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 10\r\n\r\nx");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("send the head and one byte");
    stream.flush().await.expect("flush the request");
    stream
}
