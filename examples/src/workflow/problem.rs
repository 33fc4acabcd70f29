//! The workflow's own error answers: one problem-document shape for every
//! request it does not serve, with a stable code and a fixed title.
//!
//! This module owns [`Problem`] and the codes. It must never put request
//! data (a path, an id, a query value, a header) into an answer: a client
//! that sends markup or a 10 000-character id gets the same bytes as one
//! that sends `abc`.

use actix_web::http::StatusCode;
use actix_web::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use actix_web::{HttpResponse, ResponseError};
use std::fmt;

/// An error answer of the workflow, in the shape of the admission
/// refusals (`application/problem+json` with `code`, `status`, `title`
/// and `type`), so clients parse one kind of error body.
///
/// # Examples
///
/// ```
/// use admission_examples::workflow::Problem;
///
/// let body = Problem::BadOperationId.body();
/// assert!(body.contains(r#""code":"WORKFLOW_BAD_OPERATION_ID""#));
/// assert!(body.contains(r#""status":400"#));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// `400`: an operation id that is not an unsigned integer.
    BadOperationId,
    /// `400`: a `work_ms` that is not an integer from 0 to
    /// [`MAX_WORK_MS`](super::MAX_WORK_MS).
    BadWorkMs,
    /// `400`: a query string that does not decode.
    BadQuery,
    /// `404`: no operation with that id (never created, or evicted).
    NoSuchOperation,
    /// `404`: no such route.
    NotFound,
    /// `405`: the route exists, the method does not.
    MethodNotAllowed,
}

impl Problem {
    /// The stable code.
    pub const fn code(self) -> &'static str {
        match self {
            Problem::BadOperationId => "WORKFLOW_BAD_OPERATION_ID",
            Problem::BadWorkMs => "WORKFLOW_BAD_WORK_MS",
            Problem::BadQuery => "WORKFLOW_BAD_QUERY",
            Problem::NoSuchOperation => "WORKFLOW_NO_SUCH_OPERATION",
            Problem::NotFound => "NOT_FOUND",
            Problem::MethodNotAllowed => "METHOD_NOT_ALLOWED",
        }
    }

    /// The title, fixed per code.
    pub const fn title(self) -> &'static str {
        match self {
            Problem::BadOperationId => "An operation id is an unsigned integer",
            Problem::BadWorkMs => "`work_ms` must be an integer from 0 to 600000",
            Problem::BadQuery => "The query string does not decode",
            Problem::NoSuchOperation => "No such operation",
            Problem::NotFound => "No such route",
            Problem::MethodNotAllowed => "Method not allowed on this route",
        }
    }

    /// The HTTP status.
    pub const fn status(self) -> u16 {
        match self {
            Problem::BadOperationId | Problem::BadWorkMs | Problem::BadQuery => 400,
            Problem::NoSuchOperation | Problem::NotFound => 404,
            Problem::MethodNotAllowed => 405,
        }
    }

    /// The problem document.
    pub fn body(self) -> String {
        serde_json::json!({
            "code": self.code(),
            "status": self.status(),
            "title": self.title(),
            "type": format!("urn:admission:{}", self.code()),
        })
        .to_string()
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl std::error::Error for Problem {}

impl ResponseError for Problem {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status()).unwrap_or(StatusCode::BAD_REQUEST)
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code())
            .insert_header((CONTENT_TYPE, "application/problem+json"))
            .insert_header((CACHE_CONTROL, "no-store"))
            .body(self.body())
    }
}

/// The answer for a route that does not exist.
pub(crate) async fn not_found() -> HttpResponse {
    Problem::NotFound.error_response()
}

/// The answer for a method a route does not serve.
pub(crate) async fn method_not_allowed() -> HttpResponse {
    Problem::MethodNotAllowed.error_response()
}
