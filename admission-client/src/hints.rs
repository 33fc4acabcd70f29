//! What a response says about retrying: the server's hint (`Retry-After`,
//! `x-admission-retry-after-ms`, `grpc-retry-pushback-ms`) and the verdict
//! on the attempt.
//!
//! This module owns reading those headers strictly and classifying one
//! response. It must never turn a hint into an earlier retry than the
//! server asked for, never keep a header's text, and never read a body.

use std::time::{Duration, SystemTime};

use admission_core::Code;
use admission_http::wire::{
    self, GRPC_STATUS, REFUSAL_HEADER, RETRY_AFTER_MS_HEADER, RETRY_PUSHBACK_MS, retry_after_secs,
};
use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, HeaderName, HeaderValue};

pub use admission_http::wire::Hint;

// The names read from answers, made once (a name given as text is parsed
// and checked on each lookup).
static RETRY_AFTER_MS: HeaderName = HeaderName::from_static(RETRY_AFTER_MS_HEADER);
static PUSHBACK: HeaderName = HeaderName::from_static(RETRY_PUSHBACK_MS);
static REFUSAL: HeaderName = HeaderName::from_static(REFUSAL_HEADER);
static GRPC_STATUS_NAME: HeaderName = HeaderName::from_static(GRPC_STATUS);

/// The values of `name` in `headers`, as the wire's readers take them.
fn values<'a>(headers: &'a HeaderMap, name: &HeaderName) -> impl Iterator<Item = &'a [u8]> {
    headers.get_all(name).iter().map(HeaderValue::as_bytes)
}

/// The `Retry-After` of `headers` (delta-seconds or an HTTP-date, read
/// against `now`); a malformed one is no hint (the client backs off), and
/// of several (a proxy on the way added its own) the longest wait counts.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use admission_client::{Hint, retry_after};
///
/// let mut headers = http::HeaderMap::new();
/// headers.insert("retry-after", "2".parse().unwrap());
/// assert_eq!(retry_after(&headers, SystemTime::now()), Hint::After(Duration::from_secs(2)));
/// headers.insert("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap());
/// assert_eq!(retry_after(&headers, SystemTime::UNIX_EPOCH), Hint::After(Duration::from_secs(1_445_412_480)));
/// headers.insert("retry-after", "soon".parse().unwrap());
/// assert_eq!(retry_after(&headers, SystemTime::now()), Hint::None);
/// ```
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Hint {
    wire::retry_after(values(headers, &RETRY_AFTER), now)
}

/// The `x-admission-retry-after-ms` of `headers`: the same hint as
/// `Retry-After` in milliseconds, which an admission server sends beside
/// it (`Retry-After` must round 20 ms up to 1 s). A malformed one is no
/// hint.
///
/// The layer waits this hint when it agrees with `Retry-After` (rounded up
/// to whole seconds it gives `Retry-After`'s value, or `Retry-After` is
/// absent); when they disagree (a proxy between set its own
/// `Retry-After`), it waits the longer of the two.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_client::{Hint, retry_after_ms};
///
/// let mut headers = http::HeaderMap::new();
/// assert_eq!(retry_after_ms(&headers), Hint::None);
/// headers.insert("x-admission-retry-after-ms", "20".parse().unwrap());
/// assert_eq!(retry_after_ms(&headers), Hint::After(Duration::from_millis(20)));
/// headers.insert("x-admission-retry-after-ms", "-1".parse().unwrap());
/// assert_eq!(retry_after_ms(&headers), Hint::None);
/// ```
pub fn retry_after_ms(headers: &HeaderMap) -> Hint {
    wire::retry_after_ms(values(headers, &RETRY_AFTER_MS))
}

/// The hint of an HTTP answer: the millisecond one where it agrees with
/// `Retry-After`, else the longer (see [`retry_after_ms`]).
fn http_hint(headers: &HeaderMap, now: SystemTime) -> Hint {
    let coarse = retry_after(headers, now);
    let Hint::After(fine) = retry_after_ms(headers) else {
        return coarse;
    };
    match coarse {
        Hint::After(coarse) => {
            let ms = u32::try_from(fine.as_millis()).unwrap_or(u32::MAX);
            let rounded = Duration::from_secs(u64::from(retry_after_secs(ms)));
            Hint::After(if coarse <= rounded { fine } else { coarse })
        }
        Hint::None | Hint::Stop => Hint::After(fine),
    }
}

