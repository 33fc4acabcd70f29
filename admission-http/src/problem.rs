//! The HTTP answer for a refusal or a failed piece of work, described once,
//! so that every HTTP adapter sends the same bytes.
//!
//! This module owns [`Problem`] (a status number, the header list as static
//! names and values, and an RFC 9457 `application/problem+json` body, all
//! written by one function) and [`HttpRefusalStatus`], the 503-or-429 choice
//! an HTTP adapter is configured with. It must never depend on a web
//! framework (actix-web speaks another version of `http`, so the header list
//! is plain names and values), and never put a user value, an error message
//! or a stack trace in a body: only codes, the pool's configured name and
//! the retry hint.
//!
//! A refusal is overload (`503` + `Retry-After`), except
//! `ADMISSION_REENTRANT`: a task waiting on a slot only it can free is a
//! programming error, answered `500` with its code and no `Retry-After`, so
//! that no balancer retries it and no client backs off from it.

use std::fmt::Write as _;

use admission_core::{Code, Criticality, Refusal, WorkError};
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, RETRY_AFTER};
use http::{HeaderValue, StatusCode};

use crate::wire::{REFUSAL_HEADER, http_hints, retry_after_secs};

/// The media type of every problem body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// The `cache-control` value of every problem answer.
pub const NO_STORE: &str = "no-store";

/// The code in the body of a `500` for work that returned its own error.
pub const WORK_FAILED: &str = "ADMISSION_WORK_FAILED";
/// The code in the body of a `500` for work that panicked.
pub const WORK_PANICKED: &str = "ADMISSION_WORK_PANICKED";

/// The problem title of a refusal's code (also the reason in a gRPC
/// message of a code that names no retry).
pub(crate) const fn title(code: Code) -> &'static str {
    match code {
        Code::Saturated => "Capacity exhausted",
        Code::LeaseUnavailable => "No request lease available",
        Code::ReservationExhausted => "Reservation exhausted",
        Code::WaitTimedOut => "Timed out waiting for capacity",
        Code::ShuttingDown => "Shutting down",
        Code::Reentrant => "Waiting on a slot the caller holds",
        Code::BudgetTooShort => "Not enough time left for the work",
        Code::FlowShare => "Flow over its fair share",
        // A code core adds later: still an answer with a title.
        _ => "Refused",
    }
}

/// The HTTP status a refusal is answered with.
///
/// # Examples
///
/// ```
/// use admission_http::HttpRefusalStatus;
///
/// assert_eq!(HttpRefusalStatus::default().code(), 503);
/// assert_eq!(HttpRefusalStatus::TooManyRequests.code(), 429);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HttpRefusalStatus {
    /// `503 Service Unavailable`: the server is overloaded (the default;
    /// balancers retry it on another replica).
    #[default]
    ServiceUnavailable,
    /// `429 Too Many Requests`, for those whose clients expect it.
    TooManyRequests,
}

impl HttpRefusalStatus {
    /// The status code number.
    pub const fn code(self) -> u16 {
        match self {
            HttpRefusalStatus::ServiceUnavailable => 503,
            HttpRefusalStatus::TooManyRequests => 429,
        }
    }
}

/// A header value of a [`Problem`]: a static string, or a number (the
/// whole seconds of `Retry-After`, the milliseconds of
/// [`RETRY_AFTER_MS_HEADER`](crate::wire::RETRY_AFTER_MS_HEADER)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub enum HeaderText {
    /// A fixed value.
    Static(&'static str),
    /// A number, written in decimal.
    Number(u32),
}

/// One HTTP answer: status, `Retry-After` (whole seconds, for refusals) and
/// a problem body. Adapters send [`into_http`](Self::into_http)'s answer.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::{HttpRefusalStatus, Problem};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let problem = Problem::refusal(&pool.try_admit().unwrap_err(), HttpRefusalStatus::default());
/// assert_eq!(problem.status(), 503);
/// assert_eq!(problem.retry_after(), Some(1));
/// assert!(problem.body().contains(r#""code":"ADMISSION_SATURATED""#));
/// assert!(problem.body().contains(r#""pool":"registry""#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    status: u16,
    /// The retry hint in milliseconds, for refusals; `Retry-After` is it
    /// rounded up to whole seconds.
    retry_after_ms: Option<u32>,
    refusal: Option<&'static str>,
    body: String,
}

