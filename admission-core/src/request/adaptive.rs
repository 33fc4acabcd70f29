//! An adaptive limit for a request class: how many leases it may hand out,
//! learned from the latency and throughput of the leases it handed out.
//!
//! This module owns [`AdaptiveLimit`] (the settings), the [`Tuner`] (the
//! algorithm, a pure function of per-window figures) and the [`Controller`]
//! that feeds it from leases and applies its answer to the class's pool. It
//! must never refuse, delay or pin a request to measure anything: it only
//! watches admitted work end, and moves the limit between the floor and
//! the ceiling the app gave. The permits enforce the limit (a lower one
//! revokes nothing; a higher one wakes waiters). Its cost on a request
//! path: two clock reads and a short lock per lease, for the classes made
//! adaptive only.
//!
//! # The algorithm
//!
//! Time is cut into windows (at least [`AdaptiveLimit::window`] long and 8
//! ended leases). For each window the controller has: how many leases
//! ended, how many of them within the timeout (good), their mean latency
//! `r`, the good throughput `x`, and whether the class was saturated (the
//! most leases in flight at once reached the limit). It keeps a baseline
//! latency `b`, the latency of the work when nothing queues.
//!
//! 1. **Timeouts dominate** (fewer than half the leases good): the limit
//!    halves, down to the floor, and nothing is learned from the window.
//!    This bounds the limit when every request times out at the same
//!    latency (Netflix concurrency-limits #137: a gradient of 1 there
//!    reads as "no queue" and grows the limit to its maximum).
//! 2. **No queue** (`r <= b * 1.15`): when saturated, the limit grows by a
//!    step that doubles with each consecutive growth (10%, 20%, 40%, ...,
//!    at least one slot, at most doubling) and falls back to 10% after a
//!    cut: fast from the floor, gentle near the knee. Unsaturated, the
//!    limit stays (nothing says more would help, nothing says less would);
//!    so at light load there is nothing to refuse, and no refusal comes
//!    from measuring.
//! 3. **Latency above the baseline** (two windows in a row, so that one
//!    scheduling hiccup moves nothing, or one window at twice it): either
//!    work queues behind the
//!    backend's true capacity, or the work itself got slower. They differ in
//!    what concurrency buys: queued, cutting concurrency leaves throughput
//!    flat and cuts latency; slower, cutting concurrency cuts throughput in
//!    proportion and leaves latency where it is. So after a cut of at
//!    least 20% (both windows saturated), if throughput fell by at least
//!    three quarters of the cut's proportion while latency held (fell by less than
//!    that, rose by at most 10%), the extra concurrency was buying
//!    throughput: the new latency is the work's own, and becomes the
//!    baseline. Both tests, so that the noise of one window's throughput
//!    cannot ratchet the baseline up, and latency that rose as
//!    concurrency was cut (the backend lost capacity at that moment) is
//!    never taken for the work's own. Otherwise the limit is cut toward `limit * b * 1.15 / r`
//!    (at most halving), the concurrency that by Little's law would serve
//!    the same throughput without the queue.
//!
//! The baseline otherwise only falls (the lowest window mean seen), so it
//! cannot drift upward under steady load: a queue that builds raises `r`,
//! never `b` (the failure of Envoy's repeated minRTT windows under load,
//! envoy PR #11579, and of Vegas' no-load RTT, concurrency-limits #165, and
//! of the target latency in Uber's first auto-tuner). No window pins
//! concurrency to measure `b` (Envoy's `min_concurrency` windows, whose 503s
//! its docs admit, and whose high `min_concurrency` becomes a floor, envoy
//! #46532, #38338): `b` comes from the windows the class is already in,
//! and a falling load lets the limit grow again from the floor as soon as
//! latency is back near `b`. The window right after a cut is not measured
//! (its leases were admitted under the higher limit).
//!
//! Sources: the gradient `b / r` of Netflix's concurrency-limits
//! (Gradient2, <https://github.com/Netflix/concurrency-limits>); gating on
//! whether more concurrency still buys throughput from Uber's Cinnamon
//! auto-tuner (<https://www.uber.com/blog/cinnamon-auto-tuner-adaptive-concurrency-in-the-wild/>)
//! and Protego (Cho et al., NSDI 2023), which raise admission only while
//! throughput rises with it; the growth schedule from TCP's slow start and
//! congestion avoidance; Little's law for the cut.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;