/// The `grpc-retry-pushback-ms` of `headers` (a trailers-only answer), as
/// gRFC A6 reads it: one non-negative `int32` of milliseconds (no
/// unnecessary leading zero) is the wait; anything else present (`-1`,
/// `007`, a value past `i32::MAX`, garbage, the trailer twice) says do not
/// retry. The tonic adapter's `status::pushback` reads it with the same code.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_client::{Hint, pushback};
///
/// let mut headers = http::HeaderMap::new();
/// assert_eq!(pushback(&headers), Hint::None);
/// headers.insert("grpc-retry-pushback-ms", "250".parse().unwrap());
/// assert_eq!(pushback(&headers), Hint::After(Duration::from_millis(250)));
/// for stop in ["-1", "2.5", "", "1e3", "007"] {
///     headers.insert("grpc-retry-pushback-ms", stop.parse().unwrap());
///     assert_eq!(pushback(&headers), Hint::Stop, "{stop:?}");
/// }
/// ```
pub fn pushback(headers: &HeaderMap) -> Hint {
    wire::pushback(values(headers, &PUSHBACK))
}

/// gRPC's `DEADLINE_EXCEEDED`.
pub(crate) const DEADLINE_EXCEEDED: u16 = 4;
/// gRPC's `RESOURCE_EXHAUSTED`.
pub(crate) const RESOURCE_EXHAUSTED: u16 = 8;
/// gRPC's `UNAVAILABLE`.
pub(crate) const UNAVAILABLE: u16 = 14;

/// One attempt's answer, judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    /// The server accepted the work (for the throttle): anything but a
    /// refusal or a failure to answer.
    pub(crate) accepted: bool,
    /// Worth another attempt, if the request may be retried.
    pub(crate) retryable: bool,
    /// The server's hint.
    pub(crate) hint: Hint,
}

