//! What connection admission counts, and its rate-limited log line.
//!
//! This module owns [`ConnectionStats`], the counters behind them and the
//! one `WARN` line per interval. It must never log a client's address or
//! bytes, and never more than one line per interval however hard clients
//! push.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The stable code of the `WARN` line that counts connections closed or
/// refused by the limits (evictions, refusals, header and write timeouts).
pub const CONNECTION_EVICTED: &str = "ADMISSION_CONNECTION_EVICTED";

/// The stable code of the `WARN` line that counts failed accepts (the
/// process out of descriptors or memory) and the back-off that followed.
pub const ACCEPT_FAILED: &str = "ADMISSION_ACCEPT_FAILED";

/// A snapshot of one accept loop's connections, from
/// [`Connections::stats`](super::Connections::stats).
///
/// # Examples
///
/// ```
/// use admission_http::connection::{ConnectionLimits, Incoming};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let incoming = Incoming::new(tcp, ConnectionLimits::new().with_max_connections(100))?;
/// let stats = incoming.connections().stats();
/// assert_eq!((stats.open, stats.max, stats.refused), (0, 100, 0));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Connections open now (an evicted one counts until it is closed,
    /// a moment later).
    pub open: usize,
    /// The bound on open connections.
    pub max: usize,
    /// Connections accepted, refused ones included.
    pub accepted: u64,
    /// Connections closed at once because every open connection was busy.
    pub refused: u64,
    /// Connections closed to make room for a newcomer (or for a
    /// descriptor) because they had waited longest for a request head.
    pub evicted: u64,
    /// Connections closed because a request head (or the HTTP/2 preface)
    /// was not complete within the header timeout.
    pub header_timeouts: u64,
    /// Kept-alive connections closed after the idle timeout.
    pub idle_timeouts: u64,
    /// Connections closed because a write made no progress for the write
    /// timeout.
    pub write_timeouts: u64,
    /// Accepts that failed (for example when the process was out of
    /// descriptors).
    pub accept_errors: u64,
}

/// The counters one accept loop updates.
#[derive(Debug)]
pub(crate) struct Counters {
    max: usize,
    open: AtomicUsize,
    accepted: AtomicU64,
    refused: AtomicU64,
    evicted: AtomicU64,
    header_timeouts: AtomicU64,
    idle_timeouts: AtomicU64,
    write_timeouts: AtomicU64,
    accept_errors: AtomicU64,
    log: RateLimit,
}

impl Counters {
    pub(crate) fn new(max: usize, log_every: Duration) -> Counters {
        Counters {
            max,
            open: AtomicUsize::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            header_timeouts: AtomicU64::new(0),
            idle_timeouts: AtomicU64::new(0),
            write_timeouts: AtomicU64::new(0),
            accept_errors: AtomicU64::new(0),
            log: RateLimit::new(log_every),
        }
    }

    pub(crate) fn snapshot(&self) -> ConnectionStats {
        ConnectionStats {
            open: self.open.load(Relaxed),
            max: self.max,
            accepted: self.accepted.load(Relaxed),
            refused: self.refused.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            header_timeouts: self.header_timeouts.load(Relaxed),
            idle_timeouts: self.idle_timeouts.load(Relaxed),
            write_timeouts: self.write_timeouts.load(Relaxed),
            accept_errors: self.accept_errors.load(Relaxed),
        }
    }

