//! The answer a handler gives when admission or its work did not produce a
//! response.
//!
//! This module owns [`Rejection`] and its `IntoResponse`. It must never
//! choose a body or a header of its own: status, headers and bytes are
//! `admission-http`'s [`Problem`].

use std::fmt;

use admission_core::{Refusal, WorkError};
use admission_http::{HttpRefusalStatus, Problem};
use axum::body::Body;
use axum::response::{IntoResponse, Response};

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
    /// use admission_axum::Rejection;
    /// use admission_core::Pool;
    /// use admission_axum::HttpRefusalStatus;
    /// use axum::response::IntoResponse;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let rejection = Rejection::from(pool.try_admit().unwrap_err());
    /// let response = rejection.with_status(HttpRefusalStatus::TooManyRequests).into_response();
    /// assert_eq!(response.status(), 429);
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

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        self.problem().into_http(Body::from)
    }
}
