//! The bound on how long a leased response may wait for its consumer.
//!
//! This module owns [`ProgressTimeout`], the [`Stalled`] error a stalled
//! stream ends with, and the one count and throttled log of stalls,
//! responses' and request bodies' alike ([`stalled`]); the watchdog that
//! takes a stalled response's lease back is `watchdog`'s. It must never
//! log per stream.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use admission_core::ConfigError;

/// The stable code of a response ended because its consumer stopped
/// reading ([`Stalled`]).
pub const STREAM_STALLED: &str = "ADMISSION_STREAM_STALLED";

/// How long a leased response may go without its consumer asking for the
/// next frame before its lease is taken back and the response ends: the
/// bound on the capacity a client that never reads can hold.
///
/// The clock runs from each frame handed over until the next poll for one;
/// a response whose own stream is slow (the consumer asked, the producer
/// has nothing yet) is not stalled. The default is
/// [`ProgressTimeout::DEFAULT`], 30 s.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::body::ProgressTimeout;
///
/// assert_eq!(ProgressTimeout::default().get(), Duration::from_secs(30));
/// assert_eq!(ProgressTimeout::new(Duration::from_secs(5)).unwrap().get(), Duration::from_secs(5));
/// assert!(ProgressTimeout::new(Duration::ZERO).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProgressTimeout(Duration);

impl ProgressTimeout {
    /// 30 s: far past any consumer that reads, short enough that a client
    /// that never does holds a slot for half a minute, not for ever.
    pub const DEFAULT: ProgressTimeout = ProgressTimeout(Duration::from_secs(30));

    /// A bound of `bound`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroSetting`] (`progress_timeout`) for a zero bound, which would
    /// end every body whose reader is not already waiting.
    pub fn new(bound: Duration) -> Result<ProgressTimeout, ConfigError> {
        if bound.is_zero() {
            Err(ConfigError::ZeroSetting {
                setting: "progress_timeout",
            })
        } else {
            Ok(ProgressTimeout(bound))
        }
    }

    /// The bound.
    pub const fn get(self) -> Duration {
        self.0
    }
}

impl Default for ProgressTimeout {
    fn default() -> Self {
        ProgressTimeout::DEFAULT
    }
}

/// The error a body under the progress bound ends with: a leased response
/// whose consumer asks for a frame after its [`ProgressTimeout`] took the
/// lease back (hyper resets the stream on HTTP/2, closes the connection on
/// HTTP/1), or a request body whose client sent nothing for the bound
/// while the handler waited (the handler's read fails, its call answers,
/// and the lease goes with the answer). Over gRPC the call's status message
/// starts with `ADMISSION_STREAM_STALLED`.
///
/// # Examples
///
/// ```
/// use admission_http::body::{STREAM_STALLED, Stalled};
///
/// assert!(Stalled.to_string().starts_with(STREAM_STALLED));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalled;

impl fmt::Display for Stalled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{STREAM_STALLED}: the stream made no progress within the progress bound; it was ended"
        )
    }
}

impl std::error::Error for Stalled {}

/// Which way a stalled stream was going.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// A response whose consumer stopped reading.
    Response,
    /// A request body whose client stopped sending.
    Request,
}

impl Side {
    fn as_str(self) -> &'static str {
        match self {
            Side::Response => "response",
            Side::Request => "request",
        }
    }
}

/// At most one log line per this interval about stalled streams.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The stalls since the last line, and when the next line may be written.
static LOG: Mutex<Throttle> = Mutex::new(Throttle {
    count: 0,
    next: None,
});

#[derive(Debug)]
struct Throttle {
    count: u64,
    next: Option<std::time::Instant>,
}

impl Throttle {
    /// Counts one stall at `now`: the count to log when a line is due.
    fn count(&mut self, now: std::time::Instant) -> Option<u64> {
        self.count += 1;
        if self.next.is_some_and(|next| now < next) {
            return None;
        }
        self.next = Some(now + LOG_EVERY);
        Some(std::mem::take(&mut self.count))
    }
}

/// Counts a stalled stream; the first is logged at once, the rest once
/// per [`LOG_EVERY`] with how many stalled since the last line.
pub(crate) fn stalled(side: Side) {
    let due = LOG
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .count(std::time::Instant::now());
    if let Some(count) = due {
        tracing::warn!(
            code = STREAM_STALLED,
            side = side.as_str(),
            count,
            "streams ended by the progress bound (their peer stopped reading or sending), \
             at most one line per {} s",
            LOG_EVERY.as_secs()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::{LOG_EVERY, Throttle};

    #[test]
    fn stalls_are_logged_once_per_interval_with_the_count_since_the_last_line() {
        let mut throttle = Throttle {
            count: 0,
            next: None,
        };
        let start = std::time::Instant::now();
        assert_eq!(throttle.count(start), Some(1), "the first at once");
        for _ in 0..15 {
            assert_eq!(throttle.count(start + LOG_EVERY / 2), None, "then counted");
        }
        assert_eq!(
            throttle.count(start + LOG_EVERY),
            Some(16),
            "the next line carries them"
        );
    }
}