impl Problem {
    /// The answer to a refusal: `status`, `Retry-After` and a body naming
    /// the code, the refused caller's criticality, the pool and the retry
    /// hint, and nothing else.
    ///
    /// `ADMISSION_REENTRANT` is no overload but a programming error: `500`,
    /// whatever `status` says, with no `Retry-After`.
    pub fn refusal(refusal: &Refusal, status: HttpRefusalStatus) -> Problem {
        let code = refusal.code();
        let (status, retry_after_ms) = if code == Code::Reentrant {
            (500, None)
        } else {
            (status.code(), Some(refusal.retry_after_millis()))
        };
        let mut problem = Problem::new(
            code.as_str(),
            title(code),
            status,
            Some((refusal.pool(), refusal.criticality())),
            retry_after_ms,
        );
        problem.refusal = Some(code.as_str());
        problem
    }

    /// The answer to offloaded work that did not produce its output: a
    /// refusal as [`refusal`](Self::refusal); a failure or a panic as `500`
    /// with a code and no message; work cancelled by shutdown as a refusal
    /// with `ADMISSION_SHUTTING_DOWN`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::WorkError;
    /// use admission_http::{HttpRefusalStatus, Problem, WORK_PANICKED};
    ///
    /// let problem = Problem::work_error(&WorkError::<()>::Panicked, HttpRefusalStatus::default());
    /// assert_eq!(problem.status(), 500);
    /// assert_eq!(problem.retry_after(), None);
    /// assert!(problem.body().contains(WORK_PANICKED));
    /// ```
    pub fn work_error<E>(err: &WorkError<E>, status: HttpRefusalStatus) -> Problem {
        let code = Problem::work_error_status(err, status);
        match err {
            WorkError::Refused(refusal) => Problem::refusal(refusal, status),
            WorkError::Panicked => Problem::new(WORK_PANICKED, "Work panicked", code, None, None),
            WorkError::Cancelled => Problem::new(
                Code::ShuttingDown.as_str(),
                title(Code::ShuttingDown),
                code,
                None,
                Some(1000),
            ),
            // Failed, and any kind of end core adds later: a failure,
            // never its message.
            _ => Problem::new(WORK_FAILED, "Work failed", code, None, None),
        }
    }

    /// The status [`work_error`](Self::work_error) answers with, without
    /// writing its body: `status` for a refusal or work cancelled by
    /// shutdown, `500` for work that failed or panicked.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::WorkError;
    /// use admission_http::{HttpRefusalStatus, Problem};
    ///
    /// let cancelled = WorkError::<()>::Cancelled;
    /// assert_eq!(Problem::work_error_status(&cancelled, HttpRefusalStatus::TooManyRequests), 429);
    /// assert_eq!(Problem::work_error_status(&WorkError::<()>::Panicked, HttpRefusalStatus::default()), 500);
    /// ```
    pub fn work_error_status<E>(err: &WorkError<E>, status: HttpRefusalStatus) -> u16 {
        match err {
            WorkError::Refused(refusal) if refusal.code() == Code::Reentrant => 500,
            WorkError::Refused(_) | WorkError::Cancelled => status.code(),
            _ => 500,
        }
    }

    fn new(
        code: &'static str,
        title: &'static str,
        status: u16,
        pool: Option<(&str, Criticality)>,
        retry_after_ms: Option<u32>,
    ) -> Problem {
        Problem {
            status,
            retry_after_ms,
            refusal: None,
            body: write_body(
                code,
                title,
                status,
                pool,
                retry_after_ms.map(retry_after_secs),
            ),
        }
    }

    /// The HTTP status.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The `Retry-After` value in whole seconds, for refusals.
    pub fn retry_after(&self) -> Option<u32> {
        self.retry_after_ms.map(retry_after_secs)
    }