use crate::pool::Pool;

/// Latency within this factor of the baseline counts as no queue.
const TOLERANCE: f64 = 1.15;
/// The fewest ended leases a window decides on.
const MIN_SAMPLES: u32 = 8;
/// The smallest cut whose outcome re-learns the baseline.
const TEST_CUT: f64 = 0.8;

/// An adaptive limit for a request class: its capacity moves between
/// `floor` and `ceiling` from the latency and throughput of the leases it
/// admitted (see the algorithm in this module's source docs, summarised on
/// [`RequestPoolsBuilder::adaptive`](crate::request::RequestPoolsBuilder::adaptive)).
///
/// A lease held longer than [`timeout`](Self::timeout) counts as timed out
/// (its caller has given up): the limit halves while those dominate.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::{AdaptiveLimit, Class, RequestPools};
///
/// let requests = RequestPools::builder()
///     .adaptive(
///         Class::Work,
///         AdaptiveLimit::new(2, 64).timeout(Duration::from_secs(1)),
///     )
///     .build()
///     .unwrap();
/// let [work, _] = requests.stats();
/// assert_eq!((work.capacity, work.limit), (64, 2), "it starts at the floor");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveLimit {
    floor: usize,
    ceiling: usize,
    initial: usize,
    window: Duration,
    timeout: Duration,
}

impl AdaptiveLimit {
    /// A limit between `floor` and `ceiling` (the class gets `ceiling`
    /// slots and worker threads), starting at the floor, with 100 ms
    /// windows and a 10 s timeout.
    pub const fn new(floor: usize, ceiling: usize) -> Self {
        AdaptiveLimit {
            floor,
            ceiling,
            initial: floor,
            window: Duration::from_millis(100),
            timeout: Duration::from_secs(10),
        }
    }

    /// The limit to start at (default: the floor).
    #[must_use]
    pub const fn initial(mut self, limit: usize) -> Self {
        self.initial = limit;
        self
    }

    /// The shortest window the limit decides on (default 100 ms); a window
    /// also waits for 8 leases to end.
    #[must_use]
    pub const fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How long a lease may be held before it counts as timed out: the
    /// clients' timeout (default 10 s).
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The ceiling: the class's slots.
    pub(crate) const fn ceiling(self) -> usize {
        self.ceiling
    }

    pub(crate) fn is_valid(self) -> bool {
        self.floor > 0
            && self.floor <= self.ceiling
            && self.ceiling <= crate::error::MAX_CAPACITY
            && (self.floor..=self.ceiling).contains(&self.initial)
            && !self.window.is_zero()
            && !self.timeout.is_zero()
    }
}

/// What one window saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Window {
    /// How long it lasted, in seconds.
    pub(crate) secs: f64,
    /// Leases that ended.
    pub(crate) ended: u32,
    /// Of those, the ones that ended within the timeout.
    pub(crate) good: u32,
    /// The mean latency of the good ones, in seconds.
    pub(crate) latency: f64,
    /// The most leases in flight at once.
    pub(crate) peak: usize,
}

/// One decided window, remembered for the next: the limit it ran under,
/// its good throughput and whether it was saturated.
#[derive(Debug, Clone, Copy)]
struct Seen {
    limit: f64,
    throughput: f64,
    latency: f64,
    saturated: bool,
}

/// The algorithm (see the module docs): a pure function from windows to a
/// limit.
#[derive(Debug)]
pub(crate) struct Tuner {
    floor: f64,
    ceiling: f64,
    limit: f64,
    /// The work's latency when nothing queues, in seconds.
    baseline: Option<f64>,
    /// The growth step, as a fraction of the limit.
    step: f64,
    /// The window before, if it was decided on.
    last: Option<Seen>,
    /// The next window is not measured (the one right after a cut).
    settle: bool,
    /// The window before was above the tolerance.
    above: bool,
}

impl Tuner {
    pub(crate) fn new(config: AdaptiveLimit) -> Self {
        Tuner {
            floor: config.floor as f64,
            ceiling: config.ceiling as f64,
            limit: config.initial as f64,
            baseline: None,
            step: 0.1,
            last: None,
            settle: false,
            above: false,
        }
    }

    /// The limit, in whole slots.
    pub(crate) fn limit(&self) -> usize {
        // Between floor and ceiling, both whole and at most MAX_CAPACITY.
        self.limit.round() as usize
    }

