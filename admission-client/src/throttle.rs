//! Client-side adaptive throttling, as the Google SRE book describes it
//! ("Handling Overload"): over a recent window the client counts the
//! requests it meant to send and the ones the server accepted, and rejects
//! new ones locally with probability
//! `max(0, (requests − K·accepts) / (requests + 1))`.
//!
//! This module owns those two counters (in slots of a tenth of the window,
//! with their sums kept as it moves), the mark of the last refusal that
//! lets a call skip reading the window while it holds none, and the draw.
//! It must never reject while the server accepts at least `1/K` of what
//! is sent, and never sleeps.

use std::cell::Cell;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;

const SLOTS: usize = 10;

/// The throttle, shared by every clone.
///
/// `K` is how much more than the server accepts a client may still send:
/// 2 (the book's choice) lets through twice what was accepted, so a server
/// that recovers is seen to recover; values near 1 reject sooner and waste
/// less of an overloaded server's time. Locally rejected requests count as
/// requests, so the rejection rate follows the server's acceptance.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_client::AdaptiveThrottle;
///
/// let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(2)).unwrap();
/// for _ in 0..10 {
///     throttle.record(false); // ten requests, none accepted
/// }
/// assert!(throttle.reject_probability() > 0.9);
/// assert!(AdaptiveThrottle::new(0.5, Duration::from_secs(2)).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct AdaptiveThrottle {
    shared: Arc<Shared>,
    k: f64,
    slot: Duration,
    epoch: Instant,
}

#[derive(Debug, Default)]
struct Shared {
    window: Mutex<Window>,
    /// The first slot whose window holds none of the refusals recorded
    /// so far (the latest one's slot plus `SLOTS`). From it on the window
    /// holds accepted requests only, so (K being at least 1) the
    /// probability is 0 and a call need not read the window.
    clear_from: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    requests: u64,
    accepts: u64,
}

/// The counts of the `SLOTS` slots ending at `head` (slot `i` at
/// `i % SLOTS`) and their sums, kept as the window moves on, so that a
/// call reads two numbers, not every slot.
#[derive(Debug, Default)]
struct Window {
    slots: [Counts; SLOTS],
    head: u64,
    total: Counts,
}

impl Window {
    /// Moves the window on to end at `index`, forgetting the slots it
    /// leaves; a reading older than the head leaves it where it is.
    fn advance(&mut self, index: u64) {
        if index <= self.head {
            return;
        }
        if index - self.head >= SLOTS as u64 {
            *self = Window {
                head: index,
                ..Window::default()
            };
            return;
        }
        for expired in self.head + 1..=index {
            let slot = &mut self.slots[position(expired)];
            self.total.requests = self.total.requests.saturating_sub(slot.requests);
            self.total.accepts = self.total.accepts.saturating_sub(slot.accepts);
            *slot = Counts::default();
        }
        self.head = index;
    }
}

fn position(index: u64) -> usize {
    usize::try_from(index % SLOTS as u64).unwrap_or(0)
}

impl AdaptiveThrottle {
    /// A throttle with multiplier `k` (at least 1, finite) over `window`
    /// (100 ms to 10 min). The book counts over two minutes; a shorter
    /// window stops rejecting sooner after an overload ends.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] ([`ConfigError::BadThrottle`]) for `k` or `window` out of
    /// those bounds.
    pub fn new(k: f64, window: Duration) -> Result<AdaptiveThrottle, ConfigError> {
        if !(k.is_finite() && k >= 1.0) {
            return Err(ConfigError::BadThrottle {
                reason: "K must be finite and at least 1",
            });
        }
        if !(Duration::from_millis(100)..=Duration::from_secs(600)).contains(&window) {
            return Err(ConfigError::BadThrottle {
                reason: "the window must be within 100 ms to 10 min",
            });
        }
        Ok(AdaptiveThrottle {
            shared: Arc::default(),
            k,
            slot: window / u32::try_from(SLOTS).unwrap_or(10),
            epoch: Instant::now(),
        })
    }

    /// The probability a new request is rejected locally now.
    pub fn reject_probability(&self) -> f64 {
        self.probability_at(Instant::now())
    }

    /// Counts one request the client meant to send and decides whether it
    /// is sent: `false` when it is rejected locally (it then counts as a
    /// request the server did not accept).
    pub fn admit(&self) -> bool {
        self.admit_at(Instant::now())
    }

    /// [`admit`](Self::admit) at `now` (the layer reads the clock once
    /// per call).
    pub(crate) fn admit_at(&self, now: Instant) -> bool {
        let p = self.probability_at(now);
        let rejected = p > 0.0 && random_unit() < p;
        if rejected {
            self.record_at(now, false);
        }
        !rejected
    }

    /// Counts one request that was sent, and whether the server accepted
    /// it (anything but a refusal or a failure to answer).
    pub fn record(&self, accepted: bool) {
        self.record_at(Instant::now(), accepted);
    }

    pub(crate) fn record_at(&self, now: Instant, accepted: bool) {
        let index = self.index(now);
        let mut window = self.window();
        window.advance(index);
        if index.saturating_add(SLOTS as u64) <= window.head {
            // Read before the window began: already forgotten.
            return;
        }
        if !accepted {
            self.shared
                .clear_from
                .fetch_max(index.saturating_add(SLOTS as u64), Ordering::Relaxed);
        }
        let accepts = u64::from(accepted);
        let slot = &mut window.slots[position(index)];
        slot.requests += 1;
        slot.accepts += accepts;
        window.total.requests += 1;
        window.total.accepts += accepts;
    }

