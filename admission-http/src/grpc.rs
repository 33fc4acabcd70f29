//! The gRPC answer for a refusal or a failed piece of work, described once,
//! without any gRPC library.
//!
//! This module owns [`GrpcRefusalStatus`] (the status code a refusal is
//! answered with), [`UNLEASED`] (health and reflection, by name), [`GrpcAnswer`] (code, message and pushback, the facts of an HTTP
//! [`Problem`](crate::Problem) in gRPC's form), the one `grpc-message`
//! encoding and the trailers-only response the middleware sends for a
//! refusal. It must never depend on
//! tonic (the tonic adapter turns a `GrpcAnswer` into a `tonic::Status`),
//! and never put a user value, an error message or a panic message in a
//! message: only codes, the pool's configured name and the retry hint.

use std::fmt::Write as _;

use admission_core::{Class, Code, Refusal, WorkError};
use http::header::CONTENT_TYPE;
use http::{HeaderName, HeaderValue, Response};

use crate::problem::{WORK_FAILED, WORK_PANICKED, title};
use crate::wire::{GRPC_MESSAGE, GRPC_STATUS, RETRY_PUSHBACK_MS, pushback_ms};

/// gRPC's status codes this crate answers with.
const DEADLINE_EXCEEDED: u8 = 4;
const RESOURCE_EXHAUSTED: u8 = 8;
const INTERNAL: u8 = 13;
const UNAVAILABLE: u8 = 14;

/// The gRPC status code a refusal is answered with.
///
/// `UNAVAILABLE` (the default) is the code gRPC clients retry: a retry
/// policy with `retryableStatusCodes: ["UNAVAILABLE"]` tries again after
/// the pushback, on this replica or another. `RESOURCE_EXHAUSTED` is for
/// services whose clients treat overload as a quota (gRPC retries it only
/// when the policy lists it).
///
/// # Examples
///
/// ```
/// use admission_http::GrpcRefusalStatus;
///
/// assert_eq!(GrpcRefusalStatus::default().code(), 14);
/// assert_eq!(GrpcRefusalStatus::ResourceExhausted.code(), 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GrpcRefusalStatus {
    /// `UNAVAILABLE` (14): retryable; the default.
    #[default]
    Unavailable,
    /// `RESOURCE_EXHAUSTED` (8).
    ResourceExhausted,
}

impl GrpcRefusalStatus {
    /// The status code number.
    pub const fn code(self) -> u8 {
        match self {
            GrpcRefusalStatus::Unavailable => UNAVAILABLE,
            GrpcRefusalStatus::ResourceExhausted => RESOURCE_EXHAUSTED,
        }
    }
}

/// One gRPC answer: a status code, a message naming the stable code (and
/// for a refusal the pool and the retry hint) and, for an overload refusal,
/// the pushback in milliseconds.
///
/// * A refusal: the configured [`GrpcRefusalStatus`], `CODE: pool `p`
///   refused the call; retry in N s`, pushback `N × 1000`.
/// * `ADMISSION_BUDGET_TOO_SHORT`: `DEADLINE_EXCEEDED` and no pushback or
///   retry hint: a retry with the same deadline would be refused again.
/// * `ADMISSION_REENTRANT`: a programming error, not overload: `INTERNAL`,
///   no pushback.
/// * Work cancelled by shutdown: a refusal with `ADMISSION_SHUTTING_DOWN`
///   and a one-second pushback.
/// * Work that failed or panicked: `INTERNAL` with its code as the whole
///   message.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_http::{GrpcAnswer, GrpcRefusalStatus};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let answer = GrpcAnswer::refusal(&pool.try_admit().unwrap_err(), GrpcRefusalStatus::default());
/// assert_eq!(answer.code(), 14);
/// assert_eq!(answer.message(), "ADMISSION_SATURATED: pool `registry` refused the call; retry in 1 s");
/// assert_eq!(answer.pushback_ms(), Some(1000));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[doc(hidden)]
pub struct GrpcAnswer {
    code: u8,
    message: String,
    pushback_ms: Option<u64>,
}

