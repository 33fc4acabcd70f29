//! The middleware that runs each request for the caller its headers
//! describe, for apps that admit work on their own pools (no request
//! lease).
//!
//! This module owns [`CallerScope`] and [`CallerScopeMiddleware`], the
//! actix-web form of `admission-http`'s `CallerLayer`. They must never
//! admit, refuse or hold anything: they read the criticality and budget
//! headers under the same trust policy as every adapter's and scope the
//! caller, so that every `Pool::run` in the handler is admitted at that
//! criticality and within that deadline.
//! [`AdmissionControl`](crate::AdmissionControl) does the same for the
//! requests it admits; wrap this one where there is no lease.

use std::future::{Ready, ready};

use actix_web::dev::{Service, ServiceRequest, Transform, forward_ready};
use admission_core::request::Scoped;
use admission_http::CallerLayer;

/// Runs each request for the caller its headers describe:
/// `x-admission-criticality` and the shortest of `x-admission-budget-ms`,
/// `x-envoy-expected-rq-timeout-ms` and `grpc-timeout`, read as every
/// adapter reads them (nobody's headers raise their own priority or lengthen
/// their own wait, unless [`trust_peers`](Self::trust_peers)).
///
/// # Examples
///
/// ```
/// use actix_web::{App, HttpResponse, test, web};
/// use admission_actix::CallerScope;
/// use admission_core::Caller;
///
/// # #[actix_web::main]
/// # async fn main() {
/// let level = || async { HttpResponse::Ok().body(Caller::current().criticality().as_str()) };
/// let app = test::init_service(App::new().wrap(CallerScope::new()).route("/", web::get().to(level))).await;
/// let request = test::TestRequest::get().uri("/").insert_header(("x-admission-criticality", "sheddable"));
/// assert_eq!(test::call_and_read_body(&app, request.to_request()).await, "sheddable");
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a middleware does nothing until it is passed to `.wrap(...)`"]
pub struct CallerScope {
    layer: CallerLayer,
}

impl CallerScope {
    /// A middleware reading the standard headers, trusting nobody.
    pub fn new() -> CallerScope {
        CallerScope::default()
    }

    /// Honours the criticality and budget headers as sent, as
    /// [`AdmissionControl::trust_peers`](crate::AdmissionControl::trust_peers)
    /// does.
    pub fn trust_peers(self) -> CallerScope {
        CallerScope {
            layer: self.layer.trust_peers(),
        }
    }

    /// How many requests came with a malformed or repeated budget header;
    /// each was served as if it had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::CallerScope;
    ///
    /// assert_eq!(CallerScope::new().malformed_headers(), 0);
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.layer.malformed_headers()
    }

    /// How many requests claimed `critical` and were served as `default`,
    /// or named their own `x-admission-flow` and were not heard.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_actix::CallerScope;
    ///
    /// assert_eq!(CallerScope::new().lowered_claims(), 0);
    /// ```
    pub fn lowered_claims(&self) -> u64 {
        self.layer.lowered_claims()
    }
}

impl<S> Transform<S, ServiceRequest> for CallerScope
where
    S: Service<ServiceRequest>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Transform = CallerScopeMiddleware<S>;
    type InitError = ();
    type Future = Ready<Result<CallerScopeMiddleware<S>, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(CallerScopeMiddleware {
            service,
            layer: self.layer.clone(),
        }))
    }
}

/// The service [`CallerScope`] wraps around the app's, one per worker.
#[derive(Debug)]
#[doc(hidden)]
pub struct CallerScopeMiddleware<S> {
    service: S,
    layer: CallerLayer,
}

impl<S> Service<ServiceRequest> for CallerScopeMiddleware<S>
where
    S: Service<ServiceRequest>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Scoped<S::Future>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let caller = self.layer.caller(crate::middleware::header_pairs(&req));
        let future = caller.scope_sync(|| self.service.call(req));
        caller.scope(future)
    }
}
