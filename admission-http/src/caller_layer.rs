//! The layer that runs each request for the caller its headers describe,
//! for apps that admit work on their own pools (no request lease).
//!
//! This module owns [`CallerLayer`] and [`CallerService`]. It must never
//! admit, refuse or hold anything: it only reads the criticality and budget
//! headers under the layer's trust policy (as
//! [`RequestAdmission::caller`](crate::RequestAdmission::caller) does)
//! and scopes the caller, so that every `Pool::run` in the handler is
//! admitted at that criticality and within that deadline.
//! [`AdmissionLayer`](crate::AdmissionLayer) does the same for the requests
//! it admits; stack this one where there is no lease.

use std::task::{Context, Poll};

use admission_core::request::Scoped;
use http::Request;
use tower_layer::Layer;
use tower_service::Service;

use crate::admit::Reader;

/// Runs each request for the caller its headers describe:
/// `x-admission-criticality` and the shortest of `x-admission-budget-ms`,
/// `x-envoy-expected-rq-timeout-ms` and `grpc-timeout`, read under the same
/// trust policy as [`AdmissionLayer`](crate::AdmissionLayer)'s (nobody's
/// headers raise their priority or lengthen their wait, unless
/// [`trust_peers`](Self::trust_peers)); `x-admission-flow` names the
/// caller's flow only under `trust_peers`, and is otherwise set aside and
/// counted in [`lowered_claims`](Self::lowered_claims).
///
/// # Examples
///
/// ```
/// use admission_core::Caller;
/// use admission_http::CallerLayer;
/// use http::{Request, Response};
/// use tower::{Layer, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let service = CallerLayer::new().layer(service_fn(|_req: Request<()>| async {
///     Ok::<_, std::convert::Infallible>(Response::new(Caller::current().criticality().as_str()))
/// }));
/// let request = Request::get("/").header("x-admission-criticality", "sheddable");
/// let response = service.oneshot(request.body(()).unwrap()).await.unwrap();
/// assert_eq!(response.into_body(), "sheddable");
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallerLayer {
    reader: Reader,
}

impl CallerLayer {
    /// A layer reading the standard headers, trusting nobody.
    pub fn new() -> Self {
        CallerLayer::default()
    }

    /// Honours the criticality and budget headers as sent, as
    /// [`AdmissionLayer::trust_peers`](crate::AdmissionLayer::trust_peers)
    /// does.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::CallerLayer;
    ///
    /// let layer = CallerLayer::new().trust_peers();
    /// # drop(layer);
    /// ```
    #[must_use]
    pub fn trust_peers(self) -> Self {
        CallerLayer {
            reader: self.reader.trust_peers(),
        }
    }

    /// The caller `headers` describe under this layer's trust policy, with
    /// malformed budgets and lowered claims counted: what every request
    /// gets, for middleware of another framework (actix-web's
    /// `CallerScope`).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Criticality;
    /// use admission_http::CallerLayer;
    ///
    /// let layer = CallerLayer::new();
    /// let caller = layer.caller([("x-admission-criticality", &b"critical"[..])]);
    /// assert_eq!(caller.criticality(), Criticality::Default);
    /// assert_eq!(layer.lowered_claims(), 1);
    /// ```
    pub fn caller<'a>(
        &self,
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> admission_core::Caller {
        self.reader.caller(headers)
    }

    /// How many requests claimed `critical` and were served as `default`,
    /// or named their own `x-admission-flow` and were not heard.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::CallerLayer;
    ///
    /// assert_eq!(CallerLayer::new().lowered_claims(), 0);
    /// ```
    pub fn lowered_claims(&self) -> u64 {
        self.reader.lowered_claims()
    }

    /// How many requests came with a malformed or repeated budget header;
    /// each was served as if it had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_http::CallerLayer;
    ///
    /// assert_eq!(CallerLayer::new().malformed_headers(), 0);
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.reader.malformed_headers()
    }
}

impl<S> Layer<S> for CallerLayer {
    type Service = CallerService<S>;

    fn layer(&self, inner: S) -> CallerService<S> {
        CallerService {
            inner,
            reader: self.reader.clone(),
        }
    }
}

/// The service [`CallerLayer`] makes.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct CallerService<S> {
    inner: S,
    reader: Reader,
}

impl<S, B> Service<Request<B>> for CallerService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Scoped<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Scoped<S::Future> {
        let caller = self.reader.caller(
            request
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
        );
        let future = caller.scope_sync(|| self.inner.call(request));
        caller.scope(future)
    }
}