    pub(crate) fn open(&self) -> usize {
        self.open.load(Relaxed)
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A connection came off the listener.
    pub(crate) fn count_accept(&self) {
        self.accepted.fetch_add(1, Relaxed);
    }

    /// A connection was registered as open.
    pub(crate) fn count_open(&self) {
        self.open.fetch_add(1, Relaxed);
    }

    /// A connection closed.
    pub(crate) fn count_close(&self) {
        self.open.fetch_sub(1, Relaxed);
    }

    /// A connection was closed at once at the bound.
    pub(crate) fn count_refusal(&self) {
        self.refused.fetch_add(1, Relaxed);
        self.report();
    }

    /// A connection was closed to make room.
    pub(crate) fn count_eviction(&self) {
        self.evicted.fetch_add(1, Relaxed);
        self.report();
    }

    /// A request head did not arrive in time.
    pub(crate) fn count_header_timeout(&self) {
        self.header_timeouts.fetch_add(1, Relaxed);
        self.report();
    }

    /// A write made no progress for the write timeout.
    pub(crate) fn count_write_timeout(&self) {
        self.write_timeouts.fetch_add(1, Relaxed);
        self.report();
    }

    /// A kept-alive connection was idle too long: housekeeping, not logged.
    pub(crate) fn count_idle_timeout(&self) {
        self.idle_timeouts.fetch_add(1, Relaxed);
    }

    /// Accepting failed with `err`.
    pub(crate) fn count_accept_error(&self, err: &std::io::Error) {
        self.accept_errors.fetch_add(1, Relaxed);
        let now = self.snapshot();
        if let Some(since) = self.log.due(now) {
            tracing::warn!(
                code = ACCEPT_FAILED,
                class = ?err.kind(),
                os_error = err.raw_os_error().unwrap_or(0),
                accept_errors = now.accept_errors - since.accept_errors,
                refused = now.refused - since.refused,
                evicted = now.evicted - since.evicted,
                header_timeouts = now.header_timeouts - since.header_timeouts,
                write_timeouts = now.write_timeouts - since.write_timeouts,
                open = now.open,
                max = now.max,
                "accepting connections failed; closing the longest-waiting connection, else backing off (counts since the last line, at most one line per interval)"
            );
        }
    }

    /// Logs what was enforced since the last line, if one is due.
    fn report(&self) {
        let now = self.snapshot();
        if let Some(since) = self.log.due(now) {
            tracing::warn!(
                code = CONNECTION_EVICTED,
                refused = now.refused - since.refused,
                evicted = now.evicted - since.evicted,
                header_timeouts = now.header_timeouts - since.header_timeouts,
                write_timeouts = now.write_timeouts - since.write_timeouts,
                accept_errors = now.accept_errors - since.accept_errors,
                open = now.open,
                max = now.max,
                "connection limits enforced (counts since the last line, at most one line per interval)"
            );
        }
    }
}

/// At most one line per interval; each line carries the counts since the
/// one before.
#[derive(Debug)]
struct RateLimit {
    epoch: Instant,
    every: Duration,
    /// Microseconds since `epoch` before which no line is due.
    next: AtomicU64,
    /// The counters when the last line was written.
    last: Mutex<ConnectionStats>,
}

impl RateLimit {
    fn new(every: Duration) -> RateLimit {
        RateLimit {
            epoch: Instant::now(),
            every,
            next: AtomicU64::new(0),
            last: Mutex::new(ConnectionStats::default()),
        }
    }

    /// When a line is due, the counters at the previous line (and `now`
    /// becomes the previous line); otherwise `None`. One caller wins the
    /// line per interval.
    fn due(&self, now: ConnectionStats) -> Option<ConnectionStats> {
        let at = u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX);
        let next = self.next.load(Relaxed);
        if at < next {
            return None;
        }
        let every = u64::try_from(self.every.as_micros()).unwrap_or(u64::MAX);
        if self
            .next
            .compare_exchange(next, at.saturating_add(every), Relaxed, Relaxed)
            .is_err()
        {
            return None;
        }
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        Some(std::mem::replace(&mut *last, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_interval_with_the_counts_since_the_last() {
        let counters = Counters::new(4, Duration::from_secs(10));
        assert!(
            counters.log.due(counters.snapshot()).is_some(),
            "the first is due"
        );
        counters.refused.fetch_add(5, Relaxed);
        assert!(
            counters.log.due(counters.snapshot()).is_none(),
            "the next waits for the interval"
        );
        // Pretend the interval passed.
        counters.log.next.store(0, Relaxed);
        counters.refused.fetch_add(2, Relaxed);
        let since = counters.log.due(counters.snapshot()).unwrap();
        assert_eq!(since.refused, 0, "the previous line saw none");
        counters.log.next.store(0, Relaxed);
        let since = counters.log.due(counters.snapshot()).unwrap();
        assert_eq!(since.refused, 7);
    }
}
