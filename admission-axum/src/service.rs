//! The service that takes a request lease before calling the inner service.
//!
//! This module owns [`AdmissionControl`]: classify, fail fast, answer a
//! refusal with core's [`Problem`], run the inner future under the lease.
//! It must never wait for a lease and never create pools.

use std::sync::Arc;
use std::task::{Context, Poll};

use admission_core::Problem;
use axum::BoxError;
use axum::body::Body;
use axum::response::IntoResponse;
use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::future::ResponseFuture;
use crate::layer::Shared;

/// A service that runs each request under a request lease held until its
/// response body has been sent or dropped, and refuses at once, with the
/// pools' refusal answer, when the request's class has no free slot.
///
/// Made by [`AdmissionLayer`](crate::AdmissionLayer); every clone shares the
/// layer's pools.
///
/// Responses are `Response<axum::body::Body>`: an admitted response's body is
/// wrapped so that it keeps a share of the lease until it reports its end,
/// fails, or is dropped (a client that goes away mid-stream releases it).
/// Inside the inner service's future the lease is the task's context, so
/// [`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure)
/// runs under it and takes no second slot.
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
pub struct AdmissionControl<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> AdmissionControl<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        AdmissionControl { inner, shared }
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

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for AdmissionControl<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: http_body::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let (class, request) = self.shared.classifier.classify(request);
        match self.shared.pools.try_lease(class) {
            Ok(lease) => {
                let future = lease.clone().scope(self.inner.call(request));
                ResponseFuture::admitted(future, lease)
            }
            Err(refusal) => {
                tracing::debug!(
                    class = class.as_str(),
                    code = refusal.code().as_str(),
                    "request refused"
                );
                ResponseFuture::refused(Problem::refusal(&refusal).into_response())
            }
        }
    }
}
