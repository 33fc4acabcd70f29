//! The per-worker service that admits each request.
//!
//! This module owns [`AdmissionMiddleware`] and the settings every worker's
//! middleware shares ([`Settings`]): whether a request passes with no
//! lease (the app's bypass), its caller and class, and the refusal's answer
//! (the middle's problem, or the app's page). It hands the rest to
//! `admission-http`'s shared step ([`Admitting`]): the decision, the queued
//! wait, the inner call under the lease. It must never decide an admission
//! itself, never wait for a lease unless configured to queue, and never
//! create pools.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

use actix_web::Error;
use actix_web::HttpMessage as _;
use actix_web::HttpResponse;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, forward_ready};
use actix_web::http::StatusCode;
use actix_web::http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use admission_core::{Caller, Code, Criticality, Refusal};
use admission_http::body::ProgressTimeout;
use admission_http::middle::{self, Admitting};
use admission_http::{HttpRefusalStatus, Problem, RequestAdmission};
use bytes::Bytes;

use crate::body::LeasedBody;
use crate::classify::Classify;
use crate::future::ResponseFuture;
use crate::rejection::problem_parts;
use crate::request_body::bounded;

/// The app's predicate for requests that pass with no lease.
pub(crate) type BypassFn = dyn Fn(&ServiceRequest) -> bool + Send + Sync;

/// The app's flow for a request: the caller read from its headers, given
/// the flow (and weight) the app names, if any.
pub(crate) type FlowFn = dyn Fn(&ServiceRequest, Caller) -> Caller + Send + Sync;

/// The app's own body for a refusal, where it gives one.
pub(crate) type RefusalBodyFn =
    dyn Fn(&Refusal, &ServiceRequest) -> Option<(HeaderValue, Bytes)> + Send + Sync;

/// The mark a request let through carries, so that the admission
/// middleware under this one (a scope's) lets it through as well.
#[derive(Debug, Clone, Copy)]
struct Bypassed;

/// What [`AdmissionControl`](crate::AdmissionControl) and every worker's
/// middleware share.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) admission: RequestAdmission,
    pub(crate) classify: Classify,
    pub(crate) status: HttpRefusalStatus,
    pub(crate) progress: ProgressTimeout,
    pub(crate) bypass: Option<Arc<BypassFn>>,
    pub(crate) flow: Option<Arc<FlowFn>>,
    pub(crate) refusal_body: Option<Arc<RefusalBodyFn>>,
}

impl Settings {
    /// Whether `req` passes with no lease: a middleware over this one let
    /// it through, or the app's bypass does now (and marks it).
    fn bypassed(&self, req: &ServiceRequest) -> bool {
        if req.extensions().contains::<Bypassed>() {
            return true;
        }
        let passes = self.bypass.as_ref().is_some_and(|bypass| bypass(req));
        if passes {
            req.extensions_mut().insert(Bypassed);
        }
        passes
    }

    /// The answer to `refusal` of `req`: the middle's problem, with the
    /// app's body when it gave one (status and hints stay the middle's).
    fn refuse(&self, refusal: &Refusal, req: ServiceRequest) -> ServiceResponse<Bytes> {
        let mut response = answer(refusal, self.status);
        if let Some((content_type, body)) = self
            .refusal_body
            .as_ref()
            .and_then(|page| page(refusal, &req))
        {
            response.headers_mut().insert(CONTENT_TYPE, content_type);
            response = response.set_body(body);
        }
        req.into_response(response)
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("admission", &self.admission)
            .field("classify", &self.classify)
            .field("status", &self.status)
            .field("progress", &self.progress)
            .field("bypass", &self.bypass.is_some())
            .field("flow", &self.flow.is_some())
            .field("refusal_body", &self.refusal_body.is_some())
            .finish()
    }
}

/// The service [`AdmissionControl`](crate::AdmissionControl) wraps around
/// the app's inner service, one per actix-web worker thread; every worker's
/// middleware shares the same pools.
///
/// The inner service is called under the request's lease: pure work
/// ([`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure))
/// runs under it, and a nested admission of the same class (a scope's
/// `.wrap`, `#[admitted]`) shares it instead of taking a second slot.
///
/// # Examples
///
/// ```
/// use actix_web::dev::Transform;
/// use actix_web::{HttpResponse, test};
/// use actix_web::dev::Service;
/// use admission_actix::AdmissionControl;
/// use admission_core::RequestPools;
///
/// # #[actix_web::main]
/// # async fn main() {
/// let inner = |req: actix_web::dev::ServiceRequest| async move {
///     Ok::<_, actix_web::Error>(req.into_response(HttpResponse::Ok().finish()))
/// };
/// let inner = actix_web::dev::fn_service(inner);
/// let middleware = AdmissionControl::new(RequestPools::new(1, 1).unwrap())
///     .new_transform(inner)
///     .await
///     .unwrap();
/// let res = middleware.call(test::TestRequest::get().to_srv_request()).await.unwrap();
/// assert_eq!(res.status(), 200);
/// # }
/// ```
#[doc(hidden)]
pub struct AdmissionMiddleware<S> {
    // An `Rc` so that a queued request's future can call the inner service
    // after its wait without borrowing `self`.
    service: Rc<S>,
    settings: Arc<Settings>,
}

