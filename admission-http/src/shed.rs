//! Telling load shedding from failure in logs.
//!
//! This module owns [`is_load_shedding`] (a response that asks to be
//! retried later: `503`/`429` with `Retry-After`, or a gRPC answer with
//! `grpc-retry-pushback-ms`, which every admission refusal is) and, with the
//! `tower-http` (0.7) or `tower-http-06` feature, `ShedAware`, a tower-http response classifier
//! that records such responses as successes, so `TraceLayer` logs them
//! through its `on_response` (at the level the app picks) and not through
//! `on_failure` at `ERROR`. It must never change a response.
//!
//! Put the `TraceLayer` *outside* the admission layer, or it never sees a
//! refusal: with axum, `.layer(admission)` first, then
//! `.layer(TraceLayer::new(ShedAware::http()))` (the last layer added is
//! the outermost).

use http::Response;
use http::header::RETRY_AFTER;

/// Whether `response` sheds load (asks to be retried later) rather than
/// reports a failure: `503` or `429` with `Retry-After`, or any response
/// with gRPC's `grpc-retry-pushback-ms`. Every admission refusal for
/// overload is one; an `ADMISSION_REENTRANT` answer (a `500`) is not.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::{HttpRefusalStatus, Problem, is_load_shedding};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refusal = pool.try_admit().unwrap_err();
/// let response = Problem::refusal(&refusal, HttpRefusalStatus::default()).into_http(|b| b);
/// assert!(is_load_shedding(&response));
/// assert!(!is_load_shedding(&http::Response::builder().status(503).body(()).unwrap()));
/// ```
pub fn is_load_shedding<B>(response: &Response<B>) -> bool {
    let status = response.status().as_u16();
    let headers = response.headers();
    ((status == 503 || status == 429) && headers.contains_key(RETRY_AFTER))
        || headers.contains_key(crate::wire::RETRY_PUSHBACK_MS)
}

/// A tower-http classifier that records load shedding
/// ([`is_load_shedding`]) as a success and leaves every other response to
/// `C`.
///
/// It implements tower-http 0.7's `ClassifyResponse` with the feature
/// `tower-http`, and tower-http 0.6's with the feature `tower-http-06`
/// (both may be on). The constructors [`http`](ShedAware::http) and
/// [`grpc`](ShedAware::grpc) build 0.7's `SharedClassifier`; on 0.6, wrap
/// it yourself:
/// `tower_http::classify::SharedClassifier::new(ShedAware(ServerErrorsAsFailures::new()))`.
///
/// Put the `TraceLayer` outside the admission layer, or it never sees a
/// refusal.
///
/// # Examples
///
/// ```
/// # #[cfg(feature = "tower-http")] {
/// use admission_http::ShedAware;
/// use tower_http::trace::TraceLayer;
///
/// // Outermost, around the admission layer: refusals reach it.
/// let trace = TraceLayer::new(ShedAware::http());
/// # let _ = trace;
/// # }
/// ```
#[cfg(any(feature = "tower-http", feature = "tower-http-06"))]
#[derive(Debug, Clone, Copy, Default)]
pub struct ShedAware<C>(pub C);

/// `ClassifyResponse` for one tower-http version: the same code over each
/// version's traits.
#[cfg(any(feature = "tower-http", feature = "tower-http-06"))]
macro_rules! classify_for {
    ($tower_http:ident) => {
        impl<C: $tower_http::classify::ClassifyResponse> $tower_http::classify::ClassifyResponse
            for ShedAware<C>
        {
            type FailureClass = C::FailureClass;
            type ClassifyEos = C::ClassifyEos;

            fn classify_response<B>(
                self,
                res: &Response<B>,
            ) -> $tower_http::classify::ClassifiedResponse<Self::FailureClass, Self::ClassifyEos>
            {
                if is_load_shedding(res) {
                    $tower_http::classify::ClassifiedResponse::Ready(Ok(()))
                } else {
                    self.0.classify_response(res)
                }
            }

            fn classify_error<E: std::fmt::Display + 'static>(
                self,
                error: &E,
            ) -> Self::FailureClass {
                self.0.classify_error(error)
            }
        }
    };
}

#[cfg(feature = "tower-http")]
classify_for!(tower_http);
#[cfg(feature = "tower-http-06")]
classify_for!(tower_http_06);

#[cfg(feature = "tower-http")]
impl ShedAware<tower_http::classify::ServerErrorsAsFailures> {
    /// For HTTP: tower-http's default (every 5xx is a failure) but load
    /// shedding.
    pub fn http() -> tower_http::classify::SharedClassifier<
        ShedAware<tower_http::classify::ServerErrorsAsFailures>,
    > {
        tower_http::classify::SharedClassifier::new(ShedAware(
            tower_http::classify::ServerErrorsAsFailures::new(),
        ))
    }
}

#[cfg(feature = "tower-http")]
impl ShedAware<tower_http::classify::GrpcErrorsAsFailures> {
    /// For gRPC: tower-http's gRPC default but load shedding (`UNAVAILABLE`
    /// with `grpc-retry-pushback-ms`).
    pub fn grpc()
    -> tower_http::classify::SharedClassifier<ShedAware<tower_http::classify::GrpcErrorsAsFailures>>
    {
        tower_http::classify::SharedClassifier::new(ShedAware(
            tower_http::classify::GrpcErrorsAsFailures::new(),
        ))
    }
}
