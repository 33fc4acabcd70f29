//! The per-worker service that admits each request.
//!
//! This module owns [`AdmissionMiddleware`]: read the caller, classify,
//! ask `admission-http`'s [`RequestAdmission`] for the lease (the decision
//! every adapter makes alike), answer a refusal with the middle's problem,
//! and call the inner service under the lease. It must never decide an
//! admission itself, never wait for a lease unless configured to queue, and
//! never create pools.

use std::rc::Rc;

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, forward_ready};
use admission_http::body::ProgressTimeout;
use admission_http::{HttpRefusalStatus, Problem, RequestAdmission};

use crate::body::LeasedBody;
use crate::classify::Classify;
use crate::future::ResponseFuture;
use crate::rejection::actix_response;

/// The service [`AdmissionControl`](crate::AdmissionControl) wraps around
/// the app's inner service, one per actix-web worker thread; every worker's
/// middleware shares the same pools.
///
/// The inner service is called on the response future's first poll, under
/// the request's lease: pure work
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
pub struct AdmissionMiddleware<S> {
    // An `Rc` so that the response future can call the inner service under
    // the request's lease, on its first poll, without borrowing `self`.
    service: Rc<S>,
    admission: RequestAdmission,
    classify: Classify,
    status: HttpRefusalStatus,
    progress: ProgressTimeout,
}

impl<S> AdmissionMiddleware<S> {
    pub(crate) fn new(
        service: Rc<S>,
        admission: RequestAdmission,
        classify: Classify,
        status: HttpRefusalStatus,
        progress: ProgressTimeout,
    ) -> Self {
        AdmissionMiddleware {
            service,
            admission,
            classify,
            status,
            progress,
        }
    }
}

impl<S> std::fmt::Debug for AdmissionMiddleware<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionMiddleware")
            .field("admission", &self.admission)
            .field("classify", &self.classify)
            .field("status", &self.status)
            .field("progress", &self.progress)
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<ServiceRequest> for AdmissionMiddleware<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = Error>,
    B: MessageBody,
{
    type Response = ServiceResponse<LeasedBody<B>>;
    type Error = Error;
    type Future = ResponseFuture<S, B>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let caller = self.admission.caller(header_pairs(&req));
        let class = self.classify.class(&req);
        if self.admission.queues() {
            let admission = self.admission.clone();
            let lease = Box::pin(async move { admission.lease(class, caller).await });
            return ResponseFuture::queued(
                Rc::clone(&self.service),
                req,
                lease,
                caller,
                self.status,
                self.progress,
            );
        }
        match self.admission.try_lease(class, caller) {
            Ok(lease) => ResponseFuture::admitted(
                Rc::clone(&self.service),
                req,
                lease,
                caller,
                self.progress,
            ),
            Err(refusal) => {
                let problem = Problem::refusal(&refusal, self.status);
                ResponseFuture::refused(req.into_response(actix_response(problem.into_http(|b| b))))
            }
        }
    }
}

/// A request's headers as the (name, value) pairs a caller is read from.
pub(crate) fn header_pairs(req: &ServiceRequest) -> impl Iterator<Item = (&str, &[u8])> {
    req.headers()
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_bytes()))
}