impl<S> AdmissionMiddleware<S> {
    pub(crate) fn new(service: Rc<S>, settings: Arc<Settings>) -> Self {
        AdmissionMiddleware { service, settings }
    }
}

impl<S> fmt::Debug for AdmissionMiddleware<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionMiddleware")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<ServiceRequest> for AdmissionMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error> + 'static,
    S::Future: 'static,
    B: MessageBody,
{
    type Response = ServiceResponse<LeasedBody<B>>;
    type Error = Error;
    type Future = ResponseFuture<S, B>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let settings = &self.settings;
        let progress = settings.progress;
        if settings.bypassed(&req) {
            return ResponseFuture::new(Admitting::passed(self.service.call(req)), progress);
        }
        // The middle reads the caller, and decides whose word on the flow
        // counts, for every adapter alike.
        let caller = match &settings.flow {
            None => settings.admission.caller(header_pairs(&req)),
            Some(flow) => settings
                .admission
                .caller_for(header_pairs(&req), |caller| flow(&req, caller)),
        };
        let class = settings.classify.class(&req);
        if settings.admission.queues() {
            let service = Rc::clone(&self.service);
            let refusing = Arc::clone(settings);
            let wait = middle::wait(
                settings.admission.clone(),
                class,
                caller,
                req,
                move |req| service.call(bounded(req, progress)),
                move |refusal, req| refusing.refuse(refusal, req),
            );
            return ResponseFuture::new(Admitting::queued(Box::pin(wait)), progress);
        }
        let admitting = match settings.admission.try_lease(class, caller) {
            Ok(lease) => {
                Admitting::admitted(lease, caller, || self.service.call(bounded(req, progress)))
            }
            Err(refusal) => Admitting::refused(settings.refuse(&refusal, req)),
        };
        ResponseFuture::new(admitting, progress)
    }
}

/// Everything a refusal's answer is written from (the answer is a function
/// of these alone): the configured status, the code, the refused caller's
/// criticality, the retry hint and the pool's name.
type Facts = (HttpRefusalStatus, Code, Criticality, u32, &'static str);

/// An answer as kept: its status, its headers in order, its body.
type KeptAnswer = (Facts, StatusCode, Vec<(HeaderName, HeaderValue)>, Bytes);

/// How many answers a worker keeps: the few refusals a server sends under
/// one overload (a class or two, a hint or two).
const KEPT: usize = 4;

thread_local! {
    /// The answers this worker thread wrote last, the oldest replaced
    /// first: a refused request under a sustained overload clones its
    /// answer (its static header texts stay static; numbers and body
    /// share their bytes) instead of writing the problem document again.
    static ANSWERS: RefCell<(Vec<KeptAnswer>, usize)> = const { RefCell::new((Vec::new(), 0)) };
}

/// The answer to `refusal` under `status`: the problem document as every
/// adapter writes it ([`Problem`]), made an actix-web response.
fn answer(refusal: &Refusal, status: HttpRefusalStatus) -> HttpResponse<Bytes> {
    let facts = (
        status,
        refusal.code(),
        refusal.criticality(),
        refusal.retry_after_millis(),
        refusal.pool(),
    );
    ANSWERS.with_borrow_mut(|(kept, next)| {
        let at = match kept.iter().position(|(seen, ..)| *seen == facts) {
            Some(at) => at,
            None => {
                let (status, headers, body) = problem_parts(Problem::refusal(refusal, status));
                let entry = (facts, status, headers, body);
                if kept.len() < KEPT {
                    kept.push(entry);
                    kept.len() - 1
                } else {
                    let at = *next;
                    kept[at] = entry;
                    *next = (at + 1) % KEPT;
                    at
                }
            }
        };
        let (_, status, headers, body) = &kept[at];
        let mut response = HttpResponse::with_body(*status, body.clone());
        let map = response.headers_mut();
        for (name, value) in headers {
            map.append(name.clone(), value.clone());
        }
        response
    })
}

pub(crate) fn header_pairs(req: &ServiceRequest) -> impl Iterator<Item = (&str, &[u8])> {
    req.headers()
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
}
