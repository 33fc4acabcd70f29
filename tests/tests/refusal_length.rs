//! A layer's refusal as real clients read it off the wire: the answer
//! carries its own `content-length` (kept with the answer, so that axum
//! does not add one per refusal), and that length must be the bytes sent
//! over HTTP/2 (where a mismatch is a stream error) and the bytes a `GET`
//! would get for a `HEAD` (which gets none, so the next answer on the
//! connection starts right after its head).

use std::net::SocketAddr;
use std::time::Duration;

use admission_axum::AdmissionLayer;
use admission_core::{Class, Lease, RequestPools};
use axum::{Router, routing::get};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const WAIT: Duration = Duration::from_secs(5);

/// The app's own refusal page, for [`full_app`]'s `/page/`.
const PAGE: &[u8] = b"<h1>We are busy</h1>";

/// An axum app under the layer whose *control* class (`GET`, `HEAD`) is
/// full: every request to it is refused, with the problem document, or
/// with the app's own [`PAGE`] under `/page/`.
async fn full_app() -> (SocketAddr, Lease) {
    let pools = RequestPools::new(1, 1).expect("valid pools");
    let held = pools.try_lease(Class::Control).expect("the slot is free");
    let layer = AdmissionLayer::new(pools).refusal_body(|_refusal, head| {
        head.uri.path().starts_with("/page/").then(|| {
            (
                http::HeaderValue::from_static("text/html"),
                Bytes::from_static(PAGE),
            )
        })
    });
    let app = Router::new()
        .route("/", get(|| async { "served" }))
        .route("/page/", get(|| async { "served" }))
        .layer(layer);
    let tcp = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = tcp.local_addr().expect("address");
    let server = admission_axum::serve(tcp, app);
    tokio::spawn(std::future::IntoFuture::into_future(server));
    (addr, held)
}

/// The value of the one `content-length` in `head`, failing if there are
/// none or several.
fn length(head: &str) -> usize {
    let mut lengths = head.lines().filter_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse::<usize>().expect("a number"))
    });
    let length = lengths.next().expect("a content-length");
    assert!(lengths.next().is_none(), "one content-length: {head:?}");
    length
}

/// The body of a refusal of `path` read over HTTP/2, checked against the
/// one `content-length` it announced (a mismatch is a stream error).
async fn refused_over_http2(addr: SocketAddr, path: &str) -> Bytes {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut send, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("an HTTP/2 handshake with prior knowledge");
    tokio::spawn(connection);
    let request = http::Request::get(format!("http://{addr}{path}"))
        .body(Empty::<Bytes>::new())
        .expect("a request");
    let response = tokio::time::timeout(WAIT, send.send_request(request))
        .await
        .expect("answered")
        .expect("a response");
    assert_eq!(response.status(), 503);
    let lengths = response.headers().get_all("content-length");
    assert_eq!(lengths.iter().count(), 1, "one content-length");
    let announced: usize = lengths
        .iter()
        .next()
        .and_then(|value| value.to_str().ok()?.parse().ok())
        .expect("a numeric content-length");
    let body = tokio::time::timeout(WAIT, response.into_body().collect())
        .await
        .expect("the body ends")
        .expect("no stream error: the length matches the data sent")
        .to_bytes();
    assert_eq!(body.len(), announced);
    body
}

#[tokio::test]
async fn an_http2_client_reads_exactly_the_refusal_its_length_announces() {
    let (addr, _held) = full_app().await;
    let body = refused_over_http2(addr, "/").await;
    assert!(
        body.starts_with(b"{\"code\":\"ADMISSION_SATURATED\""),
        "the problem document: {body:?}"
    );
}

#[tokio::test]
async fn the_apps_own_page_over_http2_announces_its_own_length() {
    let (addr, _held) = full_app().await;
    assert_eq!(refused_over_http2(addr, "/page/").await, PAGE);
}

#[tokio::test]
async fn a_refused_head_announces_the_gets_length_and_sends_no_body() {
    let (addr, _held) = full_app().await;
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    // Pipelined: if the HEAD's answer carried a body, the GET's answer
    // would not start right after the HEAD's head.
    stream
        .write_all(
            b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await
        .expect("write");
    let mut wire = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut wire))
        .await
        .expect("both answered and closed")
        .expect("read");
    let wire = String::from_utf8(wire).expect("ASCII answers");

    let (head_answer, get_answer) = wire
        .split_once("\r\n\r\n")
        .expect("the HEAD's answer has a head");
    assert!(head_answer.starts_with("HTTP/1.1 503 "), "{head_answer:?}");
    assert!(
        get_answer.starts_with("HTTP/1.1 503 "),
        "the GET's answer follows the HEAD's head at once (no body in between): {get_answer:?}"
    );
    let (get_head, get_body) = get_answer
        .split_once("\r\n\r\n")
        .expect("the GET's answer has a head");
    assert_eq!(
        length(get_head),
        get_body.len(),
        "the GET's length is its body's"
    );
    assert_eq!(
        length(head_answer),
        get_body.len(),
        "the HEAD announces what the GET gets"
    );
}