    /// The headers every adapter sends, in this order: `content-type`,
    /// `cache-control` and, for refusals, `retry-after`,
    /// [`RETRY_AFTER_MS_HEADER`](crate::wire::RETRY_AFTER_MS_HEADER) (the same
    /// hint in milliseconds) and [`REFUSAL_HEADER`](crate::wire::REFUSAL_HEADER)
    /// (the code, so that a client need not read the body to know a budget
    /// was too short).
    ///
    /// Sibling-only: actix-web's adapter writes its own header types from
    /// it, each static name and value as a static one (whose copies share
    /// no counted bytes).
    #[doc(hidden)]
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, HeaderText)> + use<> {
        [
            ("content-type", HeaderText::Static(PROBLEM_JSON)),
            ("cache-control", HeaderText::Static(NO_STORE)),
        ]
        .into_iter()
        .chain(
            self.retry_after_ms.into_iter().flat_map(|ms| {
                http_hints(ms).map(|(name, number)| (name, HeaderText::Number(number)))
            }),
        )
        .chain(
            self.refusal
                .map(|code| (REFUSAL_HEADER, HeaderText::Static(code))),
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

    /// The answer as an `http` response whose body `body` builds from the
    /// problem's bytes: the status and the header list in this module's
    /// order, with `http`'s constants for the names (nothing is parsed on
    /// the refusal path).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    /// use admission_http::{HttpRefusalStatus, Problem};
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let problem = Problem::refusal(&pool.try_admit().unwrap_err(), HttpRefusalStatus::default());
    /// let response = problem.into_http(|bytes| bytes);
    /// assert_eq!(response.status(), 503);
    /// assert_eq!(response.headers()["retry-after"], "1");
    /// ```
    pub fn into_http<B>(self, body: impl FnOnce(Bytes) -> B) -> http::Response<B> {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        let header_list = self.headers();
        let mut response = http::Response::new(body(Bytes::from(self.into_body())));
        *response.status_mut() = status;
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
}

/// The problem's header names as `http`'s constants; any other name is
/// parsed.
fn header_name(name: &'static str) -> HeaderName {
    match name {
        "content-type" => CONTENT_TYPE,
        "cache-control" => CACHE_CONTROL,
        "retry-after" => RETRY_AFTER,
        other => HeaderName::from_static(other),
    }
}

/// The one problem-body writer. Keys come in sorted order; every value but
/// the pool's name is a static, JSON-safe string or a number, so the body is
/// written directly, with no intermediate string (this runs for every
/// refused request).
fn write_body(
    code: &str,
    title: &str,
    status: u16,
    refused: Option<(&str, Criticality)>,
    retry_after: Option<u32>,
) -> String {
    let mut body = String::with_capacity(256 + refused.map_or(0, |(p, _)| 2 * p.len()));
    // Writing to a `String` cannot fail.
    let _ = write!(body, "{{\"code\":\"{code}\"");
    if let Some((pool, criticality)) = refused {
        let _ = write!(body, ",\"criticality\":\"{criticality}\"");
        body.push_str(",\"detail\":\"pool `");
        push_json_escaped(&mut body, pool);
        body.push_str("` refused the request");
        if let Some(secs) = retry_after {
            let _ = write!(body, "; retry in {secs} s");
        }
        body.push_str("\",\"pool\":\"");
        push_json_escaped(&mut body, pool);
        body.push('"');
    }
    if let Some(secs) = retry_after {
        let _ = write!(body, ",\"retry_after\":{secs}");
    }
    let _ = write!(
        body,
        ",\"status\":{status},\"title\":\"{title}\",\"type\":\"urn:admission:{code}\"}}"
    );
    body
}

/// Appends `value` escaped for the inside of a JSON string: as is when
/// nothing needs escaping (the usual pool name).
fn push_json_escaped(out: &mut String, value: &str) {
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push_str(value);
        return;
    }
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_core::{Caller, Pool};

    /// A saturated refusal of `criticality` from a one-slot pool named
    /// `name`, as a pool makes one.
    fn refusal(name: &str, criticality: Criticality) -> Refusal {
        let pool = Pool::builder(name.to_owned())
            .capacity(1)
            .share(Criticality::Sheddable, 100)
            .build()
            .unwrap();
        let _held = pool.try_admit().unwrap();
        let refused = Caller::new(criticality).scope_sync(|| pool.try_admit().unwrap_err());
        assert_eq!(refused.code(), Code::Saturated);
        refused
    }

    #[test]
    fn the_refusal_body_is_valid_json_with_every_field() {
        for name in ["registry", "we\"ird\\name\n"] {
            let refusal = refusal(name, Criticality::Sheddable);
            let secs = refusal.retry_after_secs();
            let problem = Problem::refusal(&refusal, HttpRefusalStatus::TooManyRequests);
            let body: serde_json::Value = serde_json::from_str(problem.body()).unwrap();
            assert_eq!(body["pool"], name);
            assert_eq!(body["code"], "ADMISSION_SATURATED");
            assert_eq!(body["retry_after"], secs);
            assert_eq!(body["criticality"], "sheddable");
            assert_eq!(body["status"], 429);
            assert_eq!(body["title"], "Capacity exhausted");
            assert_eq!(body["type"], "urn:admission:ADMISSION_SATURATED");
            let detail = body["detail"].as_str().unwrap();
            assert!(detail.contains(&format!("retry in {secs} s")), "{detail}");
            assert_eq!(body.as_object().unwrap().len(), 8);
        }
    }

    #[test]
    fn every_code_has_a_title_of_its_own() {
        let titles: std::collections::HashSet<_> = Code::ALL.into_iter().map(title).collect();
        assert_eq!(titles.len(), Code::ALL.len(), "{titles:?}");
        assert!(
            !titles.contains("Refused"),
            "the fallback is for later codes"
        );
    }

    #[test]
    fn a_cancelled_body_has_the_shape_of_a_shutdown_refusal() {
        let problem =
            Problem::work_error(&WorkError::<()>::Cancelled, HttpRefusalStatus::default());
        let body: serde_json::Value = serde_json::from_str(problem.body()).unwrap();
        assert_eq!(problem.status(), 503);
        assert_eq!(problem.retry_after(), Some(1));
        // The millisecond hint says the same second: a client reading it
        // does not come back sooner than `Retry-After` tells one that does
        // not.
        assert!(
            problem
                .headers()
                .any(|h| h == ("x-admission-retry-after-ms", HeaderText::Number(1000))),
            "{:?}",
            problem.headers().collect::<Vec<_>>()
        );
        assert_eq!(body["code"], "ADMISSION_SHUTTING_DOWN");
        assert_eq!(body["retry_after"], 1);
        assert_eq!(body["status"], 503);
        assert_eq!(body["type"], "urn:admission:ADMISSION_SHUTTING_DOWN");
    }

    #[test]
    fn the_status_alone_is_the_answers_status() {
        let errors = [
            WorkError::Refused(refusal("status-alone", Criticality::Default)),
            WorkError::Failed(()),
            WorkError::Panicked,
            WorkError::Cancelled,
        ];
        for status in [
            HttpRefusalStatus::ServiceUnavailable,
            HttpRefusalStatus::TooManyRequests,
        ] {
            for err in &errors {
                assert_eq!(
                    Problem::work_error_status(err, status),
                    Problem::work_error(err, status).status(),
                    "{err:?} with {status:?}"
                );
            }
        }
    }

    #[test]
    fn failures_carry_a_code_and_no_message() {
        let problem = Problem::work_error(
            &WorkError::Failed("secret value 42"),
            HttpRefusalStatus::default(),
        );
        assert!(!problem.body().contains("secret"));
        let body: serde_json::Value = serde_json::from_str(problem.body()).unwrap();
        assert_eq!(body["code"], WORK_FAILED);
        assert_eq!(body["status"], 500);
        assert_eq!(body.as_object().unwrap().len(), 4);
    }

    #[test]
    fn a_pool_name_is_escaped_exactly_as_json_needs_and_no_more() {
        for (name, escaped) in [
            ("registry", "registry"),
            ("r\u{e9}gistre", "r\u{e9}gistre"),
            ("\n\t", "\\u000a\\u0009"),
            ("\"", "\\\""),
            ("a \"b", "a \\\"b"),
            ("\\", "\\\\"),
            ("we\"ird\\name\n", "we\\\"ird\\\\name\\u000a"),
        ] {
            let refusal = refusal(name, Criticality::Default);
            let body = Problem::refusal(&refusal, HttpRefusalStatus::default()).into_body();
            assert!(
                body.contains(&format!("\"pool\":\"{escaped}\"")),
                "{name:?} written as {escaped:?} in {body}"
            );
            let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(parsed["pool"], name);
        }
    }

    #[test]
    fn a_refusal_sends_its_retry_hint_as_a_header_and_a_failure_sends_none() {
        let refusal = refusal("headers", Criticality::Default);
        let secs = refusal.retry_after_secs();
        let refused = Problem::refusal(&refusal, HttpRefusalStatus::default());
        assert_eq!(refused.retry_after(), Some(secs));
        let headers: Vec<_> = refused.headers().collect();
        assert_eq!(
            headers,
            [
                ("content-type", HeaderText::Static(PROBLEM_JSON)),
                ("cache-control", HeaderText::Static(NO_STORE)),
                ("retry-after", HeaderText::Number(secs)),
                (
                    crate::RETRY_AFTER_MS_HEADER,
                    HeaderText::Number(refusal.retry_after_millis())
                ),
                (
                    crate::REFUSAL_HEADER,
                    HeaderText::Static("ADMISSION_SATURATED")
                ),
            ]
        );
        let body = refused.body().to_owned();
        assert_eq!(
            refused.clone().into_body(),
            body,
            "the owned body is the body"
        );
        let response = refused.into_http(|bytes| bytes);
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["content-type"], PROBLEM_JSON);
        assert_eq!(response.headers()["cache-control"], NO_STORE);
        assert_eq!(response.headers()["retry-after"], secs.to_string());
        assert_eq!(response.into_body(), body);

        let failed = Problem::work_error(&WorkError::Failed(()), HttpRefusalStatus::default());
        assert_eq!(failed.retry_after(), None);
        assert_eq!(failed.headers().count(), 2, "no retry-after for a failure");
        assert!(failed.into_body().starts_with("{\"code\":"));
    }
}
