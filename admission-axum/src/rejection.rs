//! The answer a handler gives when admission or its work did not produce a
//! response.
//!
//! This module owns axum's [`Rejection`] and its `IntoResponse`; everything
//! else about it is `admission-http`'s shared rejection. It must never
//! choose a body or a header of its own.

use admission_http::HttpRefusalStatus;
use axum::body::Body;
use axum::response::{IntoResponse, Response};

admission_http::declare_rejection! {
    /// A refusal or a failed piece of work, as a handler returns it: `503` (or
    /// `429`, see [`with_status`](Self::with_status)) with `Retry-After` and an
    /// `application/problem+json` body for a refusal, `500` with a code and no
    /// message for work that failed or panicked, and `500` with
    /// `ADMISSION_REENTRANT` and no `Retry-After` for a task that waited on a
    /// slot only it could free (a programming error, not overload).
    ///
    /// `From<Refusal>` and `From<WorkError<E>>` let a handler use `?` on
    /// [`Pool::run`](admission_core::Pool::run),
    /// [`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure),
    /// [`Coalescing::run`](admission_core::Coalescing::run) and a lease.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_axum::Rejection;
    /// use admission_core::{Admission, Pool};
    /// use axum::response::IntoResponse;
    ///
    /// async fn metrics(registry: &Pool) -> Result<String, Rejection> {
    ///     Ok(registry.run(|| Ok::<_, std::fmt::Error>("# EOF\n".to_owned()), Admission::FailFast).await?)
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let registry = Pool::new("registry", 1).unwrap();
    /// assert_eq!(metrics(&registry).await.unwrap(), "# EOF\n");
    ///
    /// let _walking = registry.try_admit().unwrap();
    /// let refused = metrics(&registry).await.unwrap_err().into_response();
    /// assert_eq!(refused.status(), 503);
    /// assert_eq!(refused.headers()["retry-after"], "1");
    /// # }
    /// ```
    HttpRefusalStatus
}

impl Rejection {
    /// The same answer with the app's own body (an HTML page, its own
    /// JSON) in place of the problem document; the status, `Retry-After`,
    /// `x-admission-retry-after-ms` and `x-admission-refusal` stay ours.
    #[must_use]
    pub fn with_body(self, content_type: axum::http::HeaderValue, body: axum::body::Bytes) -> Self {
        Rejection(self.0.with_body(content_type, body))
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        self.0.into_http(Body::from)
    }
}
