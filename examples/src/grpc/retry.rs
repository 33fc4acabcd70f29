//! The registry's client with retries: `admission-client`'s layer under
//! tonic's client, because tonic's client has none (grpc/grpc-rust#1463).
//! The layer honours the server's `grpc-retry-pushback-ms`, stops on `-1`,
//! budgets its retries, never retries `DEADLINE_EXCEEDED`, and carries the
//! call's deadline as `grpc-timeout`.
//!
//! This module owns [`RetryingClient`]. It must never retry on its own:
//! every retry is the layer's.

use admission_client::{RetryLayer, RetryService};
use http::uri::PathAndQuery;
use tonic::client::Grpc as GrpcClient;
use tonic::transport::Channel;
use tonic::{IntoRequest, Response, Status};
use tonic_prost::ProstCodec;
use tower::Layer as _;

use super::proto::{Exposition, WALK, WalkRequest};

/// A `Registry` client over a [`Channel`] under a [`RetryLayer`].
///
/// # Examples
///
/// ```no_run
/// use admission_client::{Retries, RetryLayer, RetryPolicy};
/// use admission_examples::grpc::{RetryingClient, WalkRequest};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let channel = tonic::transport::Endpoint::from_static("http://127.0.0.1:50051").connect().await?;
/// let layer = RetryLayer::new(RetryPolicy::default())?;
/// let mut client = RetryingClient::new(channel, &layer);
/// let walked = client.walk(WalkRequest::default()).await?;
/// assert!(walked.get_ref().text.ends_with("# EOF\n"));
/// let retries = walked.extensions().get::<Retries>().map_or(0, |r| r.0.len());
/// println!("{retries} retries");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RetryingClient {
    inner: GrpcClient<RetryService<Channel>>,
}

impl RetryingClient {
    /// A client over `channel`, its calls under `layer`.
    pub fn new(channel: Channel, layer: &RetryLayer) -> RetryingClient {
        RetryingClient {
            inner: GrpcClient::new(layer.layer(channel)),
        }
    }

    /// Calls `Walk`, retried as the layer allows; an answer's extensions
    /// hold the [`Retries`](admission_client::Retries) it took.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future cancels the attempt under way (or the wait).
    pub async fn walk(
        &mut self,
        request: impl IntoRequest<WalkRequest>,
    ) -> Result<Response<Exposition>, Status> {
        self.inner
            .ready()
            .await
            .map_err(|_| Status::unavailable("the connection is not ready"))?;
        let codec = ProstCodec::<WalkRequest, Exposition>::default();
        let path = PathAndQuery::from_static(WALK);
        self.inner.unary(request.into_request(), path, codec).await
    }
}
