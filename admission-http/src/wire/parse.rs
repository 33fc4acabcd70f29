//! One grammar, one parser (and where a client writes it, one writer),
//! for every header value but the retry hints: the budgets,
//! `grpc-timeout`, the refusal's code and `grpc-status`.
//!
//! This module owns [`Malformed`], the strict parsers of
//! [`BUDGET_HEADER`](super::BUDGET_HEADER),
//! [`ENVOY_TIMEOUT_HEADER`](super::ENVOY_TIMEOUT_HEADER),
//! [`GRPC_TIMEOUT_HEADER`](super::GRPC_TIMEOUT_HEADER),
//! [`FLOW_HEADER`](super::FLOW_HEADER),
//! [`REFUSAL_HEADER`](super::REFUSAL_HEADER) and
//! [`GRPC_STATUS`](super::GRPC_STATUS), the writers of the two budgets a
//! client sends, and the digit readers the retry hints share. It must
//! never accept what its grammar does not say (no sign, no space, no unit
//! in another case), never write what its parser would refuse, never
//! overflow, and never keep the text it read.

use std::time::Duration;

use admission_core::Code;

/// A header value outside its grammar.
///
/// # Examples
///
/// ```
/// use admission_http::parse_budget_ms;
///
/// assert!(parse_budget_ms(b"-5").is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[doc(hidden)]
pub struct Malformed(());

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("header value outside its grammar")
    }
}

impl std::error::Error for Malformed {}

/// The longest budget in milliseconds the budget headers carry: 9 digits,
/// about 11.5 days.
const MAX_MS_DIGITS: usize = 9;

/// The digits `grpc-timeout` allows.
const MAX_GRPC_DIGITS: usize = 8;

/// Parses a millisecond budget ([`BUDGET_HEADER`](super::BUDGET_HEADER),
/// [`ENVOY_TIMEOUT_HEADER`](super::ENVOY_TIMEOUT_HEADER)): 1 to 9 ASCII
/// digits and nothing else (no sign, no space, no unit).
///
/// # Errors
///
/// [`Malformed`] for anything else.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::parse_budget_ms;
///
/// assert_eq!(parse_budget_ms(b"250"), Ok(Duration::from_millis(250)));
/// for bad in [&b""[..], b" 250", b"250ms", b"+1", b"1234567890", b"2.5"] {
///     assert!(parse_budget_ms(bad).is_err(), "{bad:?}");
/// }
/// ```
pub fn parse_budget_ms(value: &[u8]) -> Result<Duration, Malformed> {
    digits(value, MAX_MS_DIGITS)
        .map(Duration::from_millis)
        .ok_or(Malformed(()))
}

/// Parses a `grpc-timeout` value strictly, as the gRPC over HTTP/2
/// specification writes it: 1 to 8 ASCII digits and one unit, `H`, `M`,
/// `S`, `m`, `u` or `n`. A zero value is a budget already spent (refused at
/// once), not the absence of one.
///
/// # Errors
///
/// [`Malformed`] for anything else: no digits, a ninth digit, a sign, white
/// space, a unit in the wrong case or missing, a second unit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::parse_grpc_timeout;
///
/// assert_eq!(parse_grpc_timeout(b"2H"), Ok(Duration::from_secs(7200)));
/// assert_eq!(parse_grpc_timeout(b"250m"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_grpc_timeout(b"1000n"), Ok(Duration::from_nanos(1000)));
/// for bad in [&b""[..], b"S", b"5", b"5s", b"+5S", b" 5S", b"123456789m", b"5mS"] {
///     assert!(parse_grpc_timeout(bad).is_err(), "{bad:?}");
/// }
/// ```
pub fn parse_grpc_timeout(value: &[u8]) -> Result<Duration, Malformed> {
    let Some((&unit, number)) = value.split_last() else {
        return Err(Malformed(()));
    };
    // At most 8 digits: 99 999 999 hours (about 3.6e11 s) overflows nothing.
    let n = digits(number, MAX_GRPC_DIGITS).ok_or(Malformed(()))?;
    Ok(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return Err(Malformed(())),
    })
}