impl GrpcAnswer {
    /// The answer to a refusal.
    pub fn refusal(refusal: &Refusal, status: GrpcRefusalStatus) -> GrpcAnswer {
        let code = refusal.code();
        let pool = refusal.pool();
        let secs = refusal.retry_after_secs();
        match code {
            Code::BudgetTooShort => GrpcAnswer {
                code: DEADLINE_EXCEEDED,
                message: format!("{code}: pool `{pool}` cannot answer within the call's deadline"),
                pushback_ms: None,
            },
            Code::Reentrant => GrpcAnswer {
                code: INTERNAL,
                message: format!("{code}: pool `{pool}` refused the call; {}", title(code)),
                pushback_ms: None,
            },
            _ => GrpcAnswer {
                code: status.code(),
                message: format!("{code}: pool `{pool}` refused the call; retry in {secs} s"),
                pushback_ms: Some(u64::from(pushback_ms(refusal.retry_after_millis()))),
            },
        }
    }

    /// The answer to offloaded work that did not produce its output.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::WorkError;
    /// use admission_http::{GrpcAnswer, GrpcRefusalStatus};
    ///
    /// let panicked = GrpcAnswer::work_error(&WorkError::<()>::Panicked, GrpcRefusalStatus::default());
    /// assert_eq!((panicked.code(), panicked.message()), (13, "ADMISSION_WORK_PANICKED"));
    /// assert_eq!(panicked.pushback_ms(), None, "a panic is no refusal");
    /// ```
    pub fn work_error<E>(err: &WorkError<E>, status: GrpcRefusalStatus) -> GrpcAnswer {
        let internal = |code: &str| GrpcAnswer {
            code: INTERNAL,
            message: code.to_owned(),
            pushback_ms: None,
        };
        match err {
            WorkError::Refused(refusal) => GrpcAnswer::refusal(refusal, status),
            WorkError::Panicked => internal(WORK_PANICKED),
            WorkError::Cancelled => {
                let code = Code::ShuttingDown;
                GrpcAnswer {
                    code: status.code(),
                    message: format!("{code}: {}; retry in 1 s", title(code)),
                    pushback_ms: Some(1000),
                }
            }
            // Failed, and any kind of end core adds later: a failure,
            // never its message.
            _ => internal(WORK_FAILED),
        }
    }

    /// The gRPC status code number.
    pub fn code(&self) -> u8 {
        self.code
    }

    /// The status message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `grpc-retry-pushback-ms` value, for an overload refusal: the
    /// refusal's hint in milliseconds, held to gRFC A6's `int32`.
    pub fn pushback_ms(&self) -> Option<u64> {
        self.pushback_ms
    }

    /// The answer as a trailers-only response: `200` with `content-type:
    /// application/grpc`, `grpc-status`, the percent-encoded `grpc-message`
    /// (byte for byte as a `tonic::Status` with the same message is
    /// written) and the pushback in one HEADERS frame, and no body.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::WorkError;
    /// use admission_http::{GrpcAnswer, GrpcRefusalStatus};
    ///
    /// let cancelled = GrpcAnswer::work_error(&WorkError::<()>::Cancelled, GrpcRefusalStatus::default());
    /// let response = cancelled.into_trailers_only();
    /// assert_eq!(response.headers()["grpc-status"], "14");
    /// assert_eq!(response.headers()["grpc-retry-pushback-ms"], "1000");
    /// assert_eq!(
    ///     response.headers()["grpc-message"],
    ///     "ADMISSION_SHUTTING_DOWN:%20Shutting%20down;%20retry%20in%201%20s"
    /// );
    /// ```
    pub fn into_trailers_only(self) -> Response<()> {
        let mut response = Response::new(());
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(
            HeaderName::from_static(GRPC_STATUS),
            HeaderValue::from(u16::from(self.code)),
        );
        if let Ok(message) = HeaderValue::try_from(percent_encode(&self.message)) {
            headers.insert(HeaderName::from_static(GRPC_MESSAGE), message);
        }
        if let Some(ms) = self.pushback_ms {
            headers.insert(
                HeaderName::from_static(RETRY_PUSHBACK_MS),
                HeaderValue::from(ms),
            );
        }
        response
    }
}

