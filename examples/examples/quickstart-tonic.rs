//! The tonic quickstart: a gRPC method whose blocking work runs behind
//! admission.
//!
//! `cargo run --example quickstart-tonic` serves `quickstart.v1.Walks/Walk`
//! and gRPC health on 127.0.0.1:50051. Every call holds a *work* slot until
//! its response is sent; the walk itself runs on the `registry` pool's own
//! threads. When either is full the call ends at once with `UNAVAILABLE`
//! and `grpc-retry-pushback-ms`; health checks take no slot and are never
//! refused.
//!
//! The messages and the server's routing are written by hand here (no
//! `.proto` compiler); in an app, `tonic-prost-build` generates them.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use admission_core::{Admission, Pool, RequestPools, Shutdown};
use admission_tonic::connections::{self, ConnectionLimits};
use admission_tonic::{AdmissionLayer, Rejection};
use tonic::server::{Grpc, NamedService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

/// `WalkRequest {}`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WalkRequest {}

/// `Exposition { string text = 1; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Exposition {
    /// The registry as exposition text.
    #[prost(string, tag = "1")]
    pub(crate) text: String,
}

/// The `Walk` method's path.
pub(crate) const WALK: &str = "/quickstart.v1.Walks/Walk";

/// The `quickstart.v1.Walks` service, as tonic would generate its server.
#[derive(Debug, Clone)]
pub(crate) struct Walks {
    registry: Pool,
}

impl Walks {
    /// A walk of the registry: blocking work, on the registry's threads; a
    /// refusal becomes `UNAVAILABLE` with its pushback.
    async fn walk(&self, _: Request<WalkRequest>) -> Result<Response<Exposition>, Status> {
        let walk = || Ok::<_, std::fmt::Error>("# TYPE up gauge\nup 1\n# EOF\n".to_owned());
        let text = self
            .registry
            .run(walk, Admission::FailFast)
            .await
            .map_err(Rejection::from)?;
        Ok(Response::new(Exposition { text }))
    }
}

impl NamedService for Walks {
    const NAME: &'static str = "quickstart.v1.Walks";
}

impl<B> tower::Service<http::Request<B>> for Walks
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let walks = self.clone();
        if request.uri().path() != WALK {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        Box::pin(async move {
            let method = tower::service_fn(move |call| {
                let walks = walks.clone();
                async move { walks.walk(call).await }
            });
            let mut grpc = Grpc::new(ProstCodec::<Exposition, WalkRequest>::default());
            Ok(grpc.unary(method, request).await)
        })
    }
}

/// The server under admission: every call leases from *work*, but health;
/// connections are bounded too (a slow or silent client is evicted).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    requests: RequestPools,
    registry: Pool,
    stop: impl Future<Output = ()> + Send,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (_, health) = tonic_health::server::health_reporter();
    let incoming = connections::incoming(listener, ConnectionLimits::new())?;
    tonic::transport::Server::builder()
        .layer(AdmissionLayer::new(requests)) // health takes no lease
        .add_service(health)
        .add_service(Walks { registry })
        .serve_with_incoming_shutdown(incoming, stop)
        .await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // 4 work and 8 control slots; 2 walks at once.
    let requests = RequestPools::new(4, 8)?;
    let registry = Pool::new("registry", 2)?;
    let shutdown = Shutdown::default();
    shutdown.register(&requests);
    shutdown.register(&registry);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:50051").await?;
    println!("listening on http://{}", listener.local_addr()?);
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve(listener, requests, registry, stop).await?;
    // Every pool drained (or cut at the deadline, 30 s by default).
    let report = shutdown.shutdown().await;
    println!(
        "stopped in {:?}: every pool drained: {}",
        report.elapsed,
        report.drained()
    );
    Ok(())
}