/// The longest flow key [`FLOW_HEADER`](super::FLOW_HEADER) carries.
pub const MAX_FLOW_LEN: usize = 64;

/// Parses a flow key ([`FLOW_HEADER`](super::FLOW_HEADER)): 1 to
/// [`MAX_FLOW_LEN`] characters, each an ASCII letter, digit, `-`, `_`, `.`
/// or `:`, and nothing else (no space, no quote, no markup). The key is
/// handed back as it was sent (case kept), for hashing at once; it is never
/// kept, echoed or logged.
///
/// # Errors
///
/// [`Malformed`] for anything else: empty, longer than 64, or any other
/// byte.
///
/// # Examples
///
/// ```
/// use admission_http::wire::parse_flow;
///
/// assert_eq!(parse_flow(b"tenant-42"), Ok("tenant-42"));
/// assert_eq!(parse_flow(b"org:acme.eu_1"), Ok("org:acme.eu_1"));
/// for bad in [&b""[..], b" acme", b"a b", b"<script>", b"acme/1", "caf\u{e9}".as_bytes()] {
///     assert!(parse_flow(bad).is_err(), "{bad:?}");
/// }
/// assert!(parse_flow(&[b'a'; 64]).is_ok());
/// assert!(parse_flow(&[b'a'; 65]).is_err());
/// ```
pub fn parse_flow(value: &[u8]) -> Result<&str, Malformed> {
    let allowed = |byte: &u8| byte.is_ascii_alphanumeric() || b"-_.:".contains(byte);
    if value.is_empty() || value.len() > MAX_FLOW_LEN || !value.iter().all(allowed) {
        return Err(Malformed(()));
    }
    std::str::from_utf8(value).map_err(|_| Malformed(()))
}

/// The budget header's value for `left`: whole milliseconds, rounded down
/// (the server never hears of time the client lacks), at most 9 digits.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::wire::{budget_ms_value, parse_budget_ms};
///
/// assert_eq!(budget_ms_value(Duration::from_micros(2500)), 2);
/// let value = budget_ms_value(Duration::MAX).to_string();
/// assert!(parse_budget_ms(value.as_bytes()).is_ok());
/// ```
pub fn budget_ms_value(left: Duration) -> u64 {
    u64::try_from(left.as_millis())
        .unwrap_or(u64::MAX)
        .min(10u64.pow(MAX_MS_DIGITS as u32) - 1)
}

/// The `grpc-timeout` value for `left`, rounded down: milliseconds while
/// they fit 8 digits, whole seconds past that.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::wire::{grpc_timeout_value, parse_grpc_timeout};
///
/// assert_eq!(grpc_timeout_value(Duration::from_micros(2500)), "2m");
/// assert_eq!(grpc_timeout_value(Duration::from_secs(200_000)), "200000S");
/// let value = grpc_timeout_value(Duration::MAX);
/// assert!(parse_grpc_timeout(value.as_bytes()).is_ok());
/// ```
pub fn grpc_timeout_value(left: Duration) -> String {
    let ms = budget_ms_value(left);
    if ms < 10u64.pow(MAX_GRPC_DIGITS as u32) {
        format!("{ms}m")
    } else {
        format!("{}S", ms / 1000)
    }
}

/// The code a [`REFUSAL_HEADER`](super::REFUSAL_HEADER) names: one of
/// [`Code::ALL`]'s stable strings, exactly.
///
/// # Examples
///
/// ```
/// use admission_core::Code;
/// use admission_http::wire::refusal_code;
///
/// assert_eq!(refusal_code(b"ADMISSION_BUDGET_TOO_SHORT"), Some(Code::BudgetTooShort));
/// assert_eq!(refusal_code(b"admission_budget_too_short"), None);
/// ```
pub fn refusal_code(value: &[u8]) -> Option<Code> {
    Code::ALL
        .into_iter()
        .find(|code| code.as_str().as_bytes() == value)
}

/// A [`GRPC_STATUS`](super::GRPC_STATUS) value: 1 to 5 ASCII digits within
/// `u16`.
///
/// # Examples
///
/// ```
/// use admission_http::wire::grpc_status;
///
/// assert_eq!(grpc_status(b"14"), Some(14));
/// assert_eq!(grpc_status(b"+14"), None);
/// ```
pub fn grpc_status(value: &[u8]) -> Option<u16> {
    digits(value, 5).and_then(|n| u16::try_from(n).ok())
}

