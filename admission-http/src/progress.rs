//! The bound on how long a leased response may wait for its consumer.
//!
//! This module owns [`ProgressTimeout`], the [`Stalled`] error a stalled
//! response ends with, and the watchdog that takes a response's lease back
//! when the consumer (the client, through hyper) has not asked for the next
//! frame within the bound, and the one count and throttled log of stalls,
//! responses' and request bodies' alike ([`stalled`]). It must never hold
//! the body itself (only the lease: the body stays with its connection),
//! never log per response, and never count the producer's own slowness (a
//! poll answered `Pending`) as a stall: only a frame handed over and not
//! asked after.

use std::fmt;
use std::future::poll_fn;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;
use std::time::Duration;

use admission_core::Lease;
use tokio::sync::oneshot;
use tokio::time::Instant;

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

/// A lease under watch: the body's side. Dropping it ends the watchdog.
#[derive(Debug)]
pub(crate) struct Watched {
    state: Arc<State>,
    // Dropped with the body: the watchdog's receiver resolves and its task
    // ends at once, not at its next timer.
    _stop: oneshot::Sender<()>,
}

/// What the body and its watchdog share.
#[derive(Debug)]
struct State {
    lease: Mutex<Option<Lease>>,
    since: Instant,
    /// Milliseconds from `since` to the last frame handed over.
    yielded: AtomicU64,
    /// Whether the consumer is waiting on the producer (the last poll was
    /// `Pending`): not a stall.
    waiting: AtomicBool,
    /// Whether the watchdog took the lease.
    stalled: AtomicBool,
}

impl State {
    fn yielded_at(&self) -> Instant {
        self.since + Duration::from_millis(self.yielded.load(Ordering::Acquire))
    }

    fn take(&self) -> Option<Lease> {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Watched {
    /// Starts watching `lease` after a frame was handed over now, or gives
    /// the lease back when there is no tokio runtime to run the watchdog
    /// (the body then holds it as before, to its end).
    pub(crate) fn start(lease: Lease, bound: ProgressTimeout) -> Result<Watched, Lease> {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return Err(lease);
        };
        let state = Arc::new(State {
            lease: Mutex::new(Some(lease)),
            since: Instant::now(),
            yielded: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
        });
        let (stop, stopped) = oneshot::channel();
        let watched = Arc::clone(&state);
        runtime.spawn(async move {
            // Whichever ends first: the body (its sender dropped) or the
            // watch. Polled by hand, so no `select!` (and no proc-macro).
            let mut stopped = stopped;
            let mut watching = pin!(watch(&watched, bound.get()));
            poll_fn(|cx| {
                if Pin::new(&mut stopped).poll(cx).is_ready()
                    || watching.as_mut().poll(cx).is_ready()
                {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await;
        });
        Ok(Watched { state, _stop: stop })
    }

    /// The consumer asked for a frame: whether the watchdog already took
    /// the lease (the response must end).
    pub(crate) fn polled(&self) -> bool {
        self.state.waiting.store(true, Ordering::Release);
        self.state.stalled.load(Ordering::Acquire)
    }

    /// A frame was handed over: the clock starts again.
    pub(crate) fn yielded(&self) {
        let ms = u64::try_from(self.state.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.state.yielded.store(ms, Ordering::Release);
        self.state.waiting.store(false, Ordering::Release);
    }

    /// Whether the lease is still held.
    pub(crate) fn holds_lease(&self) -> bool {
        !self.state.stalled.load(Ordering::Acquire)
    }
}

impl Drop for Watched {
    /// The body ended or was dropped: the lease goes now, not when the
    /// watchdog's task next runs.
    fn drop(&mut self) {
        drop(self.state.take());
    }
}

/// Sleeps until the consumer has let a handed-over frame lie for `bound`,
/// then takes the lease.
async fn watch(state: &State, bound: Duration) {
    loop {
        tokio::time::sleep_until(state.yielded_at() + bound).await;
        if state.waiting.load(Ordering::Acquire) {
            // The consumer is waiting on the producer; look again a bound
            // after the next frame (or after now, if none comes).
            tokio::time::sleep(bound).await;
            continue;
        }
        if state.yielded_at().elapsed() >= bound {
            state.stalled.store(true, Ordering::Release);
            drop(state.take());
            stalled(Side::Response);
            return;
        }
    }
}

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
    use std::time::Duration;

    use admission_core::{Class, RequestPools};

    use super::{LOG_EVERY, ProgressTimeout, Throttle, Watched};

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

    #[tokio::test(flavor = "current_thread")]
    async fn dropping_the_body_ends_its_watchdog_at_once() {
        let pools = RequestPools::new(1, 1).unwrap();
        let lease = pools.try_lease(Class::Work).unwrap();
        let bound = ProgressTimeout::new(Duration::from_secs(3600)).unwrap();
        let metrics = tokio::runtime::Handle::current().metrics();

        let watched = Watched::start(lease, bound).unwrap();
        tokio::task::yield_now().await;
        assert_eq!(metrics.num_alive_tasks(), 1, "the watchdog runs");
        assert_eq!(pools.pool(Class::Work).stats().in_use, 1);

        drop(watched);
        assert_eq!(
            pools.pool(Class::Work).stats().in_use,
            0,
            "the lease goes with the body"
        );
        // The watchdog sees its stop at its next poll, not at its hour-long timer.
        for _ in 0..10 {
            if metrics.num_alive_tasks() == 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(
            metrics.num_alive_tasks(),
            0,
            "the watchdog ended with the body"
        );
    }
}
