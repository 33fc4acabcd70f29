//! Netflix's Gradient2, written here from its published description (the
//! `Gradient2Limit` of <https://github.com/Netflix/concurrency-limits>), as
//! a second baseline beside this project's adaptive limit.
//!
//! This module owns [`Gradient2`]: a limit fed one sample per request (its
//! round-trip time and the requests in flight when it started), as the
//! library's limiter feeds an unwrapped `Gradient2Limit`. The rule, per
//! sample: the long RTT is an exponential average over 600 samples (the
//! first 10 averaged plainly); when it is more than twice the sample it
//! decays by 5%; while fewer than half the limit are in flight the limit
//! stays (application-limited); else `gradient = clamp(1.5 * long / rtt,
//! 0.5, 1)`, `new = limit * gradient + 4` (the queue size), smoothed
//! `limit * 0.8 + new * 0.2`, and clamped to `[min, max]`. Drops are not
//! treated apart (the library's `_update` ignores `didDrop`). It never
//! changes the rule, only the minimum, maximum and initial limits, which the
//! harness sets as it sets this project's.

use std::sync::Mutex;
use std::time::Duration;

/// The Gradient2 limit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::adaptive::Gradient2;
///
/// let mut limit = Gradient2::new(1, 64, 8);
/// for _ in 0..200 {
///     limit.on_sample(Duration::from_millis(50), 8);
/// }
/// assert!(limit.limit() > 8, "no queue: it grows by its queue size");
/// ```
#[derive(Debug, Clone)]
pub struct Gradient2 {
    min: f64,
    max: f64,
    estimated: f64,
    long: LongRtt,
}

/// The long-window exponential average of the RTT, in seconds.
#[derive(Debug, Clone, Default)]
struct LongRtt {
    value: f64,
    count: u32,
}

const WARMUP: u32 = 10;
const LONG_WINDOW: f64 = 600.0;
const TOLERANCE: f64 = 1.5;
const SMOOTHING: f64 = 0.2;
const QUEUE_SIZE: f64 = 4.0;

impl LongRtt {
    fn add(&mut self, sample: f64) -> f64 {
        if self.count < WARMUP {
            self.count += 1;
            self.value += (sample - self.value) / f64::from(self.count);
        } else {
            let factor = 2.0 / (LONG_WINDOW + 1.0);
            self.value = self.value * (1.0 - factor) + sample * factor;
        }
        self.value
    }
}

impl Gradient2 {
    /// A limit between `min` and `max`, starting at `initial`.
    pub fn new(min: usize, max: usize, initial: usize) -> Gradient2 {
        Gradient2 {
            min: min as f64,
            max: max as f64,
            estimated: initial as f64,
            long: LongRtt::default(),
        }
    }

    /// The limit, in whole requests.
    pub fn limit(&self) -> usize {
        // Clamped to [min, max], both whole.
        self.estimated.round() as usize
    }

    /// One request ended after `rtt`, with `in_flight` requests in flight.
    pub fn on_sample(&mut self, rtt: Duration, in_flight: usize) {
        let short = rtt.as_secs_f64().max(1e-6);
        let long = self.long.add(short);
        if long / short > 2.0 {
            self.long.value *= 0.95;
        }
        if (in_flight as f64) < self.estimated / 2.0 {
            return;
        }
        let gradient = (TOLERANCE * long / short).clamp(0.5, 1.0);
        let new = self.estimated * gradient + QUEUE_SIZE;
        let new = self.estimated * (1.0 - SMOOTHING) + new * SMOOTHING;
        self.estimated = new.clamp(self.min, self.max);
    }
}

/// A [`Gradient2`] shared by a server's requests.
#[derive(Debug)]
pub(crate) struct Shared(Mutex<Gradient2>);

impl Shared {
    pub(crate) fn new(limit: Gradient2) -> Self {
        Shared(Mutex::new(limit))
    }

    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Gradient2) -> T) -> T {
        f(&mut self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }
}