    /// The latency the tuner takes for no queue, once it has one.
    pub(crate) fn baseline(&self) -> Option<Duration> {
        self.baseline.map(Duration::from_secs_f64)
    }

    /// Decides on one window; returns the new limit.
    pub(crate) fn on_window(&mut self, window: Window) -> usize {
        let applied = self.limit();
        if window.good * 2 < window.ended {
            self.cut(self.limit * 0.5);
            self.last = None;
            return self.limit();
        }
        if std::mem::take(&mut self.settle) {
            return applied;
        }
        let saturated = window.peak >= applied;
        let latency = window.latency;
        let throughput = f64::from(window.good) / window.secs;
        let baseline = self.baseline.map_or(latency, |b| b.min(latency));
        self.baseline = Some(baseline);
        let seen = Seen {
            limit: self.limit,
            throughput,
            latency,
            saturated,
        };
        let last = self.last.replace(seen);
        if latency <= baseline * TOLERANCE {
            self.above = false;
            if saturated {
                let grown = (self.limit * (1.0 + self.step)).max(self.limit + 1.0);
                self.limit = grown.min(self.ceiling);
                self.step = (self.step * 2.0).min(1.0);
            }
            return self.limit();
        }
        // One window above could be noise (a scheduling hiccup): act on the
        // second in a row, or at once when latency doubled.
        if !std::mem::replace(&mut self.above, true) && latency <= baseline * 2.0 {
            return self.limit();
        }
        if let Some(last) = last
            && last.saturated
            && saturated
            && self.limit <= last.limit * TEST_CUT
        {
            let cut = 1.0 - self.limit / last.limit;
            let lost = 1.0 - throughput / last.throughput;
            let held = (last.latency * (1.0 - cut * 0.5)..=last.latency * 1.1).contains(&latency);
            if lost >= cut * 0.75 && held {
                // The concurrency cut away was buying throughput: this
                // latency is the work's own.
                self.baseline = Some(latency);
                return self.limit();
            }
        }
        self.cut(self.limit * baseline * TOLERANCE / latency);
        self.limit()
    }

    /// Cuts the limit toward `to`, at most halving it, never below the
    /// floor, and resets the growth step.
    fn cut(&mut self, to: f64) {
        let to = to.max(self.limit * 0.5).max(self.floor);
        if to < self.limit {
            self.limit = to;
            self.settle = true;
        }
        self.step = 0.1;
    }
}

/// The leases of one adaptive class: counts them in flight, times them,
/// and at the end of each window applies the tuner's limit to the pool.
#[derive(Debug)]
pub(crate) struct Controller {
    pool: Pool,
    timeout: Duration,
    window: Duration,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tuner: Tuner,
    started: Instant,
    ended: u32,
    good: u32,
    good_secs: f64,
}

impl Controller {
    /// A controller for `pool` (built with the ceiling's slots), which it
    /// sets to the initial limit.
    pub(crate) fn new(pool: Pool, config: AdaptiveLimit) -> Self {
        let tuner = Tuner::new(config);
        pool.controlled();
        pool.move_limit(tuner.limit());
        Controller {
            pool,
            timeout: config.timeout,
            window: config.window,
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            state: Mutex::new(State {
                tuner,
                started: Instant::now(),
                ended: 0,
                good: 0,
                good_secs: 0.0,
            }),
        }
    }

    /// A lease was admitted (its lease keeps when, for
    /// [`ended`](Self::ended)).
    pub(crate) fn admitted(&self) {
        let now = self.in_flight.fetch_add(1, Relaxed) + 1;
        self.peak.fetch_max(now, Relaxed);
    }

