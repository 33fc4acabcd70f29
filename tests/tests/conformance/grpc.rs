//! The suite's routes as a gRPC service, and a real tonic client for them.
//!
//! `admission.conformance.Routes` has one method per route (`/metrics` is
//! `Metrics`, `/` is `Index`), written by hand as tonic's generated code
//! would be (messages with prost's derive, `tonic::server::Grpc` and
//! `tonic::client::Grpc`), so nothing is generated at build time. Every
//! method takes an empty `Ask` and answers a stream of `Text` messages: one
//! for a walk, one per fed chunk for a streamed route. A unary answer and a
//! one-message stream are the same bytes on the wire, so the client reads
//! every method as a server-streaming call and concatenates the messages.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use admission_core::{Admission, Caller};
use admission_tonic::Rejection;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::codec::Streaming;
use tonic::metadata::MetadataValue;
use tonic::server::NamedService;
use tonic::transport::{Channel, Endpoint as Connect};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;
use tower::service_fn;

use crate::client::{Headers, within};
use crate::endpoints::{Endpoint, Fed, READ, WALK, Watch};

/// The service's fully qualified name.
const SERVICE: &str = "admission.conformance.Routes";

/// The (empty) request of every method.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub(crate) struct Ask {}

/// One message of an answer: a walk's text, or one fed chunk.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub(crate) struct Text {
    #[prost(bytes = "bytes", tag = "1")]
    pub(crate) data: Bytes,
}

/// The method a route is served as: `/metrics` → `Metrics`, `/` → `Index`.
pub(crate) fn method(route: &str) -> String {
    let name = route.trim_start_matches('/');
    let name = if name.is_empty() { "index" } else { name };
    let mut chars = name.chars();
    chars
        .next()
        .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The request path of route `route`.
pub(crate) fn path(route: &str) -> String {
    format!("/{SERVICE}/{}", method(route))
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;
type Messages = Pin<Box<dyn futures_util::Stream<Item = Result<Text, Status>> + Send>>;

/// The routes as one gRPC service.
#[derive(Clone)]
pub(crate) struct Routes(Arc<HashMap<String, Endpoint>>);

impl Routes {
    pub(crate) fn new(routes: impl IntoIterator<Item = (&'static str, Endpoint)>) -> Routes {
        let methods = routes
            .into_iter()
            .map(|(route, endpoint)| (method(route), endpoint))
            .collect();
        Routes(Arc::new(methods))
    }
}

impl NamedService for Routes {
    const NAME: &'static str = SERVICE;
}

impl<B> tower::Service<http::Request<B>> for Routes
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.uri().path().rsplit('/').next().unwrap_or_default();
        let Some(endpoint) = self.0.get(method).cloned() else {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        };
        Box::pin(async move {
            let answer = service_fn(move |_ask: Request<Ask>| answer(endpoint.clone()));
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Text, Ask>::default());
            Ok(grpc.server_streaming(answer, request).await)
        })
    }
}

/// One endpoint's answer, as a tonic handler gives it: registry errors go
/// out through `Rejection` and `?`.
async fn answer(endpoint: Endpoint) -> Result<Response<Messages>, Status> {
    let one =
        |data: Bytes| -> Messages { Box::pin(futures_util::stream::iter([Ok(Text { data })])) };
    match endpoint {
        Endpoint::Registry {
            pool, walk, watch, ..
        } => {
            let mut watch = Watch::new(watch);
            let text = pool.run(walk, Admission::FailFast).await;
            watch.complete();
            let text = text.map_err(Rejection::from)?;
            Ok(Response::new(one(Bytes::from(text))))
        }
        Endpoint::Coalesced { scrapes, walk } => {
            let text = scrapes.run(WALK, walk, Admission::FailFast).await;
            let text = text.map_err(Rejection::from)?;
            Ok(Response::new(one(Bytes::from(text))))
        }
        Endpoint::Stream(feeds) => {
            let chunks = Fed::new(&feeds).map(|data| Ok(Text { data }));
            Ok(Response::new(Box::pin(chunks)))
        }
        Endpoint::Gated(gate) => {
            gate.pass().await;
            Ok(Response::new(one(Bytes::from_static(b"done"))))
        }
        Endpoint::Criticality => {
            let level = Caller::current().criticality().as_str();
            Ok(Response::new(one(Bytes::from_static(level.as_bytes()))))
        }
        Endpoint::Deep(pool) => {
            let text =
                crate::endpoints::deep(&pool).map_err(|error| Rejection::from_error(&error))?;
            Ok(Response::new(one(Bytes::from_static(text.as_bytes()))))
        }
        Endpoint::Upload => Ok(Response::new(one(Bytes::from_static(READ.as_bytes())))),
    }
}

