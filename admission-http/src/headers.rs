//! What a request's headers say about its caller: its criticality and how
//! long it will wait, read under the app's [`Trust`] in its peers.
//!
//! This module owns the header names, their strict parsing and the trust
//! boundary, shared by every adapter so that each reads the same headers the
//! same way. It must never fail a request: an unknown criticality is the
//! default, and a malformed or repeated budget is ignored and reported (for
//! a counter), never answered with an error; it never lets an untrusted
//! header raise a caller's priority or lengthen its wait; and it never keeps
//! a header's text.

use std::time::Duration;

use admission_core::{Caller, Criticality};
use tokio::time::Instant;

/// Whom the app trusts to say how important a request is and how long its
/// client will wait.
///
/// Under [`Trust::Nobody`] (the default), a request's headers can only
/// lower its own priority and shorten its own wait: `critical` is read as
/// `default` (and counted), `sheddable` is honoured, and a budget refuses
/// at once a call that could not be answered in time or shortens a wait,
/// but never lengthens a queued wait past the queue's own limit. An outside
/// client cannot claim the slots, the queue places or the patience the
/// server keeps for its own critical work.
///
/// [`Trust::Peers`] honours the headers as sent: for a service whose only
/// clients are its own peers, or behind a mesh or balancer that strips
/// these headers from outside requests at the edge (as Envoy strips its
/// `x-envoy-*` headers from untrusted clients).
///
/// # Examples
///
/// ```
/// use admission_core::Criticality;
/// use admission_http::{CRITICALITY_HEADER, RequestCaller, Trust};
///
/// let claim = [(CRITICALITY_HEADER, &b"critical"[..])];
/// let outsider = RequestCaller::from_headers(claim, Trust::Nobody);
/// assert_eq!(outsider.caller.criticality(), Criticality::Default);
/// assert!(outsider.lowered);
///
/// let peer = RequestCaller::from_headers(claim, Trust::Peers);
/// assert_eq!(peer.caller.criticality(), Criticality::Critical);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Trust {
    /// Headers may lower a request's priority and shorten its wait, never
    /// raise or lengthen them (the default).
    #[default]
    Nobody,
    /// Headers are honoured as sent: the app's peers are trusted.
    Peers,
}

/// The request header naming the caller's criticality: `critical`,
/// `default` or `sheddable` (ASCII case-insensitive; anything else is
/// `default`).
pub const CRITICALITY_HEADER: &str = "x-admission-criticality";

/// This project's own budget header: the milliseconds the client will wait
/// for its answer, 1 to 9 ASCII digits (`x-admission-budget-ms: 250`). A
/// client or proxy that knows its timeout sets it; the server refuses at
/// once what could not be answered in time.
pub const BUDGET_HEADER: &str = "x-admission-budget-ms";

/// The budget Envoy's router sets on each request it forwards: the route's
/// timeout in milliseconds, same grammar as [`BUDGET_HEADER`].
pub const ENVOY_TIMEOUT_HEADER: &str = "x-envoy-expected-rq-timeout-ms";

/// The response header carrying a refusal's retry hint in milliseconds
/// beside `Retry-After` (whole seconds by RFC 9110, so at least 1 s even
/// for work that takes 20 ms): the pool's expected time until a slot
/// frees, 1 to 10 ASCII digits, at least 1; 1000 while the pool has seen
/// no work. `admission-client` waits this rather than `Retry-After` when
/// both are present; a client that knows only `Retry-After` loses nothing.
pub const RETRY_AFTER_MS_HEADER: &str = "x-admission-retry-after-ms";

/// The response header naming a refusal's code (`ADMISSION_SATURATED`,
/// `ADMISSION_BUDGET_TOO_SHORT`, ...) beside `Retry-After`, so that a
/// client knows without reading the body whether a retry with the same
/// deadline could ever be admitted.
pub const REFUSAL_HEADER: &str = "x-admission-refusal";

