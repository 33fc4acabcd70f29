//! The answer a handler gives when admission or its work did not produce a
//! response.
//!
//! This module owns [`Rejection`] and the one place a core
//! [`Problem`] becomes an HTTP response in this adapter. It must never choose
//! a body or a header of its own: status, headers and bytes are core's.

use std::fmt;

use actix_web::body::BoxBody;
use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use actix_web::{HttpResponse, ResponseError};
use admission_core::{Refusal, WorkError};
use admission_http::{HeaderText, HttpRefusalStatus, Problem};
use bytes::Bytes;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    // What kind of end it was; the work's own error value is dropped on the
    // way in, since it never reaches the client. A refusal is `Refused`.
    error: WorkError<()>,
    status: HttpRefusalStatus,
}

impl Rejection {
    /// The same rejection, answered with `status` if it is a refusal (work
    /// that failed stays `500`).
    ///
    /// # Examples
    ///
    /// ```
    /// use actix_web::ResponseError;
    /// use admission_actix::Rejection;
    /// use admission_core::Pool;
    /// use admission_actix::HttpRefusalStatus;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let rejection = Rejection::from(pool.try_admit().unwrap_err());
    /// assert_eq!(rejection.with_status(HttpRefusalStatus::TooManyRequests).status_code(), 429);
    /// ```
    #[must_use]
    pub fn with_status(self, status: HttpRefusalStatus) -> Rejection {
        Rejection { status, ..self }
    }

    /// The refusal, if admission refused.
    pub fn refusal(&self) -> Option<&Refusal> {
        self.error.refusal()
    }

    /// The answer core describes for this rejection.
    pub fn problem(&self) -> Problem {
        Problem::work_error(&self.error, self.status)
    }
}

impl From<Refusal> for Rejection {
    fn from(refusal: Refusal) -> Self {
        Rejection {
            error: WorkError::Refused(refusal),
            status: HttpRefusalStatus::default(),
        }
    }
}

impl<E> From<WorkError<E>> for Rejection {
    /// Keeps what kind of end it was; the work's own error value is dropped
    /// here, since it never reaches the client.
    fn from(err: WorkError<E>) -> Self {
        Rejection {
            error: err.map_err(|_| ()),
            status: HttpRefusalStatus::default(),
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for Rejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.refusal().map(|r| r as _)
    }
}

impl ResponseError for Rejection {
    fn status_code(&self) -> StatusCode {
        // The status alone: no problem body is written to answer this.
        let code = Problem::work_error_status(&self.error, self.status);
        StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
    }

    fn error_response(&self) -> HttpResponse {
        problem_response(self.problem(), BoxBody::new)
    }
}

/// Core's problem as a response whose body `body` builds from the bytes:
/// the status and the header list in core's order.
pub(crate) fn problem_response<B>(
    problem: Problem,
    body: impl FnOnce(Bytes) -> B,
) -> HttpResponse<B> {
    let status = StatusCode::from_u16(problem.status()).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    let header_list = problem.headers();
    let mut response = HttpResponse::with_body(status, body(Bytes::from(problem.into_body())));
    let headers = response.headers_mut();
    for (name, value) in header_list {
        let value = match value {
            HeaderText::Static(text) => HeaderValue::from_static(text),
            HeaderText::Number(n) => HeaderValue::from(n),
        };
        headers.insert(header_name(name), value);
    }
    response
}

/// Core's header names as actix-web's constants (no parsing on the refusal
/// path); any other name is parsed.
fn header_name(name: &'static str) -> HeaderName {
    match name {
        "content-type" => CONTENT_TYPE,
        "cache-control" => CACHE_CONTROL,
        "retry-after" => RETRY_AFTER,
        other => HeaderName::from_static(other),
    }
}