/// 1 to `max` ASCII digits (leading zeros allowed) as a number; `max` is at
/// most 19, so nothing overflows.
pub(crate) fn digits(value: &[u8], max: usize) -> Option<u64> {
    if value.is_empty() || value.len() > max || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        value
            .iter()
            .fold(0, |n, digit| n * 10 + u64::from(digit - b'0')),
    )
}

/// A non-negative integer written with no unnecessary leading zero (`0`,
/// or a digit 1 to 9 and more digits), at most `max`: gRFC A6's grammar
/// for the pushback, which the millisecond hint shares.
pub(crate) fn canonical(value: &[u8], max: u64) -> Option<u64> {
    match value {
        [b'0'] => Some(0),
        [b'1'..=b'9', ..] => digits(value, 19).filter(|&n| n <= max),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grpc_unit_and_the_millisecond_budgets_parse_to_their_durations() {
        for (value, expected) in [
            (&b"3H"[..], Duration::from_secs(3 * 3600)),
            (b"3M", Duration::from_secs(180)),
            (b"3S", Duration::from_secs(3)),
            (b"3m", Duration::from_millis(3)),
            (b"3u", Duration::from_micros(3)),
            (b"3n", Duration::from_nanos(3)),
            (b"99999999S", Duration::from_secs(99_999_999)),
        ] {
            assert_eq!(parse_grpc_timeout(value), Ok(expected), "{value:?}");
        }
        assert_eq!(parse_budget_ms(b"0"), Ok(Duration::ZERO));
        assert_eq!(parse_budget_ms(b"007"), Ok(Duration::from_millis(7)));
        assert_eq!(
            parse_budget_ms(b"999999999"),
            Ok(Duration::from_millis(999_999_999))
        );
        assert_eq!(parse_budget_ms(b"250"), Ok(Duration::from_millis(250)));
        for bad in [
            &b""[..],
            b" 250",
            b"250ms",
            b"+1",
            b"1234567890",
            b"2.5",
            b"x",
        ] {
            assert!(parse_budget_ms(bad).is_err(), "{bad:?}");
        }
        for bad in [
            &b""[..],
            b"S",
            b"5",
            b"5s",
            b"+5S",
            b" 5S",
            b"123456789m",
            b"5mS",
        ] {
            assert!(parse_grpc_timeout(bad).is_err(), "{bad:?}");
        }
        let bad = parse_budget_ms(b"x").unwrap_err();
        assert_eq!(bad.to_string(), "header value outside its grammar");
    }

    #[test]
    fn what_a_client_writes_parses_back_no_longer_than_it_had() {
        for left in [
            Duration::ZERO,
            Duration::from_micros(999),
            Duration::from_millis(99_999_999),
            Duration::from_millis(100_000_000),
            Duration::from_millis(999_999_999),
            Duration::from_secs(10_000_000),
            Duration::MAX,
        ] {
            let ms = budget_ms_value(left).to_string();
            let budget = parse_budget_ms(ms.as_bytes()).expect("a budget it parses");
            let timeout = parse_grpc_timeout(grpc_timeout_value(left).as_bytes())
                .expect("a grpc-timeout it parses");
            for read in [budget, timeout] {
                assert!(read <= left, "{read:?} of {left:?}");
                assert!(
                    left < Duration::from_secs(999_999) || read >= Duration::from_secs(999_998),
                    "{read:?} of {left:?}"
                );
            }
        }
    }

    #[test]
    fn canonical_numbers_have_no_leading_zero_sign_or_excess() {
        assert_eq!(canonical(b"0", 10), Some(0));
        assert_eq!(canonical(b"10", 10), Some(10));
        assert_eq!(
            canonical(b"99999999999999999999", u64::MAX),
            None,
            "20 digits"
        );
        for bad in [&b""[..], b"007", b"00", b"-1", b"+1", b"11", b"1 ", b"1e3"] {
            assert_eq!(canonical(bad, 10), None, "{bad:?}");
        }
    }
}
