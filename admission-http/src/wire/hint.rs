//! The retry hints a refusal carries, written and read by one grammar each:
//! `Retry-After`, [`RETRY_AFTER_MS_HEADER`](super::RETRY_AFTER_MS_HEADER) and [`RETRY_PUSHBACK_MS`](super::RETRY_PUSHBACK_MS).
//!
//! This module owns [`Hint`], the rounding of a millisecond hint to
//! `Retry-After`'s whole seconds, the values the server writes, and the one
//! reader of each hint that `admission-client` and the tonic adapter's
//! `status::pushback` both call, so that they cannot disagree. It must never read a
//! hint as an earlier retry than the server (or a proxy on the way) asked
//! for, and never keep a header's text.
//!
//! The grammars, and what a repeat means:
//!
//! | hint | grammar | malformed | repeated |
//! | --- | --- | --- | --- |
//! | `Retry-After` (RFC 9110) | delay-seconds (1 to 10 digits) or an HTTP-date | no hint | the longest well-formed wait |
//! | [`RETRY_AFTER_MS_HEADER`](super::RETRY_AFTER_MS_HEADER) | a non-negative integer of milliseconds with no unnecessary leading zero, at most `u32::MAX` | no hint (`Retry-After` decides) | the longest well-formed wait |
//! | [`RETRY_PUSHBACK_MS`](super::RETRY_PUSHBACK_MS) (gRFC A6) | a non-negative `int32` of milliseconds with no unnecessary leading zero | do not retry | do not retry |
//!
//! A6 reads a negative or unparseable pushback as "do not retry"; a
//! repeated trailer has no single value, so it is unparseable, and reading
//! it as "do not retry" is also the safe choice (a retry storm is worse
//! than a call not retried). An HTTP hint that repeats was most likely
//! added by a proxy on the way: the longest wait is never earlier than any
//! of them asked for.

use std::time::{Duration, SystemTime};

use super::parse::{canonical, digits};

/// What the server said about a retry.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::wire::{Hint, pushback};
///
/// assert_eq!(pushback([&b"250"[..]]), Hint::After(Duration::from_millis(250)));
/// assert_eq!(pushback([&b"-1"[..]]), Hint::Stop);
/// assert_eq!(pushback([]), Hint::None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hint {
    /// Nothing: the client backs off on its own.
    None,
    /// Not before this long from the answer's arrival.
    After(Duration),
    /// Do not retry (a negative, malformed or repeated pushback).
    Stop,
}

/// A hint of `millis` milliseconds as the whole seconds of `Retry-After`:
/// rounded up, at least 1. The one rounding the server's answers and the
/// client's reading use, so the seconds and the milliseconds a refusal
/// sends always agree.
///
/// # Examples
///
/// ```
/// use admission_http::wire::retry_after_secs;
///
/// assert_eq!(retry_after_secs(0), 1);
/// assert_eq!(retry_after_secs(20), 1);
/// assert_eq!(retry_after_secs(1000), 1);
/// assert_eq!(retry_after_secs(1001), 2);
/// ```
#[inline]
#[must_use]
pub const fn retry_after_secs(millis: u32) -> u32 {
    let secs = millis.div_ceil(1000);
    if secs == 0 { 1 } else { secs }
}

/// The two headers an HTTP refusal carries for a hint of `millis`
/// milliseconds, as (name, number): `retry-after` in whole seconds
/// ([`retry_after_secs`]) and [`RETRY_AFTER_MS_HEADER`](super::RETRY_AFTER_MS_HEADER)
/// as is. The problem document writes exactly these.
///
/// # Examples
///
/// ```
/// use admission_http::wire::http_hints;
///
/// assert_eq!(http_hints(20), [("retry-after", 1), ("x-admission-retry-after-ms", 20)]);
/// ```
pub const fn http_hints(millis: u32) -> [(&'static str, u32); 2] {
    [
        ("retry-after", retry_after_secs(millis)),
        (super::RETRY_AFTER_MS_HEADER, millis),
    ]
}

/// The pushback the server writes for a hint of `millis` milliseconds: the
/// hint, held to A6's `int32` (a longer one would read as "do not retry").
///
/// # Examples
///
/// ```
/// use admission_http::wire::pushback_ms;
///
/// assert_eq!(pushback_ms(250), 250);
/// assert_eq!(pushback_ms(u32::MAX), i32::MAX as u32);
/// ```
#[inline]
#[must_use]
pub const fn pushback_ms(millis: u32) -> u32 {
    if millis > i32::MAX as u32 {
        i32::MAX as u32
    } else {
        millis
    }
}

/// The most digits of a delay-seconds `Retry-After` read.
const MAX_SECS_DIGITS: usize = 10;

/// `Retry-After`'s values (delta-seconds or an HTTP-date, read against
/// `now`): the longest well-formed wait, or no hint.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use admission_http::wire::{Hint, retry_after};
///
/// let now = SystemTime::UNIX_EPOCH;
/// assert_eq!(retry_after([&b"2"[..]], now), Hint::After(Duration::from_secs(2)));
/// assert_eq!(retry_after([&b"Thu, 01 Jan 1970 00:01:00 GMT"[..]], now), Hint::After(Duration::from_secs(60)));
/// assert_eq!(retry_after([&b"soon"[..]], now), Hint::None);
/// assert_eq!(retry_after([&b"2"[..], b"30"], now), Hint::After(Duration::from_secs(30)));
/// ```
pub fn retry_after<'a>(values: impl IntoIterator<Item = &'a [u8]>, now: SystemTime) -> Hint {
    longest(values, |value| {
        if let Some(secs) = digits(value, MAX_SECS_DIGITS) {
            return Some(Duration::from_secs(secs));
        }
        let date = httpdate::parse_http_date(std::str::from_utf8(value).ok()?).ok()?;
        Some(date.duration_since(now).unwrap_or(Duration::ZERO))
    })
}

