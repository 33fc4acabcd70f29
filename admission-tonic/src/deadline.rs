//! The caller's deadline, from the `grpc-timeout` header.
//!
//! This module owns [`Deadline`], the strict parser [`parse_timeout`] and
//! its error [`MalformedTimeout`]. It must never accept a value the gRPC
//! over HTTP/2 specification does not allow (1 to 8 ASCII digits, then one
//! of the units `H`, `M`, `S`, `m`, `u`, `n`, nothing else), and never
//! fail a call over one: a malformed value is ignored (and counted by the
//! layer), as if the caller had set no deadline.
//!
//! The deadline is read once, when the layer sees the call, and travels
//! with the request as an extension. Deadline-aware admission (the
//! overload issue) will hand it to the core, which will refuse at once a
//! call whose remaining budget is shorter than the expected wait plus
//! work; until then the layer only parses, counts and exposes it.

use std::fmt;
use std::time::{Duration, Instant};

/// The request header that carries the caller's budget.
pub const GRPC_TIMEOUT: &str = "grpc-timeout";

/// The caller's deadline: the budget its `grpc-timeout` header gave, and
/// the instant that budget runs out, counted from when the layer saw the
/// call.
///
/// The layer inserts it into the request's extensions, so a handler reads
/// it from its [`tonic::Request`] (`request.extensions().get::<Deadline>()`),
/// and a classifier from [`Call::deadline`](crate::Call::deadline). A call
/// without a `grpc-timeout`, or with a malformed one, has none.
///
/// # Examples
///
/// ```
/// use std::time::{Duration, Instant};
/// use admission_tonic::deadline::Deadline;
///
/// let seen = Instant::now();
/// let deadline = Deadline::new(Duration::from_millis(250), seen).unwrap();
/// assert_eq!(deadline.budget(), Duration::from_millis(250));
/// assert_eq!(deadline.instant(), seen + Duration::from_millis(250));
/// assert!(deadline.remaining() <= Duration::from_millis(250));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Deadline {
    budget: Duration,
    at: Instant,
}

impl Deadline {
    /// The deadline `budget` after `seen`, or `None` when that instant is
    /// past what the platform's clock can represent (a budget of thousands
    /// of years, which is no deadline at all).
    pub fn new(budget: Duration, seen: Instant) -> Option<Deadline> {
        seen.checked_add(budget).map(|at| Deadline { budget, at })
    }

    /// The budget the caller sent.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// The instant the budget runs out.
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// What is left of the budget now; zero once it has run out.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether the budget has run out.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use admission_tonic::deadline::Deadline;
    ///
    /// let spent = Deadline::new(Duration::ZERO, Instant::now()).unwrap();
    /// assert!(spent.is_expired());
    /// ```
    pub fn is_expired(&self) -> bool {
        self.at <= Instant::now()
    }
}

/// A `grpc-timeout` value the specification does not allow.
///
/// # Examples
///
/// ```
/// use admission_tonic::deadline::parse_timeout;
///
/// let err = parse_timeout(b"5s").unwrap_err();
/// assert_eq!(err.to_string(), "malformed `grpc-timeout` value");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MalformedTimeout(());

impl fmt::Display for MalformedTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed `grpc-timeout` value")
    }
}

impl std::error::Error for MalformedTimeout {}

/// Parses a `grpc-timeout` value strictly, as the gRPC over HTTP/2
/// specification writes it: `TimeoutValue TimeoutUnit`, where the value is
/// 1 to 8 ASCII digits and the unit one of `H` (hours), `M` (minutes), `S`
/// (seconds), `m` (milliseconds), `u` (microseconds) and `n`
/// (nanoseconds).
///
/// Anything else is malformed: no digits, a ninth digit, a sign, white
/// space, a unit in the wrong case (`s`) or missing, a second unit.
/// Leading zeros are digits like any other. A zero value is accepted, as
/// grpc-go and grpc-java accept it: it is a budget already spent, which
/// deadline-aware admission refuses at once, rather than no budget at all.
///
/// # Errors
///
/// [`MalformedTimeout`] for a value outside that grammar.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_tonic::deadline::parse_timeout;
///
/// assert_eq!(parse_timeout(b"2H"), Ok(Duration::from_secs(2 * 3600)));
/// assert_eq!(parse_timeout(b"30M"), Ok(Duration::from_secs(30 * 60)));
/// assert_eq!(parse_timeout(b"10S"), Ok(Duration::from_secs(10)));
/// assert_eq!(parse_timeout(b"250m"), Ok(Duration::from_millis(250)));
/// assert_eq!(parse_timeout(b"99999999u"), Ok(Duration::from_micros(99_999_999)));
/// assert_eq!(parse_timeout(b"1000n"), Ok(Duration::from_nanos(1000)));
///
/// for bad in [&b""[..], b"S", b"5", b"5s", b"+5S", b" 5S", b"5S ", b"123456789m", b"5mS"] {
///     assert!(parse_timeout(bad).is_err(), "{bad:?} is malformed");
/// }
/// ```
pub fn parse_timeout(value: &[u8]) -> Result<Duration, MalformedTimeout> {
    admission_core::http::parse_grpc_timeout(value).map_err(|_| MalformedTimeout(()))
}