/// A client on a connection of its own to `addr`.
async fn connect(addr: SocketAddr) -> tonic::client::Grpc<Channel> {
    let endpoint = Connect::from_shared(format!("http://{addr}")).expect("a valid URI");
    let channel = within("a connection", endpoint.connect())
        .await
        .expect("the server accepts");
    tonic::client::Grpc::new(channel)
}

/// Calls `route` on a fresh connection and returns its head: the stream of
/// messages, or the status a trailers-only answer carried.
/// `metadata` goes with the call, as an HTTP client's headers would.
pub(crate) async fn open(
    addr: SocketAddr,
    route: &str,
    metadata: Headers,
) -> Result<Streaming<Text>, Status> {
    let mut client = connect(addr).await;
    client.ready().await.expect("the connection is ready");
    let path = PathAndQuery::try_from(path(route)).expect("a valid path");
    let codec = ProstCodec::<Ask, Text>::default();
    let mut request = Request::new(Ask {});
    for (name, value) in metadata {
        let value = MetadataValue::from_static(value);
        request.metadata_mut().insert(*name, value);
    }
    client
        .server_streaming(request, path, codec)
        .await
        .map(Response::into_inner)
}

/// Calls `route` on a fresh connection and reads the answer to its end:
/// every message's bytes, or the call's status.
pub(crate) async fn call(
    addr: SocketAddr,
    route: &str,
    metadata: Headers,
) -> Result<Bytes, Status> {
    let mut messages = open(addr, route, metadata).await?;
    let mut body = BytesMut::new();
    while let Some(text) = messages.message().await? {
        body.extend_from_slice(&text.data);
    }
    Ok(body.freeze())
}

/// Opens a call of `route` over a real HTTP/2 client (hyper's) that sends
/// HEADERS and one byte of a 10-byte message, then nothing: a client that
/// stopped sending, keeping its stream and connection open until the
/// returned task is aborted.
pub(crate) async fn stall(addr: SocketAddr, route: &str) -> tokio::task::JoinHandle<()> {
    let stream = within("a connection", tokio::net::TcpStream::connect(addr))
        .await
        .expect("the server accepts");
    let (mut send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .expect("an HTTP/2 connection");
    // A gRPC message frame: not compressed, 10 bytes long; one byte sent.
    let part = Bytes::from_static(&[0, 0, 0, 0, 10, b'x']);
    let frames = futures_util::stream::iter([Ok::<_, Infallible>(http_body::Frame::data(part))])
        .chain(futures_util::stream::pending());
    let request = http::Request::post(format!("http://{addr}{}", path(route)))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(http_body_util::StreamBody::new(frames))
        .expect("a valid request");
    tokio::spawn(async move {
        let call = send.send_request(request);
        // The connection is driven beside the call; the answer, if the
        // server gives one, is read and dropped.
        let _ = futures_util::future::join(connection, call).await;
        std::future::pending::<()>().await;
    })
}

/// Sends `GET path` (a gRPC call of `path` with an empty message, when
/// `grpc`) over a real HTTP/2 client (hyper's) whose streams' initial
/// window is 0: the server can send the head, never a byte of the body.
/// Returns once the head has come, with the task holding the stream and
/// its connection open until it is aborted.
pub(crate) async fn shut_window(
    addr: SocketAddr,
    path: String,
    grpc: bool,
) -> tokio::task::JoinHandle<()> {
    let stream = within("a connection", tokio::net::TcpStream::connect(addr))
        .await
        .expect("the server accepts");
    let (mut send, connection) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("an HTTP/2 connection");
    let request = if grpc {
        http::Request::post(format!("http://{addr}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(http_body_util::Full::new(Bytes::from_static(&[
                0, 0, 0, 0, 0,
            ])))
    } else {
        http::Request::get(format!("http://{addr}{path}"))
            .body(http_body_util::Full::new(Bytes::new()))
    }
    .expect("a valid request");
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let connection = tokio::spawn(connection);
        let response = send.send_request(request).await;
        // The head, never read past: the body's stream stays shut.
        let _ = head_tx.send(
            response
                .as_ref()
                .map(http::Response::status)
                .map_err(ToString::to_string),
        );
        let _held = (response, send);
        let _ = connection.await;
        std::future::pending::<()>().await;
    });
    let status = within("the answer's head", head_rx)
        .await
        .expect("the client task reports")
        .expect("the server answers");
    assert_eq!(status, http::StatusCode::OK, "admitted");
    task
}