/// gRPC's deadline header (see [`parse_grpc_timeout`]).
pub const GRPC_TIMEOUT_HEADER: &str = "grpc-timeout";

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
pub struct Malformed(());

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("malformed budget header value")
    }
}

impl std::error::Error for Malformed {}

/// The longest budget in milliseconds the budget headers carry: 9 digits,
/// about 11.5 days.
const MAX_MS_DIGITS: usize = 9;

/// The digits `grpc-timeout` allows.
const MAX_GRPC_DIGITS: usize = 8;

/// Parses a millisecond budget ([`BUDGET_HEADER`], [`ENVOY_TIMEOUT_HEADER`]):
/// 1 to 9 ASCII digits and nothing else (no sign, no space, no unit).
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
    digits(value, MAX_MS_DIGITS).map(Duration::from_millis)
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
    let n = digits(number, MAX_GRPC_DIGITS)?;
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

fn digits(value: &[u8], max: usize) -> Result<u64, Malformed> {
    if value.is_empty() || value.len() > max || !value.iter().all(u8::is_ascii_digit) {
        return Err(Malformed(()));
    }
    Ok(value
        .iter()
        .fold(0, |n, digit| n * 10 + u64::from(digit - b'0')))
}

/// The caller a request's headers describe, under the app's [`Trust`].
///
/// # Examples
///
/// ```
/// use admission_core::Criticality;
/// use admission_http::{RequestCaller, Trust};
///
/// let read = RequestCaller::from_headers([
///     ("x-admission-criticality", &b"sheddable"[..]),
///     ("x-envoy-expected-rq-timeout-ms", b"15000"),
///     ("x-admission-budget-ms", b"250"),
/// ], Trust::Nobody);
/// assert_eq!(read.caller.criticality(), Criticality::Sheddable, "lowering is always honoured");
/// assert!(read.caller.remaining().unwrap().as_millis() <= 250, "the shorter budget wins");
/// assert!(read.caller.deadline_is_asserted(), "it may shorten a wait, never lengthen one");
/// assert!(!read.malformed && !read.lowered);
///
/// let bad = RequestCaller::from_headers([("x-admission-budget-ms", &b"soon"[..])], Trust::Nobody);
/// assert!(bad.malformed && bad.caller.deadline().is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestCaller {
    /// The criticality named (default when absent or unknown, and for a
    /// `critical` claim nobody trusts) with the shortest well-formed budget
    /// as its deadline.
    pub caller: Caller,
    /// A budget header was malformed or repeated and was ignored; adapters
    /// count these.
    pub malformed: bool,
    /// The request claimed `critical` and was read as `default`, since the
    /// app trusts nobody to raise their own priority; adapters count these.
    pub lowered: bool,
}