    /// The probability over the window ending at `now` (or at a later
    /// reading another call already made).
    fn probability_at(&self, now: Instant) -> f64 {
        let index = self.index(now);
        // A refusal recorded by a call racing this one may be missed, as
        // if this reading came first.
        if index >= self.shared.clear_from.load(Ordering::Relaxed) {
            return 0.0;
        }
        let mut window = self.window();
        window.advance(index);
        let Counts { requests, accepts } = window.total;
        drop(window);
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
        let (requests, accepts) = (requests as f64, accepts as f64);
        ((requests - self.k * accepts) / (requests + 1.0)).max(0.0)
    }

    fn index(&self, now: Instant) -> u64 {
        slot_index(now, self.epoch, self.slot)
    }

    fn window(&self) -> MutexGuard<'_, Window> {
        unpoisoned(&self.shared.window)
    }
}

/// The windows of the throttle and of the budget, locked: they hold
/// counters only, so a panic elsewhere leaves them valid.
pub(crate) fn unpoisoned<T>(window: &Mutex<T>) -> MutexGuard<'_, T> {
    window.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The slot of `now` since `epoch`, in slots of `slot`: whole nanoseconds
/// in `u64` (584 years), a 64-bit division, not a 128-bit one.
pub(crate) fn slot_index(now: Instant, epoch: Instant, slot: Duration) -> u64 {
    let since = now.saturating_duration_since(epoch).as_nanos();
    let since = u64::try_from(since).unwrap_or(u64::MAX);
    let slot = u64::try_from(slot.as_nanos()).unwrap_or(u64::MAX).max(1);
    since / slot
}

/// A uniform draw in `[0, 1)` from a per-thread xorshift, seeded from the
/// standard library's random hash keys.
pub(crate) fn random_unit() -> f64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new(RandomState::new().hash_one(0u8) | 1);
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        #[expect(clippy::cast_precision_loss, reason = "53 bits are exact")]
        let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
        unit
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probability_is_the_books_formula() {
        let throttle = AdaptiveThrottle::new(2.0, Duration::from_secs(10)).unwrap();
        let now = Instant::now();
        for i in 0..100 {
            throttle.record_at(now, i < 20);
        }
        // (100 - 2 * 20) / 101
        let p = throttle.probability_at(now);
        assert!((p - 60.0 / 101.0).abs() < 1e-9, "{p}");
        // Accepting half with K = 2 rejects nothing.
        let fine = AdaptiveThrottle::new(2.0, Duration::from_secs(10)).unwrap();
        for i in 0..100 {
            fine.record_at(now, i % 2 == 0);
        }
        assert!(fine.probability_at(now).abs() < f64::EPSILON);
        assert!(
            (throttle.probability_at(now + Duration::from_secs(11))).abs() < f64::EPSILON,
            "the window forgets"
        );
    }

    proptest::proptest! {
        /// The sums kept as the window moves are those of the slots in it,
        /// and the window is skipped only while the window holds no
        /// refusal: the probability after any run of records is the
        /// formula over the records of the ten slots ending now.
        #[test]
        fn the_kept_sums_are_the_windows(
            k in 1.0f64..3.0,
            events in proptest::collection::vec((0u64..700, proptest::bool::ANY), 1..300),
        ) {
            let throttle = AdaptiveThrottle::new(k, Duration::from_secs(1)).unwrap();
            let start = throttle.epoch;
            let mut t = Duration::ZERO;
            let mut log: Vec<(u64, bool)> = Vec::new();
            for (gap_ms, accepted) in events {
                t += Duration::from_millis(gap_ms);
                let index = throttle.index(start + t);
                throttle.record_at(start + t, accepted);
                log.push((index, accepted));
                let live = log.iter().filter(|(i, _)| i + SLOTS as u64 > index);
                let (requests, accepts) = live.fold((0u32, 0u32), |(r, a), (_, ok)| (r + 1, a + u32::from(*ok)));
                let expected = ((f64::from(requests) - k * f64::from(accepts)) / (f64::from(requests) + 1.0)).max(0.0);
                let p = throttle.probability_at(start + t);
                proptest::prop_assert!((p - expected).abs() < 1e-12, "{p} != {expected}");
            }
        }
    }

    #[test]
    fn local_rejections_follow_the_probability() {
        let throttle = AdaptiveThrottle::new(1.0, Duration::from_secs(600)).unwrap();
        for _ in 0..1000 {
            throttle.record(false);
        }
        let sent = (0..1000).filter(|_| throttle.admit()).count();
        assert!(sent < 50, "{sent} of 1000 sent with nothing accepted");
        assert!(
            (0..1000).all(|_| random_unit() < 1.0),
            "draws stay below one"
        );
    }

    #[test]
    fn bad_configurations_are_refused_at_construction() {
        for (k, ms) in [(0.9, 1000), (f64::NAN, 1000), (2.0, 50), (2.0, 700_000)] {
            let err = AdaptiveThrottle::new(k, Duration::from_millis(ms)).unwrap_err();
            assert!(
                matches!(err, crate::ConfigError::BadThrottle { .. }),
                "{err}"
            );
        }
    }
}
