//! The `admission.example.v1.Registry` service, written by hand: the
//! messages (prost's derive, no `.proto` compiler at build time), the
//! server's routing and the client's calls, as `tonic-prost-build` would
//! generate them from `registry.proto` beside this file.
//!
//! This module owns the wire: method paths, messages and codecs. It must
//! never decide what a call does; [`App`](super::service::App) does.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::uri::PathAndQuery;
use tonic::body::Body;
use tonic::client::Grpc as GrpcClient;
use tonic::codec::Streaming;
use tonic::server::{Grpc as GrpcServer, NamedService};
use tonic::transport::Channel;
use tonic::{IntoRequest, Request, Response, Status};
use tonic_prost::ProstCodec;
use tower::service_fn;

use super::service::App;

/// The service's fully qualified name.
pub const SERVICE: &str = "admission.example.v1.Registry";
/// The path of the unary `Walk` method.
pub const WALK: &str = "/admission.example.v1.Registry/Walk";
/// The path of the server-streaming `Stream` method.
pub const STREAM: &str = "/admission.example.v1.Registry/Stream";

/// `WalkRequest`: what a caller asks of a walk.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct WalkRequest {
    /// For `Stream`: lines of exposition text per message (0: 1000).
    #[prost(uint32, tag = "1")]
    pub lines_per_message: u32,
}

/// `Exposition`: exposition text of the registry, whole (`Walk`) or one
/// part of it (`Stream`).
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Exposition {
    /// Prometheus exposition text.
    #[prost(string, tag = "1")]
    pub text: String,
    /// Sample lines in the whole walk this text comes from.
    #[prost(uint64, tag = "2")]
    pub series: u64,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = Result<T, Infallible>> + Send>>;

/// The server side: routes `Walk` and `Stream` to the [`App`], anything
/// else `UNIMPLEMENTED`, as a generated `RegistryServer` does.
#[derive(Debug, Clone)]
pub struct RegistryServer {
    app: Arc<App>,
}

impl RegistryServer {
    pub(crate) fn new(app: Arc<App>) -> RegistryServer {
        RegistryServer { app }
    }
}

impl NamedService for RegistryServer {
    const NAME: &'static str = SERVICE;
}

impl<B> tower::Service<http::Request<B>> for RegistryServer
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
        let app = Arc::clone(&self.app);
        match request.uri().path() {
            WALK => Box::pin(async move {
                let walk = service_fn(move |call: Request<WalkRequest>| {
                    let app = Arc::clone(&app);
                    async move { app.walk(call).await }
                });
                let mut grpc = GrpcServer::new(ProstCodec::<Exposition, WalkRequest>::default());
                Ok(grpc.unary(walk, request).await)
            }),
            STREAM => Box::pin(async move {
                let stream = service_fn(move |call: Request<WalkRequest>| {
                    let app = Arc::clone(&app);
                    async move { app.stream(call).await }
                });
                let mut grpc = GrpcServer::new(ProstCodec::<Exposition, WalkRequest>::default());
                Ok(grpc.server_streaming(stream, request).await)
            }),
            _ => Box::pin(async { Ok(Status::unimplemented("").into_http()) }),
        }
    }
}

/// The client side, as a generated `RegistryClient`: a real tonic client
/// over a [`Channel`].
///
/// # Examples
///
/// ```no_run
/// use admission_examples::grpc::{RegistryClient, WalkRequest};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let mut client = RegistryClient::connect("http://127.0.0.1:50051").await?;
/// let exposition = client.walk(WalkRequest::default()).await?.into_inner();
/// assert!(exposition.text.ends_with("# EOF\n"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RegistryClient {
    inner: GrpcClient<Channel>,
}

impl RegistryClient {
    /// A client over `channel`.
    pub fn new(channel: Channel) -> RegistryClient {
        RegistryClient {
            inner: GrpcClient::new(channel),
        }
    }

    /// A client on a connection of its own to `uri` (`http://HOST:PORT`).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future drops the connection attempt.
    ///
    /// # Errors
    ///
    /// A transport error when the URI is invalid or the server cannot be
    /// reached.
    pub async fn connect(
        uri: impl Into<String>,
    ) -> Result<RegistryClient, tonic::transport::Error> {
        let channel = tonic::transport::Endpoint::from_shared(uri.into())?
            .connect()
            .await?;
        Ok(RegistryClient::new(channel))
    }

    /// Calls `Walk`: the whole registry as exposition text.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the call (`RST_STREAM`); a walk the
    /// server started goes on, holding its slot, until it ends.
    ///
    /// # Errors
    ///
    /// The call's status: `UNAVAILABLE` with `grpc-retry-pushback-ms` when
    /// admission refused it.
    pub async fn walk(
        &mut self,
        request: impl IntoRequest<WalkRequest>,
    ) -> Result<Response<Exposition>, Status> {
        self.ready().await?;
        let codec = ProstCodec::<WalkRequest, Exposition>::default();
        let path = PathAndQuery::from_static(WALK);
        self.inner.unary(request.into_request(), path, codec).await
    }

    /// Calls `Stream`: the registry's exposition text in parts, one message
    /// each.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future or the stream cancels the call.
    ///
    /// # Errors
    ///
    /// As [`walk`](Self::walk), for the call; each message may carry its own.
    pub async fn stream(
        &mut self,
        request: impl IntoRequest<WalkRequest>,
    ) -> Result<Response<Streaming<Exposition>>, Status> {
        self.ready().await?;
        let codec = ProstCodec::<WalkRequest, Exposition>::default();
        let path = PathAndQuery::from_static(STREAM);
        self.inner
            .server_streaming(request.into_request(), path, codec)
            .await
    }

    async fn ready(&mut self) -> Result<(), Status> {
        self.inner
            .ready()
            .await
            .map_err(|_| Status::unavailable("the connection is not ready"))
    }
}