    /// The lease admitted at `at` ended.
    pub(crate) fn ended(&self, at: Instant) {
        self.in_flight.fetch_sub(1, Relaxed);
        let now = Instant::now();
        let held = now.duration_since(at);
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.ended += 1;
        if held < self.timeout {
            state.good += 1;
            state.good_secs += held.as_secs_f64();
        }
        let elapsed = now.duration_since(state.started);
        if elapsed < self.window || state.ended < MIN_SAMPLES {
            return;
        }
        let window = Window {
            secs: elapsed.as_secs_f64(),
            ended: state.ended,
            good: state.good,
            latency: if state.good == 0 {
                self.timeout.as_secs_f64()
            } else {
                state.good_secs / f64::from(state.good)
            },
            // The window's peak, and the next one starts from those in
            // flight now.
            peak: self.peak.swap(self.in_flight.load(Relaxed), Relaxed).max(1),
        };
        let before = state.tuner.limit();
        let limit = state.tuner.on_window(window);
        state.started = now;
        state.ended = 0;
        state.good = 0;
        state.good_secs = 0.0;
        if limit != before {
            // Under the lock: two windows closing one after the other apply
            // their limits in their order.
            self.pool.move_limit(limit);
            let baseline = state.tuner.baseline();
            drop(state);
            tracing::debug!(
                pool = self.pool.name(),
                limit,
                baseline_us = baseline.map_or(0, |b| u64::try_from(b.as_micros()).unwrap_or(0)),
                "adaptive limit moved"
            );
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const D: f64 = 0.020;

    /// A backend of `c` permits held `d` s each behind a limit of
    /// `limit`, saturated: Little's law for its throughput and latency.
    fn saturated(limit: usize, c: usize, d: f64) -> Window {
        let l = limit as f64;
        let c = c as f64;
        let latency = if l <= c { d } else { d * l / c };
        let throughput = l.min(c) / d;
        Window {
            secs: 0.1,
            ended: (throughput * 0.1) as u32,
            good: (throughput * 0.1) as u32,
            latency,
            peak: limit,
        }
    }

    fn run(tuner: &mut Tuner, windows: usize, c: usize, d: f64) -> Vec<usize> {
        (0..windows)
            .map(|_| {
                let limit = tuner.limit();
                tuner.on_window(saturated(limit, c, d))
            })
            .collect()
    }

    #[test]
    fn it_climbs_from_the_floor_to_the_knee_and_stays_near_it() {
        let mut tuner = Tuner::new(AdaptiveLimit::new(1, 400));
        let limits = run(&mut tuner, 300, 20, D);
        assert!(
            limits[..8].iter().any(|&l| l >= 20),
            "reached 20 fast: {limits:?}"
        );
        let steady = &limits[100..];
        assert!(steady.iter().all(|&l| (20..=27).contains(&l)), "{steady:?}");
        assert_eq!(tuner.baseline(), Some(Duration::from_secs_f64(D)));
    }

    #[test]
    fn it_follows_a_capacity_step_down_and_up() {
        let mut tuner = Tuner::new(AdaptiveLimit::new(1, 400).initial(20));
        run(&mut tuner, 50, 20, D);
        let down = run(&mut tuner, 10, 10, D);
        assert!((10..=13).contains(&down[9]), "{down:?}");
        let up = run(&mut tuner, 20, 20, D);
        assert!((20..=27).contains(&up[19]), "{up:?}");
    }

    #[test]
    fn slower_work_is_relearned_as_the_baseline_not_cut_to_the_floor() {
        let mut tuner = Tuner::new(AdaptiveLimit::new(1, 400).initial(20));
        run(&mut tuner, 50, 20, D);
        // Every piece of work takes three times as long; capacity is the
        // same 20.
        let limits = run(&mut tuner, 60, 20, 3.0 * D);
        let baseline = tuner.baseline().unwrap().as_secs_f64();
        assert!((baseline - 3.0 * D).abs() < 1e-9, "{baseline}");
        assert!(
            limits[40..].iter().all(|&l| (20..=27).contains(&l)),
            "{limits:?}"
        );
    }

    #[test]
    fn when_every_lease_times_out_the_limit_falls_to_the_floor_and_leaves_it_after() {
        let mut tuner = Tuner::new(AdaptiveLimit::new(2, 400).initial(20));
        run(&mut tuner, 50, 20, D);
        for _ in 0..20 {
            let window = Window {
                good: 0,
                ..saturated(tuner.limit(), 20, D)
            };
            tuner.on_window(window);
        }
        assert_eq!(tuner.limit(), 2, "bounded: at the floor");
        assert_eq!(tuner.baseline(), Some(Duration::from_secs_f64(D)));
        let after = run(&mut tuner, 30, 20, D);
        assert!((20..=27).contains(&after[29]), "left the floor: {after:?}");
    }

    #[test]
    fn an_unsaturated_class_keeps_its_limit() {
        let mut tuner = Tuner::new(AdaptiveLimit::new(1, 400).initial(30));
        for _ in 0..50 {
            tuner.on_window(Window {
                peak: 12,
                ..saturated(12, 20, D)
            });
        }
        assert_eq!(tuner.limit(), 30);
    }
}
