//! The service that takes a request lease before calling the inner service.
//!
//! This module owns [`ProtocolService`] (and its HTTP alias,
//! [`AdmissionService`]) and what its clones share: read
//! the caller, classify, admit (at once, or after a bounded wait in the
//! queue for a [`Queue`] service), answer a refusal in the protocol's form,
//! run the inner call and its future in one scope holding the caller and
//! the lease. It must never create pools, and never wait for a lease
//! unless it was built to queue.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use admission_core::{Caller, Class, Refusal};
use bytes::Bytes;
use http::{Request, Response};
use tower_service::Service;

use crate::admit::RequestAdmission;
use crate::body::{LeasedBody, ProgressTimeout, RequestBody};
use crate::classify::Classify;
use crate::future::ResponseFuture;
use crate::hooks::{Bypass, Bypassed, FlowOf, RefusalBody};
use crate::middle::{self, Admitting};
use crate::problem::HttpRefusalStatus;
use crate::protocol::Protocol;

/// The wait mode of a layer that refuses a request at once when its class
/// is full (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct FailFast;

/// The wait mode of a layer whose requests wait in the class pool's bounded
/// queue when their class is full ([`AdmissionLayer::queue`](crate::AdmissionLayer::queue)).
/// The inner service is called after the wait, so it must be `Clone`
/// (tower's pattern for a call made after an await).
#[derive(Debug, Clone, Copy, Default)]
pub struct Queue;

/// What every layer and service clone shares: the admission decision, the
/// classification and the protocol refusals are answered in.
#[derive(Clone)]
pub(crate) struct Shared<P> {
    pub(crate) admission: RequestAdmission,
    pub(crate) classify: Classify,
    pub(crate) protocol: P,
    /// How long an admitted response may let a frame lie unread.
    pub(crate) progress: ProgressTimeout,
    /// Requests that pass with no lease (health, reflection), if any.
    pub(crate) bypass: Option<Bypass>,
    /// The flow the app names for a request, if it names one.
    pub(crate) flow: Option<FlowOf>,
    /// The app's own refusal body, if any (HTTP only).
    pub(crate) refusal_body: Option<RefusalBody>,
}

impl<P> Shared<P> {
    /// Whether `request` passes with no lease, and the request: a layer
    /// over this one let it through, or the app's bypass does now (the
    /// request is then marked for the layers under this one).
    fn bypassed<B>(&self, request: Request<B>) -> (bool, Request<B>) {
        if request.extensions().get::<Bypassed>().is_some() {
            return (true, request);
        }
        let Some(bypass) = &self.bypass else {
            return (false, request);
        };
        let (mut parts, body) = request.into_parts();
        let passes = bypass.passes(&parts);
        if passes {
            parts.extensions.insert(Bypassed);
        }
        (passes, Request::from_parts(parts, body))
    }

    /// The caller a request's headers describe (its flow the app's, unless
    /// a trusted peer named one), its class, and the request given back
    /// whole.
    fn read<B>(&self, request: Request<B>) -> (Caller, Class, Request<B>) {
        let mut slot = Some(request);
        let (caller, class) = self.read_in_place(&mut slot);
        let Some(request) = slot else {
            unreachable!("read_in_place puts the request back")
        };
        (caller, class, request)
    }

    /// The caller and class of the request in `slot`, read where it lies
    /// (a request is a few hundred bytes: each move of it is a copy); only
    /// an app's flow or classifier, which take the head, move it out and
    /// back.
    fn read_in_place<B>(&self, slot: &mut Option<Request<B>>) -> (Caller, Class) {
        let caller = match &self.flow {
            None => {
                let Some(request) = slot.as_ref() else {
                    unreachable!("the request is in its slot until it is called")
                };
                self.admission.caller(header_pairs(request.headers()))
            }
            Some(flow) => {
                let Some(request) = slot.take() else {
                    unreachable!("the request is in its slot until it is called")
                };
                // Two moves, no allocation: the app's closure sees the head.
                let (parts, body) = request.into_parts();
                let caller = self
                    .admission
                    .caller_for(header_pairs(&parts.headers), |caller| {
                        flow.apply(&parts, caller)
                    });
                *slot = Some(Request::from_parts(parts, body));
                caller
            }
        };
        let Some(request) = slot.as_ref() else {
            unreachable!("the request is in its slot until it is called")
        };
        let class = match self.classify.class_in_place(request) {
            Some(class) => class,
            None => {
                let request = slot.take().expect("read above");
                let (class, request) = self.classify.class(request, &caller);
                *slot = Some(request);
                class
            }
        };
        (caller, class)
    }
}

