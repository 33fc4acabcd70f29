//! The HTTP answer for a refusal or a failed piece of work, defined once so
//! that every adapter sends the same bytes.
//!
//! This module owns [`Problem`]: status, `Retry-After` and an RFC 9457
//! `application/problem+json` body. It must never put a user value, an error
//! message or a stack trace in a body: only codes, the pool's configured name
//! and the retry hint.

use crate::refusal::{Code, Refusal};
use crate::work::WorkError;

/// The status sent for a refusal unless configured otherwise.
pub const DEFAULT_REFUSAL_STATUS: u16 = 503;

/// The `cache-control` value of every problem answer.
pub(crate) const NO_STORE: &str = "no-store";

/// The code in the body of a `500` for work that returned its own error.
pub const WORK_FAILED: &str = "ADMISSION_WORK_FAILED";
/// The code in the body of a `500` for work that panicked.
pub const WORK_PANICKED: &str = "ADMISSION_WORK_PANICKED";

/// One HTTP answer: status, optional `Retry-After` (whole seconds) and a
/// problem body. Adapters turn it into their framework's response with the
/// headers `content-type: application/problem+json`, `cache-control:
/// no-store` and, for refusals, `retry-after`.
///
/// # Examples
///
/// ```
/// use admission_core::{Pool, Problem};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let problem = Problem::refusal(&pool.try_admit().unwrap_err());
/// assert_eq!(problem.status(), 503);
/// assert_eq!(problem.retry_after(), Some(1));
/// assert!(problem.body().contains("ADMISSION_SATURATED"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    status: u16,
    retry_after: Option<u32>,
    body: String,
}

impl Problem {
    /// The answer to a refusal: its pool's status (503 by default, or 429),
    /// `Retry-After` and its problem body.
    pub fn refusal(refusal: &Refusal) -> Problem {
        Problem {
            status: refusal.status(),
            retry_after: Some(refusal.retry_after_secs()),
            body: refusal.problem_json(),
        }
    }

    /// The answer to offloaded work that did not produce its output: a
    /// refusal as [`refusal`](Self::refusal); a failure or a panic as `500`
    /// with a code and no message; work cancelled by shutdown as a refusal
    /// with `ADMISSION_SHUTTING_DOWN` and status 503.
    pub fn work_error<E>(err: &WorkError<E>) -> Problem {
        match err {
            WorkError::Refused(refusal) => Problem::refusal(refusal),
            WorkError::Failed(_) => Problem::internal(WORK_FAILED, "Work failed"),
            WorkError::Panicked => Problem::internal(WORK_PANICKED, "Work panicked"),
            WorkError::Cancelled => Problem {
                status: DEFAULT_REFUSAL_STATUS,
                retry_after: Some(1),
                body: problem_body(
                    Code::ShuttingDown.as_str(),
                    Code::ShuttingDown.title(),
                    DEFAULT_REFUSAL_STATUS,
                ),
            },
        }
    }

    fn internal(code: &'static str, title: &'static str) -> Problem {
        Problem {
            status: 500,
            retry_after: None,
            body: problem_body(code, title, 500),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The `Retry-After` value in whole seconds, for refusals.
    pub fn retry_after(&self) -> Option<u32> {
        self.retry_after
    }

    /// The headers every adapter sends, in this order: `content-type`,
    /// `cache-control` and, for refusals, `retry-after`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Pool, Problem};
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let problem = Problem::refusal(&pool.try_admit().unwrap_err());
    /// let names: Vec<_> = problem.headers().map(|(name, _)| name).collect();
    /// assert_eq!(names, ["content-type", "cache-control", "retry-after"]);
    /// ```
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, String)> + '_ {
        [
            ("content-type", crate::refusal::PROBLEM_JSON.to_owned()),
            ("cache-control", NO_STORE.to_owned()),
        ]
        .into_iter()
        .chain(
            self.retry_after
                .map(|secs| ("retry-after", secs.to_string())),
        )
    }

    /// The `application/problem+json` body.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The body, owned.
    pub fn into_body(self) -> String {
        self.body
    }
}

fn problem_body(code: &str, title: &str, status: u16) -> String {
    serde_json::json!({
        "type": format!("urn:admission:{code}"),
        "title": title,
        "status": status,
        "code": code,
    })
    .to_string()
}