impl RequestCaller {
    /// Reads the criticality from [`CRITICALITY_HEADER`] (its first value)
    /// and the deadline from the shortest of [`BUDGET_HEADER`],
    /// [`ENVOY_TIMEOUT_HEADER`] and [`GRPC_TIMEOUT_HEADER`], counted from
    /// now, under `trust`. `headers` are (name, value) pairs, names in any
    /// case; a budget header that appears twice is ignored as malformed.
    pub fn from_headers<'a>(
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        trust: Trust,
    ) -> Self {
        let mut criticality = None;
        let mut budgets: [Budget; 3] = [Budget::Absent; 3];
        for (name, value) in headers {
            if criticality.is_none() && name.eq_ignore_ascii_case(CRITICALITY_HEADER) {
                criticality = Some(
                    std::str::from_utf8(value)
                        .ok()
                        .and_then(Criticality::parse)
                        .unwrap_or_default(),
                );
            } else if let Some(i) = [BUDGET_HEADER, ENVOY_TIMEOUT_HEADER, GRPC_TIMEOUT_HEADER]
                .iter()
                .position(|budget| name.eq_ignore_ascii_case(budget))
            {
                let parsed = if i == 2 {
                    parse_grpc_timeout(value)
                } else {
                    parse_budget_ms(value)
                };
                budgets[i] = match (budgets[i], parsed) {
                    (Budget::Absent, Ok(budget)) => Budget::Is(budget),
                    _ => Budget::Malformed,
                };
            }
        }
        let claimed = criticality.unwrap_or_default();
        let lowered = trust == Trust::Nobody && claimed < Criticality::Default;
        let mut caller = Caller::new(if lowered {
            Criticality::Default
        } else {
            claimed
        });
        let shortest = budgets
            .iter()
            .filter_map(|budget| match budget {
                Budget::Is(budget) => Some(*budget),
                _ => None,
            })
            .min();
        if let Some(budget) = shortest {
            let now = Instant::now();
            let deadline = now.checked_add(budget).unwrap_or(now);
            caller = match trust {
                Trust::Nobody => caller.with_asserted_deadline(deadline),
                Trust::Peers => caller.with_deadline(deadline),
            };
        }
        RequestCaller {
            caller,
            malformed: budgets.contains(&Budget::Malformed),
            lowered,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    Absent,
    Is(Duration),
    Malformed,
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
        assert_eq!(bad.to_string(), "malformed budget header value");
    }

    #[test]
    fn a_repeated_budget_is_malformed_and_ignored_while_the_others_count() {
        let read = RequestCaller::from_headers(
            [
                ("X-Admission-Budget-Ms", &b"100"[..]),
                ("x-admission-budget-ms", b"100"),
                ("grpc-timeout", b"2S"),
            ],
            Trust::Peers,
        );
        assert!(read.malformed);
        let left = read.caller.remaining().unwrap();
        assert!(left > Duration::from_millis(1500) && left <= Duration::from_secs(2));
    }

    #[test]
    fn each_criticality_is_read_by_its_name_in_any_case() {
        for level in Criticality::ALL {
            let upper = level.as_str().to_ascii_uppercase();
            let read =
                RequestCaller::from_headers([(CRITICALITY_HEADER, upper.as_bytes())], Trust::Peers);
            assert_eq!(read.caller.criticality(), level);
            assert_eq!(Criticality::parse(level.as_str()), Some(level));
        }
        assert_eq!(Criticality::parse("critical "), None);
    }

    #[test]
    fn an_unknown_or_repeated_criticality_is_never_an_error() {
        let read = RequestCaller::from_headers(
            [
                (CRITICALITY_HEADER, &b"<script>"[..]),
                (CRITICALITY_HEADER, b"critical"),
            ],
            Trust::Peers,
        );
        assert_eq!(
            read.caller.criticality(),
            Criticality::Default,
            "the first wins"
        );
        assert!(!read.malformed);
        let none = RequestCaller::from_headers([], Trust::Nobody);
        assert_eq!(none.caller, Caller::default());
    }

    #[test]
    fn nobody_raises_their_own_priority_or_lengthens_their_own_wait_unless_trusted() {
        let claim = [
            (CRITICALITY_HEADER, &b"Critical"[..]),
            (BUDGET_HEADER, b"60000"),
        ];
        let outsider = RequestCaller::from_headers(claim, Trust::Nobody);
        assert_eq!(outsider.caller.criticality(), Criticality::Default);
        assert!(outsider.lowered && !outsider.malformed);
        assert!(outsider.caller.deadline_is_asserted());
        assert!(outsider.caller.remaining().unwrap() > Duration::from_secs(59));

        let peer = RequestCaller::from_headers(claim, Trust::Peers);
        assert_eq!(peer.caller.criticality(), Criticality::Critical);
        assert!(!peer.lowered);
        assert!(!peer.caller.deadline_is_asserted());

        for trust in [Trust::Nobody, Trust::Peers] {
            let shed =
                RequestCaller::from_headers([(CRITICALITY_HEADER, &b"sheddable"[..])], trust);
            assert_eq!(
                shed.caller.criticality(),
                Criticality::Sheddable,
                "{trust:?}"
            );
            assert!(!shed.lowered);
        }
    }
}