/// A request's headers as (name, value) pairs, as the middle reads them.
fn header_pairs(headers: &http::HeaderMap) -> impl Iterator<Item = (&str, &[u8])> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
}

impl<P: Protocol> Shared<P> {
    /// The answer to `refusal` of `request`: the protocol's, with the app's
    /// body when it gave one.
    fn refuse<B>(&self, refusal: &Refusal, request: Request<B>) -> Response<Option<Bytes>> {
        self.refuse_in_place(refusal, &mut Some(request))
    }

    /// [`refuse`](Self::refuse), the request moved out of `slot` only when
    /// the app's body reads its head.
    fn refuse_in_place<B>(
        &self,
        refusal: &Refusal,
        slot: &mut Option<Request<B>>,
    ) -> Response<Option<Bytes>> {
        let response = self.protocol.refusal(refusal);
        match (&self.refusal_body, slot.is_some()) {
            (Some(body), true) => {
                let head = slot.take().map(|request| request.into_parts().0);
                body.apply(refusal, &head.expect("matched above"), response)
            }
            _ => response,
        }
    }
}

impl<P: fmt::Debug> fmt::Debug for Shared<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("pools", self.admission.pools())
            .field("queue", &self.admission.queues())
            .field("trust", &self.admission.trust())
            .field("classify", &self.classify)
            .field("refusal_status", &self.protocol)
            .field("bypass", &self.bypass)
            .field("flow", &self.flow)
            .field("refusal_body", &self.refusal_body)
            .finish()
    }
}

/// The service an HTTP [`AdmissionLayer`](crate::AdmissionLayer) makes:
/// [`ProtocolService`] answering refusals over HTTP.
///
/// # Examples
///
/// ```
/// use admission_core::RequestPools;
/// use admission_http::{AdmissionLayer, AdmissionService};
/// use http::{Request, Response};
/// use tower::{Layer, service_fn};
///
/// let pools = RequestPools::new(1, 1).unwrap();
/// let service: AdmissionService<_> = AdmissionLayer::new(pools).layer(service_fn(|_req: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::new()))
/// }));
/// # let _ = service;
/// ```
pub type AdmissionService<S, M = FailFast> = ProtocolService<S, HttpRefusalStatus, M>;

/// A service that runs each request under a request lease held until its
/// response body has been sent or dropped, and answers a refused request at
/// once, in its protocol's form (`P`: [`HttpRefusalStatus`](crate::HttpRefusalStatus)
/// or [`GrpcRefusalStatus`](crate::GrpcRefusalStatus)).
///
/// Made by [`AdmissionLayer`](crate::AdmissionLayer); every clone shares the
/// layer's pools. Responses are `Response<LeasedBody<B>>` for any inner body
/// `B` carrying `Bytes`, so it serves any tower or hyper stack: axum,
/// tonic, or a bare `hyper` server.
///
/// Inside the inner service's call and future the request's caller and
/// lease are the task's scope (one task-local): pure work
/// ([`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure))
/// runs under the lease, every admission the handler makes is made for the
/// caller, and a nested admission of the same class (a second layer,
/// `#[admitted]`) shares the lease instead of taking a second slot.
///
/// The inner service gets each request with its body as a
/// [`RequestBody`]: under a lease, the body is held to the same progress
/// bound as the response, so a client that stops sending a body it began
/// (headers and a byte, never the rest) ends its own request at the bound
/// (`ADMISSION_STREAM_STALLED`) instead of keeping the lease as long as it
/// likes; a request that passes with no lease gets its body untimed.
/// axum's routes and tonic's servers take any body; a service written for
/// one body type takes `Request<RequestBody<B>>`.
///
/// [`poll_ready`](Service::poll_ready) is the inner service's; a refused
/// request does not call the inner service. A [`FailFast`] service asks
/// nothing of the inner service; a [`Queue`] service needs it `Clone`.
///
/// # Examples
///
/// ```
/// use admission_core::{Class, RequestPools};
/// use admission_http::AdmissionLayer;
/// use http::{Request, Response, StatusCode};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pools = RequestPools::new(1, 1).unwrap();
/// let service = AdmissionLayer::new(pools.clone()).layer(service_fn(|_req: Request<_>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(String::from("hello")))
/// }));
///
/// let response = service.oneshot(Request::new(())).await.unwrap();
/// assert_eq!(response.status(), StatusCode::OK);
/// assert_eq!(pools.pool(Class::Control).stats().in_use, 1, "the body still holds the lease");
/// drop(response);
/// assert_eq!(pools.pool(Class::Control).stats().in_use, 0);
/// # }
/// ```
pub struct ProtocolService<S, P, M = FailFast> {
    inner: S,
    shared: Arc<Shared<P>>,
    mode: PhantomData<fn() -> M>,
}