/// Judges a response: `grpc` when the request was a gRPC call, whose
/// status a trailers-only answer carries in its headers (a status in the
/// trailers of a streamed answer is not seen: such calls are not retried).
pub(crate) fn judge(
    status: http::StatusCode,
    headers: &HeaderMap,
    grpc_codes: &[u16],
    now: SystemTime,
) -> Verdict {
    let is_grpc = headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if is_grpc && status.is_success() {
        let code = headers
            .get(&GRPC_STATUS_NAME)
            .and_then(|v| wire::grpc_status(v.as_bytes()))
            .unwrap_or(0);
        let refused = matches!(code, UNAVAILABLE | RESOURCE_EXHAUSTED | DEADLINE_EXCEEDED);
        // DEADLINE_EXCEEDED (ADMISSION_BUDGET_TOO_SHORT among them) is
        // never retried with the same deadline, nor with a shorter one.
        let retryable = code != 0 && code != DEADLINE_EXCEEDED && grpc_codes.contains(&code);
        return Verdict {
            accepted: !refused,
            retryable,
            // The hint is read only where a retry may follow it.
            hint: if retryable {
                pushback(headers)
            } else {
                Hint::None
            },
        };
    }
    let refused = status == http::StatusCode::SERVICE_UNAVAILABLE
        || status == http::StatusCode::TOO_MANY_REQUESTS;
    // Read only for a refusal: an answer is not looked through for it.
    let too_short = || {
        headers
            .get(&REFUSAL)
            .is_some_and(|v| wire::refusal_code(v.as_bytes()) == Some(Code::BudgetTooShort))
    };
    let gateway =
        status == http::StatusCode::BAD_GATEWAY || status == http::StatusCode::GATEWAY_TIMEOUT;
    let retryable = (refused || gateway) && !too_short();
    Verdict {
        accepted: !(refused || gateway),
        retryable,
        hint: if retryable {
            http_hint(headers, now)
        } else {
            Hint::None
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(n, v)| (http::HeaderName::from_static(n), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn verdicts_for_http_and_grpc_answers() {
        let now = SystemTime::now();
        let ok = judge(http::StatusCode::OK, &headers(&[]), &[UNAVAILABLE], now);
        assert!(ok.accepted && !ok.retryable);
        let refused = judge(
            http::StatusCode::SERVICE_UNAVAILABLE,
            &headers(&[("retry-after", "1")]),
            &[],
            now,
        );
        assert!(!refused.accepted && refused.retryable);
        assert_eq!(refused.hint, Hint::After(Duration::from_secs(1)));
        let too_short = judge(
            http::StatusCode::SERVICE_UNAVAILABLE,
            &headers(&[
                (REFUSAL_HEADER, "ADMISSION_BUDGET_TOO_SHORT"),
                ("retry-after", "1"),
            ]),
            &[],
            now,
        );
        assert!(!too_short.accepted && !too_short.retryable);
        let failed = judge(
            http::StatusCode::INTERNAL_SERVER_ERROR,
            &headers(&[]),
            &[],
            now,
        );
        assert!(
            failed.accepted && !failed.retryable,
            "an answer, not a refusal"
        );

        let grpc = |status| {
            headers(&[
                ("content-type", "application/grpc"),
                ("grpc-status", status),
            ])
        };
        let unavailable = judge(http::StatusCode::OK, &grpc("14"), &[UNAVAILABLE], now);
        assert!(!unavailable.accepted && unavailable.retryable);
        let unlisted = judge(http::StatusCode::OK, &grpc("14"), &[], now);
        assert!(!unlisted.retryable);
        let deadline = judge(
            http::StatusCode::OK,
            &grpc("4"),
            &[DEADLINE_EXCEEDED, UNAVAILABLE],
            now,
        );
        assert!(
            !deadline.accepted && !deadline.retryable,
            "never with the same deadline"
        );
        let internal = judge(http::StatusCode::OK, &grpc("13"), &[UNAVAILABLE], now);
        assert!(internal.accepted && !internal.retryable);
    }

    #[test]
    fn the_millisecond_hint_is_waited_only_where_it_agrees_with_retry_after() {
        let now = SystemTime::now();
        let hint = |pairs: &[(&'static str, &'static str)]| http_hint(&headers(pairs), now);
        let ms = Duration::from_millis;
        assert_eq!(
            hint(&[("retry-after", "1"), ("x-admission-retry-after-ms", "20")]),
            Hint::After(ms(20)),
            "an admission server's pair: the fine one"
        );
        assert_eq!(
            hint(&[("retry-after", "2"), ("x-admission-retry-after-ms", "1500")]),
            Hint::After(ms(1500))
        );
        assert_eq!(
            hint(&[("retry-after", "30"), ("x-admission-retry-after-ms", "20")]),
            Hint::After(Duration::from_secs(30)),
            "a proxy's longer Retry-After wins"
        );
        assert_eq!(
            hint(&[("x-admission-retry-after-ms", "20")]),
            Hint::After(ms(20))
        );
        assert_eq!(
            hint(&[("retry-after", "1"), ("x-admission-retry-after-ms", "soon")]),
            Hint::After(Duration::from_secs(1)),
            "a malformed fine hint is ignored"
        );
    }

    #[test]
    fn a_past_http_date_is_no_wait_and_a_huge_delta_is_kept() {
        let mut map = headers(&[("retry-after", "Thu, 01 Jan 1970 00:00:00 GMT")]);
        assert_eq!(
            retry_after(&map, SystemTime::now()),
            Hint::After(Duration::ZERO)
        );
        map.insert(RETRY_AFTER, "99999999999".parse().unwrap());
        assert_eq!(
            retry_after(&map, SystemTime::now()),
            Hint::None,
            "eleven digits"
        );
        map.append(RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(
            retry_after(&map, SystemTime::now()),
            Hint::After(Duration::from_secs(7)),
            "the well-formed one of two"
        );
    }
}
