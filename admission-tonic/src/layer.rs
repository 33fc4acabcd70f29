//! The gRPC layer and service: `admission-http`'s, speaking gRPC.
//!
//! This module names them for tonic servers and says what they do for a
//! call. It must never add behaviour of its own: the layer, its
//! constructors and its settings are `admission-http`'s
//! ([`ProtocolLayer`]), the same for every adapter, and a layer around one
//! service keeps the service's name through tonic's own
//! `tonic::service::LayerExt::named_layer`.

use admission_http::{FailFast, GrpcRefusalStatus, ProtocolLayer, ProtocolService};

/// A tower [`Layer`](tower_layer::Layer) for tonic servers
/// (`Server::builder().layer(AdmissionLayer::new(pools))`) that makes every
/// call hold a request lease until its response stream has ended (a
/// server-streaming call to its last message and trailers), and refuses a
/// call whose class has no free slot with a trailers-only response:
/// `UNAVAILABLE` (or `RESOURCE_EXHAUSTED`, see
/// [`refusal_status`](admission_http::ProtocolLayer::refusal_status)), a
/// message naming the stable code and the pool, and
/// `grpc-retry-pushback-ms` from the pool's retry hint.
///
/// The layer holds the [`RequestPools`](admission_core::RequestPools) it
/// was given and nothing else: tonic clones the layered service for every
/// connection, and every clone draws on the same slots. Build the pools
/// once at startup; a configuration error surfaces there
/// ([`RequestPools::new`](admission_core::RequestPools::new) returns a
/// `Result`), never on a call.
///
/// It fails fast unless told to
/// [`queue`](admission_http::ProtocolLayer::queue). The call is admitted
/// for its caller: the criticality its `x-admission-criticality` metadata
/// names and the shortest of its `grpc-timeout`, `x-admission-budget-ms`
/// and `x-envoy-expected-rq-timeout-ms` as its deadline, read under the
/// same trust policy as every adapter's (nobody raises their own priority
/// or lengthens their own wait unless
/// [`trust_peers`](admission_http::ProtocolLayer::trust_peers)); a call
/// whose deadline cannot cover the pool's typical work is refused at once
/// with `DEADLINE_EXCEEDED`. Malformed budgets are ignored and counted
/// ([`malformed_headers`](admission_http::ProtocolLayer::malformed_headers)).
///
/// Health checks and server reflection ([`UNLEASED`](crate::UNLEASED)) take
/// no lease and are never refused: a `Watch` stream, which lives as long as
/// its client, costs no capacity
/// ([`unleased`](admission_http::ProtocolLayer::unleased) names other
/// services, or none). A leased response whose reader lets a message lie
/// unread for the
/// [`progress_timeout`](admission_http::ProtocolLayer::progress_timeout)
/// (30 s by default) loses its lease at that moment and ends.
///
/// # Examples
///
/// ```no_run
/// use admission_core::RequestPools;
/// use admission_tonic::AdmissionLayer;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pools = RequestPools::new(2, 4)?;
/// let (_reporter, health) = tonic_health::server::health_reporter();
/// tonic::transport::Server::builder()
///     .layer(AdmissionLayer::new(pools)) // health: no lease; every other call → work
///     .add_service(health)
///     .serve("127.0.0.1:50051".parse()?)
///     .await?;
/// # Ok(())
/// # }
/// ```
///
/// Around one service (a class of its own for it), tonic's
/// `named_layer` keeps the service's name for `add_service`:
///
/// ```
/// use admission_core::{Class, RequestPools};
/// use admission_tonic::AdmissionLayer;
/// use tonic::service::LayerExt as _;
///
/// let pools = RequestPools::new(2, 4).unwrap();
/// let (_reporter, health) = tonic_health::server::health_reporter();
/// let router = tonic::transport::Server::builder()
///     .add_service(AdmissionLayer::class(pools, Class::Control).unleased([]).named_layer(health));
/// # let _ = router;
/// ```
pub type AdmissionLayer<M = FailFast> = ProtocolLayer<GrpcRefusalStatus, M>;

/// The service an [`AdmissionLayer`] makes: each call runs under a request
/// lease held until its response stream has ended or been dropped, and is
/// refused at once, with a trailers-only response, when its class has no
/// free slot (or, after [`queue`](admission_http::ProtocolLayer::queue),
/// when its wait in the queue runs out).
///
/// Responses are `Response<LeasedBody<B>>`
/// ([`body::LeasedBody`](crate::body::LeasedBody)) for any inner body `B`
/// carrying `Bytes`, so it serves under `Server::builder().layer(..)`,
/// around one service (`add_service(layer.named_layer(service))`), or in
/// any tower stack. Inside the inner service's call and future the call's
/// caller and lease are the task's scope, as for every adapter
/// ([`ProtocolService`]).
///
/// # Examples
///
/// ```
/// use admission_core::{Class, RequestPools};
/// use admission_tonic::AdmissionLayer;
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pools = RequestPools::new(1, 1).unwrap();
/// let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: http::Request<_>| async {
///     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("a message")))
/// }));
///
/// let call = http::Request::post("/registry.v1.Registry/Walk").body(()).unwrap();
/// let response = service.oneshot(call).await.unwrap();
/// assert_eq!(pools.pool(Class::Work).stats().in_use, 1, "the stream still holds the lease");
/// drop(response);
/// assert_eq!(pools.pool(Class::Work).stats().in_use, 0);
/// # }
/// ```
pub type AdmissionService<S, M = FailFast> = ProtocolService<S, GrpcRefusalStatus, M>;
