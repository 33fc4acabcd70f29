//! The answer a handler gives when admission or its work did not produce a
//! response.
//!
//! This module owns actix-web's [`Rejection`] (its `ResponseError`) and the
//! one place an `http` answer becomes an actix-web response in this
//! adapter; everything else about a rejection is `admission-http`'s shared
//! one. It must never choose a body or a header of its own.

use actix_web::body::BoxBody;
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use admission_http::{HeaderText, HttpRefusalStatus, Problem};
use bytes::Bytes;

admission_http::declare_rejection! {
    /// A refusal or a failed piece of work, as a handler returns it: `503` (or
    /// `429`, see [`with_status`](Self::with_status)) with `Retry-After` and an
    /// `application/problem+json` body for a refusal, `500` with a code and no
    /// message for work that failed or panicked, and `500` with
    /// `ADMISSION_REENTRANT` and no `Retry-After` for a task that waited on a
    /// slot only it could free (a programming error, not overload).
    ///
    /// `From<Refusal>` and `From<WorkError<E>>` (for any `E`) let a handler use
    /// `?` on [`Pool::run`](admission_core::Pool::run),
    /// [`RequestPools::execute_pure`](admission_core::RequestPools::execute_pure),
    /// [`Coalescing::run`](admission_core::Coalescing::run) and a lease; it is an
    /// actix-web [`ResponseError`].
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::ResponseError;
    /// use admission_actix::Rejection;
    /// use admission_core::{Admission, Pool};
    ///
    /// async fn metrics(registry: &Pool) -> Result<String, Rejection> {
    ///     Ok(registry.run(|| Ok::<_, std::fmt::Error>("# EOF\n".to_owned()), Admission::FailFast).await?)
    /// }
    ///
    /// # #[actix_web::main]
    /// # async fn main() {
    /// let registry = Pool::new("registry", 1).unwrap();
    /// assert_eq!(metrics(&registry).await.unwrap(), "# EOF\n");
    ///
    /// let _walking = registry.try_admit().unwrap();
    /// let refused = metrics(&registry).await.unwrap_err().error_response();
    /// assert_eq!(refused.status(), 503);
    /// assert_eq!(refused.headers().get("retry-after").unwrap(), "1");
    /// # }
    /// ```
    HttpRefusalStatus
}

impl Rejection {
    /// The same answer with the app's own body (an HTML page, its own
    /// JSON) in place of the problem document; the status, `Retry-After`,
    /// `x-admission-retry-after-ms` and `x-admission-refusal` stay ours.
    /// A content type that is not a valid header value keeps the problem
    /// document.
    #[must_use]
    pub fn with_body(self, content_type: &HeaderValue, body: Bytes) -> Self {
        match http::HeaderValue::from_bytes(content_type.as_bytes()) {
            Ok(content_type) => Rejection(self.0.with_body(content_type, body)),
            Err(_) => self,
        }
    }
}

impl ResponseError for Rejection {
    fn status_code(&self) -> StatusCode {
        actix_status(self.0.status_code())
    }

    fn error_response(&self) -> HttpResponse {
        actix_response(self.0.clone().into_http(BoxBody::new))
    }
}

/// A status of the middle's as actix-web's (actix-web 4 speaks `http`
/// 0.2); the middle only writes valid ones.
fn actix_status(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
}

/// An `http` answer of the middle (a refusal's problem or the app's page)
/// as actix-web's response: each header is carried across by its bytes.
/// With [`problem_parts`], the one place this adapter crosses from `http`
/// 1.x to actix-web's types.
pub(crate) fn actix_response<B>(answer: http::Response<B>) -> HttpResponse<B> {
    let (parts, body) = answer.into_parts();
    let mut response = HttpResponse::with_body(actix_status(parts.status.as_u16()), body);
    let headers = response.headers_mut();
    for (name, value) in &parts.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_str().as_bytes()),
            HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.insert(name, value);
        }
    }
    response
}

/// A refusal's problem document as actix-web's status, headers and body,
/// written from the problem's own header list: a static name or text
/// stays static, so a kept answer's copies count no shared bytes (only the
/// numbers and the body do).
pub(crate) fn problem_parts(
    problem: Problem,
) -> (StatusCode, Vec<(HeaderName, HeaderValue)>, Bytes) {
    let headers = problem
        .headers()
        .map(|(name, text)| {
            let value = match text {
                HeaderText::Static(text) => HeaderValue::from_static(text),
                HeaderText::Number(number) => HeaderValue::from(number),
            };
            (HeaderName::from_static(name), value)
        })
        .collect();
    (
        actix_status(problem.status()),
        headers,
        Bytes::from(problem.into_body()),
    )
}
