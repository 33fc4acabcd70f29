//! The per-worker service that admits each request.
//!
//! This module owns [`AdmissionMiddleware`]: classify, fail fast, answer a
//! refusal with core's problem, and call the inner service under the lease.
//! It must never wait for a lease and never create pools.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use actix_web::Error;
use actix_web::body::MessageBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, forward_ready};
use admission_core::http::{Problem, RefusalStatus, RequestCaller};
use admission_core::{Admission, RequestPools};

use crate::body::LeasedBody;
use crate::classify::Classify;
use crate::future::ResponseFuture;
use crate::rejection::problem_response;

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
    pools: RequestPools,
    classify: Classify,
    status: RefusalStatus,
    malformed: Arc<AtomicU64>,
    /// Wait in the class pool's queue instead of failing fast.
    queue: bool,
}

impl<S> AdmissionMiddleware<S> {
    pub(crate) fn new(
        service: Rc<S>,
        pools: RequestPools,
        classify: Classify,
        status: RefusalStatus,
        malformed: Arc<AtomicU64>,
        queue: bool,
    ) -> Self {
        AdmissionMiddleware {
            service,
            pools,
            classify,
            status,
            malformed,
            queue,
        }
    }
}

impl<S> std::fmt::Debug for AdmissionMiddleware<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionMiddleware")
            .field("pools", &self.pools)
            .field("classify", &self.classify)
            .field("status", &self.status)
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
        let class = self.classify.class(&req);
        let read = RequestCaller::from_headers(
            req.headers()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
        );
        if read.malformed {
            self.malformed.fetch_add(1, Ordering::Relaxed);
        }
        let caller = read.caller;
        if self.queue {
            let pools = self.pools.clone();
            let lease = Box::pin(
                caller.scope(async move { pools.lease_with(class, Admission::Queue).await }),
            );
            return ResponseFuture::queued(
                Rc::clone(&self.service),
                req,
                lease,
                caller,
                self.status,
            );
        }
        match caller.scope_sync(|| self.pools.try_lease(class)) {
            Ok(lease) => ResponseFuture::admitted(Rc::clone(&self.service), req, lease, caller),
            Err(refusal) => {
                tracing::debug!(
                    pool = refusal.pool(),
                    code = refusal.code().as_str(),
                    criticality = refusal.criticality().as_str(),
                    "request refused"
                );
                let problem = Problem::refusal(&refusal, self.status);
                ResponseFuture::refused(req.into_response(problem_response(problem, |b| b)))
            }
        }
    }
}