/// What a request's `grpc-timeout` headers said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timeout {
    /// No header: the caller set no deadline.
    Absent,
    /// One well-formed header.
    Budget(Duration),
    /// A malformed value, or the header more than once.
    Malformed,
}

impl Timeout {
    /// Reads the `grpc-timeout` headers of a request.
    pub(crate) fn of(headers: &http::HeaderMap) -> Timeout {
        let mut values = headers.get_all(GRPC_TIMEOUT).iter();
        match (values.next(), values.next()) {
            (None, _) => Timeout::Absent,
            (Some(value), None) => match parse_timeout(value.as_bytes()) {
                Ok(budget) => Timeout::Budget(budget),
                Err(MalformedTimeout(())) => Timeout::Malformed,
            },
            // Two budgets: which one the caller meant is anybody's guess.
            (Some(_), Some(_)) => Timeout::Malformed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_of_the_spec_parses() {
        let cases: [(&[u8], Duration); 7] = [
            (b"1H", Duration::from_secs(3600)),
            (b"1M", Duration::from_secs(60)),
            (b"1S", Duration::from_secs(1)),
            (b"1m", Duration::from_millis(1)),
            (b"1u", Duration::from_micros(1)),
            (b"1n", Duration::from_nanos(1)),
            (b"00000007S", Duration::from_secs(7)),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_timeout(value), Ok(expected), "{value:?}");
        }
    }

    #[test]
    fn the_largest_value_of_every_unit_does_not_overflow() {
        for unit in [b'H', b'M', b'S', b'm', b'u', b'n'] {
            let mut value = b"99999999".to_vec();
            value.push(unit);
            assert!(parse_timeout(&value).is_ok(), "{unit}");
        }
        assert_eq!(
            parse_timeout(b"99999999H"),
            Ok(Duration::from_secs(99_999_999 * 3600))
        );
    }

    #[test]
    fn anything_outside_the_grammar_is_malformed() {
        let bad: [&[u8]; 16] = [
            b"",
            b"H",
            b"10",
            b"10s",
            b"10h",
            b"10x",
            b"-1S",
            b"+1S",
            b"1.5S",
            b" 1S",
            b"1S ",
            b"1 S",
            b"123456789S",
            b"1SS",
            b"\xff1S",
            b"1\xffS",
        ];
        for value in bad {
            assert_eq!(
                parse_timeout(value),
                Err(MalformedTimeout(())),
                "{value:?} is malformed"
            );
        }
    }

    #[test]
    fn zero_is_a_spent_budget_not_a_malformed_one() {
        assert_eq!(parse_timeout(b"0n"), Ok(Duration::ZERO));
        let spent = Deadline::new(Duration::ZERO, Instant::now()).unwrap();
        assert!(spent.is_expired());
        assert_eq!(spent.remaining(), Duration::ZERO);
    }

    #[test]
    fn the_header_is_read_once_and_a_repeated_one_is_malformed() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(Timeout::of(&headers), Timeout::Absent);
        headers.insert(GRPC_TIMEOUT, http::HeaderValue::from_static("20m"));
        assert_eq!(
            Timeout::of(&headers),
            Timeout::Budget(Duration::from_millis(20))
        );
        headers.append(GRPC_TIMEOUT, http::HeaderValue::from_static("20m"));
        assert_eq!(Timeout::of(&headers), Timeout::Malformed);
        headers.insert(GRPC_TIMEOUT, http::HeaderValue::from_static("20 m"));
        assert_eq!(Timeout::of(&headers), Timeout::Malformed);
    }
}
