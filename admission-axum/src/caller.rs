//! The layer that runs each request for the caller its headers describe,
//! for apps that admit work on their own pools (no request lease).
//!
//! This module owns [`CallerLayer`] and [`CallerService`]. It must never
//! admit, refuse or hold anything: it only reads the criticality and budget
//! headers (core's [`RequestCaller`]) and scopes the caller, so that every
//! `Pool::run` in the handler is admitted at that criticality and within
//! that deadline. [`AdmissionLayer`](crate::AdmissionLayer) does the same
//! for the requests it admits; stack this one where there is no lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use admission_core::caller::WithCaller;
use admission_core::http::RequestCaller;
use http::Request;
use tower_layer::Layer;
use tower_service::Service;

/// Runs each request for the caller its headers describe:
/// `x-admission-criticality` and the shortest of `x-admission-budget-ms`,
/// `x-envoy-expected-rq-timeout-ms` and `grpc-timeout`.
///
/// # Examples
///
/// ```
/// use admission_axum::CallerLayer;
/// use admission_core::Caller;
/// use axum::{Router, body::Body, http::Request, routing::get};
/// use tower::ServiceExt;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let app = Router::new()
///     .route("/", get(|| async { Caller::current().criticality().as_str() }))
///     .layer(CallerLayer::new());
/// let request = Request::get("/").header("x-admission-criticality", "sheddable");
/// let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
/// let body = axum::body::to_bytes(response.into_body(), 64).await.unwrap();
/// assert_eq!(&body[..], b"sheddable");
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct CallerLayer {
    malformed: Arc<AtomicU64>,
}

impl CallerLayer {
    /// A layer reading the standard headers.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many requests came with a malformed or repeated budget header;
    /// each was served as if it had none.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::CallerLayer;
    ///
    /// assert_eq!(CallerLayer::new().malformed_headers(), 0);
    /// ```
    pub fn malformed_headers(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }
}

impl<S> Layer<S> for CallerLayer {
    type Service = CallerService<S>;

    fn layer(&self, inner: S) -> CallerService<S> {
        CallerService {
            inner,
            malformed: Arc::clone(&self.malformed),
        }
    }
}

/// The service [`CallerLayer`] makes.
#[derive(Debug, Clone)]
pub struct CallerService<S> {
    inner: S,
    malformed: Arc<AtomicU64>,
}

impl<S, B> Service<Request<B>> for CallerService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = WithCaller<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> WithCaller<S::Future> {
        let read = RequestCaller::from_headers(
            request
                .headers()
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_bytes())),
        );
        if read.malformed {
            self.malformed.fetch_add(1, Ordering::Relaxed);
        }
        let future = read.caller.scope_sync(|| self.inner.call(request));
        read.caller.scope(future)
    }
}