/// The services whose calls take no lease by default: gRPC health checking
/// (`Check`, and `Watch`, whose streams live as long as their client) and
/// server reflection. Like `/healthz` over HTTP they are never refused, and
/// a `Watch` costs no capacity however long it stays open.
///
/// # Examples
///
/// ```
/// assert!(admission_http::UNLEASED.contains(&"grpc.health.v1.Health"));
/// ```
pub const UNLEASED: [&str; 3] = [
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The class a gRPC call takes when the app does not classify it: health
/// checks (`grpc.health.v1.Health`) and server reflection
/// (`grpc.reflection.v1.ServerReflection`, `v1alpha` too) lease from
/// *control*, every other call from *work*. `path` is the request's
/// `/{service}/{method}`.
///
/// # Examples
///
/// ```
/// use admission_core::Class;
/// use admission_http::grpc_default_class;
///
/// assert_eq!(grpc_default_class("/grpc.health.v1.Health/Check"), Class::Control);
/// assert_eq!(grpc_default_class("/shop.v1.Orders/Create"), Class::Work);
/// ```
pub fn grpc_default_class(path: &str) -> Class {
    if calls_one_of(path, &UNLEASED) {
        Class::Control
    } else {
        Class::Work
    }
}

/// Whether `path` is a gRPC method path (`/{service}/{method}`) of one of
/// `services` (each a whole name, non-empty, without `/`): the answer of
/// [`grpc_path`]'s service looked up in `services`, found by comparing
/// prefixes, so that a call to none of them (almost every call, for the
/// health and reflection services) is told apart at its first differing
/// byte instead of after a scan of its path.
pub(crate) fn calls_one_of(path: &str, services: &[&str]) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    services.iter().any(|service| {
        rest.strip_prefix(service)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|method| !method.is_empty() && !method.bytes().any(|b| b == b'/'))
    })
}

/// The service and method of a gRPC path, `/{service}/{method}`, when it is
/// one (`/shop.v1.Orders/Create`, not `/metrics`).
pub(crate) fn grpc_path(path: &str) -> Option<(&str, &str)> {
    // Byte scans, not `split_once` and `contains`: a path is a few dozen
    // bytes, read twice per call (bypass and class), and a pattern
    // searcher costs more to set up than the scan.
    let rest = path.strip_prefix('/')?;
    let slash = rest.bytes().position(|b| b == b'/')?;
    let (service, method) = (&rest[..slash], &rest[slash + 1..]);
    let valid = !service.is_empty() && !method.is_empty() && !method.bytes().any(|b| b == b'/');
    valid.then_some((service, method))
}

