//! The gRPC face of `admission-http`'s service.
//!
//! This module owns [`AdmissionService`]: the middle's service speaking
//! gRPC, a [`NamedService`] when the service it wraps is one, so that
//! `add_service(layer.layer(service))` works, and the bypass that lets the
//! services of [`UNLEASED`] (health and reflection) through with no lease.
//! It must never admit, classify or refuse anything itself: the middle
//! does, for every adapter alike.

use std::sync::Arc;
use std::task::{Context, Poll};

use admission_http::{FailFast, GrpcRefusalStatus, grpc_path};
use tonic::server::NamedService;
use tower_service::Service;

/// The services whose calls take no lease by default: gRPC health checking
/// (`Check`, and `Watch`, whose streams live as long as their client) and
/// server reflection. Like `/healthz` over HTTP they are never refused, and
/// a `Watch` costs no capacity however long it stays open.
pub const UNLEASED: [&str; 3] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The bypass that lets the calls of `services` (whole names,
/// `package.Service`) through with no lease.
pub(crate) fn unleased(
    services: impl IntoIterator<Item = &'static str>,
) -> impl Fn(&http::request::Parts) -> bool + Send + Sync + 'static {
    let services: Arc<[&'static str]> = services.into_iter().collect();
    move |head| grpc_path(head.uri.path()).is_some_and(|(service, _)| services.contains(&service))
}

/// A service that runs each call under a request lease held until its
/// response stream has ended or been dropped, and refuses at once, with a
/// trailers-only response, when the call's class has no free slot (or,
/// after [`AdmissionLayer::queue`](crate::AdmissionLayer::queue), when its
/// wait in the queue runs out).
///
/// Made by [`AdmissionLayer`](crate::AdmissionLayer); every clone shares the
/// layer's pools. Responses are `Response<LeasedBody<B>>`
/// ([`body::LeasedBody`](crate::body::LeasedBody)) for any inner body `B`
/// carrying `Bytes`, so it serves under `Server::builder().layer(..)`,
/// around one service (`add_service(layer.layer(service))`: it is a
/// [`NamedService`] when the service it wraps is one), or in any tower
/// stack.
///
/// Inside the inner service's call and future the call's caller and lease
/// are the task's scope: pure work
/// ([`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure))
/// runs under the lease, every admission the handler makes is made for the
/// caller (its deadline is [`Caller::current`](admission_core::Caller::current)'s),
/// and a nested admission of the same class (a second layer) shares the
/// lease instead of taking a second slot.
///
/// The inner service gets the call with its request body under the same
/// progress bound ([`body::RequestBody`](crate::body::RequestBody)): a client that stops sending a message
/// it began ends its own call at the bound (`ADMISSION_STREAM_STALLED`)
/// instead of holding the lease for as long as it likes. tonic's routes
/// and generated servers take any body; a service written for one body
/// type takes `Request<RequestBody<B>>`.
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
#[derive(Debug, Clone)]
pub struct AdmissionService<S, M = FailFast> {
    inner: admission_http::AdmissionService<S, GrpcRefusalStatus, M>,
}

impl<S, M> AdmissionService<S, M> {
    pub(crate) fn new(inner: admission_http::AdmissionService<S, GrpcRefusalStatus, M>) -> Self {
        AdmissionService { inner }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        self.inner.get_ref()
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        self.inner.get_mut()
    }

    /// The wrapped service, consuming `self`.
    pub fn into_inner(self) -> S {
        self.inner.into_inner()
    }
}

impl<S: NamedService, M> NamedService for AdmissionService<S, M> {
    const NAME: &'static str = S::NAME;
}

impl<S, M, ReqBody> Service<http::Request<ReqBody>> for AdmissionService<S, M>
where
    admission_http::AdmissionService<S, GrpcRefusalStatus, M>: Service<http::Request<ReqBody>>,
{
    type Response = <admission_http::AdmissionService<S, GrpcRefusalStatus, M> as Service<
        http::Request<ReqBody>,
    >>::Response;
    type Error = <admission_http::AdmissionService<S, GrpcRefusalStatus, M> as Service<
        http::Request<ReqBody>,
    >>::Error;
    type Future = <admission_http::AdmissionService<S, GrpcRefusalStatus, M> as Service<
        http::Request<ReqBody>,
    >>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        self.inner.call(request)
    }
}