/// [`RETRY_AFTER_MS_HEADER`](super::RETRY_AFTER_MS_HEADER)'s values: the longest well-formed wait, or no
/// hint.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::wire::{Hint, retry_after_ms};
///
/// assert_eq!(retry_after_ms([&b"20"[..]]), Hint::After(Duration::from_millis(20)));
/// for malformed in [&b"-1"[..], b"020", b"4294967296"] {
///     assert_eq!(retry_after_ms([malformed]), Hint::None, "{malformed:?}");
/// }
/// ```
pub fn retry_after_ms<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Hint {
    longest(values, |value| {
        canonical(value, u64::from(u32::MAX)).map(Duration::from_millis)
    })
}

/// [`RETRY_PUSHBACK_MS`](super::RETRY_PUSHBACK_MS)'s values, as gRFC A6 reads them: one non-negative
/// `int32` is the wait; a negative, malformed or repeated value says do not
/// retry; none leaves the wait to the client.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::wire::{Hint, pushback};
///
/// assert_eq!(pushback([&b"0"[..]]), Hint::After(Duration::ZERO));
/// assert_eq!(pushback([&b"2147483647"[..]]), Hint::After(Duration::from_millis(2_147_483_647)));
/// for stop in [&[&b"2147483648"[..]][..], &[b"007"], &[b"-1"], &[b""], &[b"10", b"10"]] {
///     assert_eq!(pushback(stop.iter().copied()), Hint::Stop, "{stop:?}");
/// }
/// ```
pub fn pushback<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Hint {
    let mut values = values.into_iter();
    let Some(value) = values.next() else {
        return Hint::None;
    };
    if values.next().is_some() {
        return Hint::Stop;
    }
    canonical(value, i32::MAX as u64)
        .map_or(Hint::Stop, |ms| Hint::After(Duration::from_millis(ms)))
}

/// The longest of the waits `read` finds in `values`; no hint when none is
/// well-formed.
fn longest<'a>(
    values: impl IntoIterator<Item = &'a [u8]>,
    read: impl Fn(&[u8]) -> Option<Duration>,
) -> Hint {
    values
        .into_iter()
        .filter_map(read)
        .max()
        .map_or(Hint::None, Hint::After)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_server_writes_reads_back_as_itself() {
        for ms in [1, 20, 999, 1000, 1001, 30_000, i32::MAX as u32, u32::MAX] {
            let [(_, secs), (_, fine)] = http_hints(ms).map(|(name, n)| (name, n.to_string()));
            let push = pushback_ms(ms).to_string();
            assert_eq!(
                retry_after([secs.as_bytes()], SystemTime::now()),
                Hint::After(Duration::from_secs(u64::from(retry_after_secs(ms))))
            );
            assert_eq!(
                retry_after_ms([fine.as_bytes()]),
                Hint::After(Duration::from_millis(u64::from(ms)))
            );
            assert_eq!(
                pushback([push.as_bytes()]),
                Hint::After(Duration::from_millis(u64::from(pushback_ms(ms)))),
                "a pushback the server writes is never read as do-not-retry: {ms}"
            );
            assert!(u64::from(retry_after_secs(ms)) * 1000 >= u64::from(ms));
        }
    }

    #[test]
    fn a_repeated_http_hint_is_the_longest_and_a_repeated_pushback_stops() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            retry_after([&b"5"[..], b"soon", b"2"], now),
            Hint::After(Duration::from_secs(5))
        );
        assert_eq!(
            retry_after_ms([&b"20"[..], b"1500"]),
            Hint::After(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after([&b"99999999999"[..]], now),
            Hint::None,
            "eleven digits"
        );
        assert_eq!(pushback([&b"20"[..], b"20"]), Hint::Stop);
    }
}