/// `grpc-message` percent-encoded, one way for every answer: the gRPC over
/// HTTP/2 specification asks for every byte outside printable ASCII and
/// `%` as `%XX`, and lets a sender encode more (a reader decodes any
/// `%XX`). This encodes what tonic's `Status` also encodes (space, `"`,
/// `#`, `<`, `>`, `` ` ``, `?`, `{`, `}` besides), so a refusal the layer
/// answers and one a handler returns as a `tonic::Status` carry the same
/// bytes.
fn percent_encode(message: &str) -> String {
    let plain = |b: u8| (0x21..=0x7e).contains(&b) && !b"\"#%<>`?{}".contains(&b);
    if message.bytes().all(plain) {
        return message.to_owned();
    }
    let mut out = String::with_capacity(message.len() + 32);
    for b in message.bytes() {
        if plain(b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_core::{Caller, Pool};

    fn saturated() -> Refusal {
        let pool = Pool::new("we\u{e9}ird%pool", 1).unwrap();
        let _held = pool.try_admit().unwrap();
        pool.try_admit().unwrap_err()
    }

    #[test]
    fn messages_are_percent_encoded_as_the_specification_says() {
        let response = GrpcAnswer::refusal(&saturated(), GrpcRefusalStatus::ResourceExhausted)
            .into_trailers_only();
        assert_eq!(response.headers()["grpc-status"], "8");
        assert_eq!(
            response.headers()["grpc-message"],
            "ADMISSION_SATURATED:%20pool%20%60we%C3%A9ird%25pool%60%20refused%20the%20call;%20retry%20in%201%20s"
        );
        assert_eq!(response.headers()["content-type"], "application/grpc");
        assert_eq!(response.headers().len(), 4);
    }

    #[tokio::test]
    async fn a_budget_too_short_is_deadline_exceeded_without_pushback_or_retry_hint() {
        let pool = Pool::new("grpc-budget", 1).unwrap();
        let refusal = Caller::default()
            .with_budget(std::time::Duration::ZERO)
            .scope(async { pool.try_admit().unwrap_err() })
            .await;
        assert_eq!(refusal.code(), Code::BudgetTooShort);
        let answer = GrpcAnswer::refusal(&refusal, GrpcRefusalStatus::default());
        assert_eq!(answer.code(), DEADLINE_EXCEEDED);
        assert!(answer.message().starts_with("ADMISSION_BUDGET_TOO_SHORT"));
        assert!(!answer.message().contains("retry"), "{}", answer.message());
        assert_eq!(answer.pushback_ms(), None);
        let response = answer.into_trailers_only();
        assert!(response.headers().get(RETRY_PUSHBACK_MS).is_none());
    }

    #[test]
    fn failures_carry_a_code_and_no_message_of_their_own() {
        let failed = GrpcAnswer::work_error(
            &WorkError::Failed("secret 42"),
            GrpcRefusalStatus::default(),
        );
        assert_eq!((failed.code(), failed.message()), (INTERNAL, WORK_FAILED));
        assert_eq!(failed.pushback_ms(), None);
    }

    #[test]
    fn only_health_and_reflection_default_to_control() {
        assert_eq!(
            grpc_default_class("/grpc.health.v1.Health/Watch"),
            Class::Control
        );
        assert_eq!(
            grpc_default_class("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            Class::Control
        );
        assert_eq!(
            grpc_default_class("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"),
            Class::Control
        );
        assert_eq!(
            grpc_default_class("/grpc.health.v1.HealthX/Check"),
            Class::Work
        );
        assert_eq!(
            grpc_default_class("/registry.v1.Registry/Walk"),
            Class::Work
        );
        assert_eq!(grpc_default_class("/"), Class::Work);
        for not_grpc in ["", "/", "/a.B", "/a.B/", "//C", "a.B/C", "/a.B/C/D"] {
            assert_eq!(grpc_path(not_grpc), None, "{not_grpc:?}");
        }
        assert_eq!(grpc_path("/a.B/C"), Some(("a.B", "C")));
    }

    /// The prefix comparison answers as the path's parse does, for every
    /// path built of a leading part, a service (one of the three, a near
    /// miss, or none), a separator and a method part.
    #[test]
    fn calls_one_of_answers_as_the_parsed_service_does() {
        let services = [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
            "grpc.health.v1.HealthX",
            "grpc.health.v1",
            "a.B",
            "",
        ];
        let mut matched = 0;
        for lead in ["", "/", "//"] {
            for service in services {
                for separator in ["", "/", "//"] {
                    for method in ["", "C", "C/D", "/C", "Check"] {
                        let path = format!("{lead}{service}{separator}{method}");
                        let parsed = grpc_path(&path)
                            .is_some_and(|(service, _)| UNLEASED.contains(&service));
                        assert_eq!(super::calls_one_of(&path, &UNLEASED), parsed, "{path:?}");
                        matched += usize::from(parsed);
                    }
                }
            }
        }
        // `C` and `Check` after one `/`, and `/C` after none: three paths
        // for each of the three services.
        assert_eq!(matched, 9);
    }
}
