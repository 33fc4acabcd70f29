//! The service that takes a request lease before calling the inner service.
//!
//! This module owns [`AdmissionService`]: read the deadline, classify, fail
//! fast, answer a refusal with a trailers-only response, run the inner call
//! and its future under the lease. It must never wait for a lease and never
//! create pools.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use tonic::server::NamedService;
use tower_service::Service;

use admission_core::http::RequestCaller;

use crate::body::LeasedBody;
use crate::classify::Call;
use crate::deadline::{Deadline, Timeout};
use crate::future::ResponseFuture;
use crate::layer::Shared;
use crate::rejection::refusal_status;

/// A service that runs each call under a request lease held until its
/// response stream has ended or been dropped, and refuses at once, with a
/// trailers-only response, when the call's class has no free slot.
///
/// Made by [`AdmissionLayer`](crate::AdmissionLayer); every clone shares the
/// layer's pools. Responses are `Response<LeasedBody<B>>` for any inner body
/// `B` carrying `Bytes`, so it serves under `Server::builder().layer(..)`,
/// around one service (`add_service(layer.layer(service))`: it is a
/// [`NamedService`] when the service it wraps is one), or in any tower
/// stack.
///
/// Inside the inner service's call and future the lease is the task's
/// context: pure work
/// ([`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure))
/// runs under it, and a nested admission of the same class (a second
/// layer) shares it instead of taking a second slot.
///
/// The caller's [`Deadline`] (from a well-formed `grpc-timeout`) is
/// inserted into the request's extensions before the inner call.
/// [`poll_ready`](Service::poll_ready) is the inner service's; a refused
/// call does not call the inner service.
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
/// let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: http::Request<()>| async {
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
pub struct AdmissionService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> AdmissionService<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        AdmissionService { inner, shared }
    }

    /// The wrapped service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The wrapped service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The wrapped service, consuming `self`.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: NamedService> NamedService for AdmissionService<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for AdmissionService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Response = Response<LeasedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let deadline = match Timeout::of(request.headers()) {
            Timeout::Absent => None,
            Timeout::Budget(budget) => Deadline::new(budget, Instant::now()),
            Timeout::Malformed => {
                self.shared.count_malformed_timeout();
                tracing::debug!(class = "MalformedTimeout", "`grpc-timeout` ignored");
                None
            }
        };
        let call = Call::new(request.uri().path(), request.headers(), deadline);
        let class = self.shared.classify.class(&call);
        // The caller: its criticality header and the shortest of its
        // budgets (`grpc-timeout` among them) as the deadline, so that the
        // lease and the work the handler runs are admitted for it.
        let caller = RequestCaller::from_headers(
            request
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
        )
        .caller;
        match caller.scope_sync(|| self.shared.pools.try_lease(class)) {
            Ok(lease) => {
                if let Some(deadline) = deadline {
                    request.extensions_mut().insert(deadline);
                }
                // The inner call runs under the lease and for the caller
                // too: a layer below that admits in `call` shares the lease.
                let future = caller.scope_sync(|| lease.scope_sync(|| self.inner.call(request)));
                ResponseFuture::admitted(caller.scope(lease.clone().scope(future)), lease)
            }
            Err(refusal) => {
                tracing::debug!(
                    pool = refusal.pool(),
                    code = refusal.code().as_str(),
                    "call refused"
                );
                let status = refusal_status(&refusal, self.shared.status);
                ResponseFuture::refused(status.into_http())
            }
        }
    }
}
