//! The service that takes a request lease before calling the inner service.
//!
//! This module owns [`AdmissionService`]: classify, fail fast, answer a
//! refusal with core's problem, run the inner call and its future under the
//! lease. It must never wait for a lease and never create pools.

use std::sync::Arc;
use std::task::{Context, Poll};

use admission_core::Admission;
use admission_core::http::Problem;
use http::{Request, Response};
use tower_service::Service;

use crate::body::LeasedBody;
use crate::future::ResponseFuture;
use crate::layer::Shared;
use crate::rejection::problem_response;

/// A service that runs each request under a request lease held until its
/// response body has been sent or dropped, and refuses at once, with the
/// layer's refusal answer, when the request's class has no free slot.
///
/// Made by [`AdmissionLayer`](crate::AdmissionLayer); every clone shares the
/// layer's pools. Responses are `Response<LeasedBody<B>>` for any inner body
/// `B` carrying `Bytes`, so it serves any tower stack, not only axum.
///
/// Inside the inner service's call and future the lease is the task's
/// context: pure work
/// ([`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure))
/// runs under it, and a nested admission of the same class (a second layer,
/// `#[admitted]`) shares it instead of taking a second slot.
///
/// [`poll_ready`](Service::poll_ready) is the inner service's; a refused
/// request does not call the inner service.
///
/// # Examples
///
/// ```
/// use admission_axum::AdmissionLayer;
/// use admission_core::{Class, RequestPools};
/// use axum::{body::Body, http::{Request, Response, StatusCode}};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pools = RequestPools::new(1, 1).unwrap();
/// let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: Request<Body>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(Body::from("hello")))
/// }));
///
/// let response = service.clone().oneshot(Request::new(Body::empty())).await.unwrap();
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!(pools.pool(Class::Control).stats().in_use, 1, "the body still holds the lease");
/// drop(response);
/// assert_eq!(pools.pool(Class::Control).stats().in_use, 0);
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

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for AdmissionService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    ReqBody: Send + 'static,
{
    type Response = Response<LeasedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let caller = self.shared.caller(request.headers());
        let (class, request) = self.shared.classify.class(request);
        if self.shared.queue {
            // The service that was made ready goes with the request; this
            // one keeps a clone for the next (tower's pattern for a call
            // made after an await).
            let clone = self.inner.clone();
            let mut inner = std::mem::replace(&mut self.inner, clone);
            let (pools, status) = (self.shared.pools.clone(), self.shared.status);
            return ResponseFuture::queued(Box::pin(async move {
                match caller
                    .scope(pools.lease_with(class, Admission::Queue))
                    .await
                {
                    Ok(lease) => {
                        let future = caller.scope_sync(|| lease.scope_sync(|| inner.call(request)));
                        Ok((caller.scope(lease.clone().scope(future)), lease))
                    }
                    Err(refusal) => Err(problem_response(
                        Problem::refusal(&refusal, status),
                        |bytes| bytes,
                    )),
                }
            }));
        }
        match caller.scope_sync(|| self.shared.pools.try_lease(class)) {
            Ok(lease) => {
                // The inner call runs under the lease and for the caller
                // too: a layer below that admits in `call` shares the lease,
                // and work the handler runs is admitted for this caller.
                let future = caller.scope_sync(|| lease.scope_sync(|| self.inner.call(request)));
                ResponseFuture::admitted(caller.scope(lease.clone().scope(future)), lease)
            }
            Err(refusal) => {
                tracing::debug!(
                    pool = refusal.pool(),
                    code = refusal.code().as_str(),
                    criticality = refusal.criticality().as_str(),
                    "request refused"
                );
                let problem = Problem::refusal(&refusal, self.shared.status);
                ResponseFuture::refused(problem_response(problem, |bytes| bytes))
            }
        }
    }
}