impl<S, P, M> ProtocolService<S, P, M> {
    pub(crate) fn new(inner: S, shared: Arc<Shared<P>>) -> Self {
        ProtocolService {
            inner,
            shared,
            mode: PhantomData,
        }
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

impl<S: Clone, P, M> Clone for ProtocolService<S, P, M> {
    fn clone(&self) -> Self {
        ProtocolService::new(self.inner.clone(), Arc::clone(&self.shared))
    }
}

impl<S: fmt::Debug, P: fmt::Debug, M> fmt::Debug for ProtocolService<S, P, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProtocolService")
            .field("inner", &self.inner)
            .field("shared", &self.shared)
            .finish()
    }
}

impl<S, P, ReqBody, ResBody> Service<Request<ReqBody>> for ProtocolService<S, P, FailFast>
where
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    P: Protocol,
{
    type Response = Response<LeasedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let progress = self.shared.progress;
        if self.shared.bypass.is_some() || request.extensions().get::<Bypassed>().is_some() {
            let (passes, request) = self.shared.bypassed(request);
            if passes {
                let passed = Admitting::passed(self.inner.call(request.map(RequestBody::passed)));
                return ResponseFuture::new(passed, progress);
            }
            return self.admit(Some(request));
        }
        self.admit(Some(request))
    }
}

impl<S, P: Protocol> ProtocolService<S, P, FailFast> {
    /// The request in `slot` admitted at once or refused. The request stays
    /// in its slot, read by reference, until the inner service is called
    /// with it (or the refusal's answer is made): the closures that carry
    /// it into the lease's scope hold a reference, not the request.
    #[inline]
    fn admit<ReqBody, ResBody>(
        &mut self,
        mut slot: Option<Request<ReqBody>>,
    ) -> ResponseFuture<S::Future>
    where
        S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>,
    {
        let shared = &*self.shared;
        let progress = shared.progress;
        let (caller, class) = shared.read_in_place(&mut slot);
        let admitting = match shared.admission.try_lease(class, caller) {
            Ok(lease) => {
                let inner = &mut self.inner;
                Admitting::admitted(lease, caller, || {
                    let request = slot.take().expect("called once");
                    inner.call(request.map(|body| RequestBody::new(body, progress)))
                })
            }
            Err(refusal) => Admitting::refused(shared.refuse_in_place(&refusal, &mut slot)),
        };
        ResponseFuture::new(admitting, progress)
    }
}

impl<S, P, ReqBody, ResBody> Service<Request<ReqBody>> for ProtocolService<S, P, Queue>
where
    S: Service<Request<RequestBody<ReqBody>>, Response = Response<ResBody>>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    P: Protocol,
    ReqBody: Send + 'static,
{
    type Response = Response<LeasedBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> ResponseFuture<S::Future> {
        let (passes, request) = self.shared.bypassed(request);
        let progress = self.shared.progress;
        if passes {
            return ResponseFuture::new(
                Admitting::passed(self.inner.call(request.map(RequestBody::passed))),
                progress,
            );
        }
        let (caller, class, request) = self.shared.read(request);
        // The service that was made ready goes with the request; this one
        // keeps a clone for the next (tower's pattern for a call made after
        // an await).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = Arc::clone(&self.shared);
        let wait = middle::wait(
            self.shared.admission.clone(),
            class,
            caller,
            request,
            move |request: Request<ReqBody>| {
                inner.call(request.map(|body| RequestBody::new(body, progress)))
            },
            move |refusal, request| shared.refuse(refusal, request),
        );
        ResponseFuture::new(Admitting::queued(Box::pin(wait)), progress)
    }
}
