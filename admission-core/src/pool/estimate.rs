//! How long a pool's work takes, and what the pool decides from it.
//!
//! This module owns [`RetryHint`] and [`WorkTimes`]: what a pool has seen of
//! its work (the durations of the last [`WINDOW`] pieces that finished, and
//! the start times of the work running now), or, before any finished, the
//! work time the app said to expect. From it come the `Retry-After` hint of
//! every refusal (in milliseconds, from which the whole-second
//! `Retry-After` is rounded up), the refusal of a caller whose deadline is
//! shorter than the typical work, and the times of the bounded queue (the
//! gate reads [`WorkTimes::typical`] and [`WorkTimes::long`] for those). It
//! must never return a hint below 1 ms or above the configured cap, nor
//! below 1 s (or the cap, when the app capped it lower) while it has seen
//! no work (nothing says it is shorter), and a
//! refusal must
//! never take its lock: the robust statistic is computed when work
//! finishes, and a refusal reads atomics only, the running work through a
//! sequence count (a seqlock, modelled in `loom_models/loom_estimator.rs`).
//!
//! # Whose clock
//!
//! Every time here is a [`tokio::time::Instant`], so that a test on a
//! paused clock (`#[tokio::test(start_paused = true)]`) decides what the
//! pool has seen. Work runs on the pool's own OS threads, which have no
//! tokio runtime context: there `tokio::time::Instant::now()` reads the
//! real clock, even while the runtime's clock is paused. So the start and
//! end of a piece of work are read through a [`Clock`] captured on the
//! runtime side when the work is handed to the pool (the runtime's
//! [`Handle`](tokio::runtime::Handle), entered only for the clock read,
//! never while the work runs), and refusals read the clock of the runtime
//! they run on. Outside any runtime both are the real clock. A pool used
//! from one runtime therefore measures on one clock; a pool shared between
//! a paused test runtime and real-time threads mixes two clocks, and its
//! times saturate at zero rather than go negative. Under `--cfg loom` the
//! clock stands still, so that a model's interleavings, not the real time
//! of a run, decide what a refusal reads.

use std::sync::{PoisonError, TryLockError};
use std::time::Duration;

use tokio::time::Instant;

use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};
// The statistics beside the seqlock are single values, each read alone:
// they stay on `std` atomics under loom (as the pool's counters do), so a
// model's interleavings are those of the seqlock and the slots.
use std::sync::atomic::{AtomicU32, AtomicU64 as StdAtomicU64};

/// How a pool computes the `Retry-After` hint of its refusals.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::pool::{Pool, RetryHint};
///
/// let pool = Pool::builder("registry")
///     .capacity(2)
///     .retry_hint(RetryHint::Fixed(Duration::from_secs(5)))
///     .build()
///     .unwrap();
/// let _a = pool.try_admit().unwrap();
/// let _b = pool.try_admit().unwrap();
/// assert_eq!(pool.try_admit().unwrap_err().retry_after_secs(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryHint {
    /// Always the same hint, in milliseconds (at least 1 ms); `Retry-After`
    /// rounds it up to whole seconds, the millisecond header carries it as
    /// is.
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::pool::RetryHint;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let requests = RequestPools::builder()
    ///     .work(1)
    ///     .retry_hint(RetryHint::Fixed(Duration::from_millis(250)))
    ///     .build()
    ///     .unwrap();
    /// let _held = requests.try_lease(Class::Work).unwrap();
    /// let refusal = requests.try_lease(Class::Work).unwrap_err();
    /// assert_eq!(refusal.retry_after_millis(), 250);
    /// assert_eq!(refusal.retry_after_secs(), 1);
    /// ```
    Fixed(Duration),
    /// The expected time until a slot frees, from the work the pool has
    /// seen, rounded up to whole seconds, at least 1 and at most `cap`.
    ///
    /// * **Typical duration**: the median of the last 16 pieces of work
    ///   that finished. A median, not a mean: one ten-minute outlier moves
    ///   a mean of 1 s work to about 40 s (and an exponentially weighted
    ///   mean keeps it there for dozens of completions), so one client's
    ///   long requests would set the hint for everyone. The median moves
    ///   only once long work is at least half of the recent work, that is
    ///   once it is the norm, and a window of 16 follows a real change
    ///   within 8 completions. It is computed when work finishes; a refusal
    ///   only reads it.
    /// * **Running work counts**: a piece of work that has run `age` is
    ///   expected to end in `typical - age` while younger than the typical
    ///   duration, and once older, to run at least as long again (`age`):
    ///   work that outlives what is typical is likely to be long.
    /// * **The hint** is the soonest expected end over the running work; a
    ///   slot held by something not running on the pool's threads (a
    ///   caller holding a [`Slot`](crate::pool::Slot), a request between
    ///   two pieces of work) is expected to free in the typical duration.
    /// * **Before any work finished** the pool has no typical duration.
    ///   With [`PoolBuilder::expected_work`](crate::pool::PoolBuilder::expected_work)
    ///   given, that time stands in for it until the first piece of work
    ///   ends: the hint is then the expected remaining time of the running
    ///   work (with 20 s walks, one that started 19 s ago says 1 s, one
    ///   that started 1 s ago says 19 s), at least 1 s. Without it the hint
    ///   is 1 s, whatever runs: nothing the pool has seen says how long its
    ///   work takes, and a hint that grew with the running work's age would
    ///   point the wrong way for work of a fixed length (19 s for the slot
    ///   that frees in 1 s). A refused client then retries within a second,
    ///   and the hint is right from the first piece of work that ends.
    /// * With nothing running and no history, the hint is 1 s (the expected
    ///   work time, rounded up, when one was given).
    Observed {
        /// The largest hint ever sent.
        cap: Duration,
    },
}

impl Default for RetryHint {
    /// `Observed` with a cap of 30 s.
    fn default() -> Self {
        RetryHint::Observed {
            cap: Duration::from_secs(30),
        }
    }
}

impl RetryHint {
    /// Whether the configured value is at least one millisecond, the
    /// grain of `x-admission-retry-after-ms` (`Retry-After` rounds it up
    /// to whole seconds, at least 1).
    pub(crate) fn is_valid(self) -> bool {
        match self {
            RetryHint::Fixed(d) | RetryHint::Observed { cap: d } => d >= Duration::from_millis(1),
        }
    }

    /// The rule in milliseconds, computed once when the pool is built so
    /// that a refusal does no wide arithmetic.
    pub(crate) fn rule(self) -> Rule {
        match self {
            RetryHint::Fixed(d) => Rule::Fixed(ceil_millis(micros(d))),
            RetryHint::Observed { cap } => Rule::Observed {
                cap: ceil_millis(micros(cap)),
            },
        }
    }
}

/// A [`RetryHint`] in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    Fixed(u32),
    Observed { cap: u32 },
}

/// The hint while nothing says how long the work takes: 1 s.
const UNKNOWN_MS: u32 = 1000;

impl Rule {
    /// `micros` in milliseconds under this rule: rounded up, at least 1,
    /// at most the cap (a fixed rule ignores `micros`).
    #[inline]
    pub(crate) fn millis(self, micros: u64) -> u32 {
        match self {
            Rule::Fixed(millis) => millis,
            Rule::Observed { cap } => ceil_millis(micros).min(cap),
        }
    }

    /// The hint when no work runs, for a typical duration of `typical`
    /// microseconds (zero: none known, so 1 s).
    fn idle_millis(self, typical: u64) -> u32 {
        match self {
            Rule::Observed { cap } if typical == 0 => UNKNOWN_MS.min(cap),
            _ => self.millis(typical),
        }
    }
}

/// One hold in this many is timed once a typical hold is known (see
/// [`WorkTimes::samples_hold`]).
pub(crate) const HOLD_SAMPLE: u32 = 8;

/// How many finished pieces of work the typical duration is the median of.
pub(crate) const WINDOW: usize = 16;

/// The clock a piece of work's start and end are read on: the clock of the
/// runtime that handed the work to the pool, captured there, because the
/// worker thread that runs the work has no runtime of its own (see the
/// module docs).
#[derive(Debug, Clone)]
pub(crate) struct Clock(Option<tokio::runtime::Handle>);

impl Clock {
    /// The clock of the runtime the caller runs on, or the real clock
    /// outside any runtime.
    pub(crate) fn current() -> Clock {
        Clock(tokio::runtime::Handle::try_current().ok())
    }

    /// Now on this clock. The runtime's context is entered for the read
    /// only, never around the work.
    fn now(&self) -> Instant {
        match &self.0 {
            Some(runtime) => {
                let _entered = runtime.enter();
                Instant::now()
            }
            None => Instant::now(),
        }
    }
}

/// What a pool has seen of its work: its typical and long durations, the
/// work running now, and the retry hint computed from them.
///
/// Writers are the pool's worker threads, as work starts and finishes:
/// they take a lock, keep the start times of running work sorted, and
/// recompute the median of the window. Readers are refusals: they read
/// atomics only, through a sequence count, so a refusal never waits for a
/// worker and never sees a half-written set of start times.
#[derive(Debug)]
pub(crate) struct WorkTimes {
    rule: Rule,
    /// Time zero of every timestamp below, in microseconds.
    epoch: Instant,
    /// Held by a worker while it changes what the pool has seen.
    writer: Mutex<Recent>,
    /// The median of the window in microseconds; the expected work time
    /// (0 when none was given) until work finished.
    typical: StdAtomicU64,
    /// The 90th percentile of the window in microseconds: how long work
    /// takes when it takes long; the expected work time until work
    /// finished.
    long: StdAtomicU64,
    /// The hint when no work is running: the typical duration in
    /// milliseconds under the rule (1 s without history). Kept up to date
    /// by the writers so that the common refusal is one load.
    idle_ms: AtomicU32,
    /// Sequence count of `running` and `starts`: odd while a writer
    /// changes them.
    seq: AtomicU64,
    /// How many entries of `starts` are in use.
    running: AtomicUsize,
    /// Start times of the work running now, in microseconds since
    /// `epoch`, ascending. One entry per worker thread: no more work than
    /// that ever runs at once.
    starts: Box<[AtomicU64]>,
}

/// The durations of the last [`WINDOW`] pieces of work, a ring.
#[derive(Debug, Default)]
struct Recent {
    ring: [u64; WINDOW],
    len: usize,
    next: usize,
}

impl Recent {
    fn push(&mut self, micros: u64) {
        self.ring[self.next] = micros;
        self.next = (self.next + 1) % WINDOW;
        self.len = (self.len + 1).min(WINDOW);
    }

    /// The lower median (of two middle values the shorter, so an even
    /// split between short and long work does not say long) and the 90th
    /// percentile (the value at or below which 90% of the window lies).
    fn median_and_p90(&self) -> (u64, u64) {
        let mut sorted = self.ring;
        let sorted = &mut sorted[..self.len];
        sorted.sort_unstable();
        let at = |i: usize| sorted.get(i).copied().unwrap_or(0);
        (
            at(self.len.saturating_sub(1) / 2),
            at((self.len * 9).div_ceil(10).saturating_sub(1)),
        )
    }
}

/// When a piece of work started, as [`WorkTimes::started`] recorded it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "pass it to `finished` when the work ends"]
pub(crate) struct Started(u64);

impl WorkTimes {
    /// The work times of a pool of `workers` threads under `rule`, whose
    /// work is expected to take `expected` until some has finished (zero:
    /// no expectation).
    pub(crate) fn new(rule: Rule, workers: usize, expected: Duration) -> WorkTimes {
        let expected = micros(expected);
        WorkTimes {
            rule,
            epoch: Instant::now(),
            writer: Mutex::new(Recent::default()),
            typical: StdAtomicU64::new(expected),
            long: StdAtomicU64::new(expected),
            idle_ms: AtomicU32::new(rule.idle_millis(expected)),
            seq: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            starts: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// `at` in microseconds since the epoch, zero for an instant before it
    /// (another clock's).
    #[inline]
    /// Now, in microseconds on this estimate's clock (the one start times
    /// are kept on).
    pub(crate) fn now_micros(&self) -> u64 {
        self.now(None)
    }

    fn since_epoch(&self, at: Instant) -> u64 {
        micros(at.saturating_duration_since(self.epoch))
    }

    /// Now on `clock` (the caller's runtime's when `None`), in microseconds
    /// since the epoch. Under loom the clock stands still at the epoch: a
    /// model explores interleavings, and which atomics a refusal reads
    /// must not depend on the real time of a run.
    #[inline]
    fn now(&self, clock: Option<&Clock>) -> u64 {
        if cfg!(loom) {
            return 0;
        }
        self.since_epoch(clock.map_or_else(Instant::now, Clock::now))
    }

    fn lock(&self) -> crate::loom::sync::MutexGuard<'_, Recent> {
        // Nothing panics under the lock; a poisoned lock still holds whole
        // data.
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that a piece of work starts now on `clock`, on a worker
    /// thread.
    pub(crate) fn started(&self, clock: &Clock) -> Started {
        let recent = self.lock();
        // Read under the lock, so start times are appended in order.
        let now = self.now(Some(clock));
        self.start_at(&recent, now);
        Started(now)
    }

    /// Records that the piece of work that `started` has ended now on
    /// `clock`, and returns how long it ran.
    pub(crate) fn finished(&self, clock: &Clock, started: Started) -> Duration {
        let mut recent = self.lock();
        let now = self.now(Some(clock));
        self.finish_at(&mut recent, started, now);
        Duration::from_micros(now.saturating_sub(started.0))
    }

    fn start_at(&self, _writer: &Recent, now: u64) {
        let n = self.running.load(Ordering::Relaxed);
        if n >= self.starts.len() {
            // Cannot happen (one entry per worker thread); the hint would
            // only miss this piece of work.
            return;
        }
        self.write(|| {
            self.starts[n].store(now, Ordering::Relaxed);
            self.running.store(n + 1, Ordering::Relaxed);
        });
    }

    fn finish_at(&self, recent: &mut Recent, started: Started, now: u64) {
        let n = self.running.load(Ordering::Relaxed);
        let found = (0..n).find(|&i| self.starts[i].load(Ordering::Relaxed) == started.0);
        if let Some(i) = found {
            self.write(|| {
                for j in i..n - 1 {
                    let next = self.starts[j + 1].load(Ordering::Relaxed);
                    self.starts[j].store(next, Ordering::Relaxed);
                }
                self.running.store(n - 1, Ordering::Relaxed);
            });
        }
        self.record(recent, now.saturating_sub(started.0));
    }

    /// Whether the hold about to begin should be timed: every one until a
    /// typical duration is known, then one in [`HOLD_SAMPLE`] per thread
    /// (a thread-local count: no shared write on the request path), so a
    /// class learns its holds at a small fraction of their cost.
    pub(crate) fn samples_hold(&self) -> bool {
        thread_local! {
            static HOLDS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
        }
        self.typical.load(Ordering::Relaxed) == 0
            || HOLDS.with(|holds| {
                let n = holds.get().wrapping_add(1);
                holds.set(n);
                n % HOLD_SAMPLE == 0
            })
    }

    /// Records a hold that began at `since` and ends now: a request lease,
    /// admission to release, timed as finished work is (a sample of how
    /// long the pool's slots are held), without a place among the running
    /// work. A sample is skipped when another writer holds the lock: a
    /// lost sample costs an estimate nothing, a wait on a request's path
    /// would cost the request.
    pub(crate) fn held(&self, since: Instant) {
        let mut recent = match self.writer.try_lock() {
            Ok(recent) => recent,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return,
        };
        let now = self.now(None);
        // At least 1 µs: zero is the typical duration of a pool that has
        // seen nothing.
        let took = now.saturating_sub(self.since_epoch(since)).max(1);
        self.record(&mut recent, took);
    }

    /// Adds a finished duration (`took`, microseconds) to the window and
    /// moves the typical and long durations and the idle hint with it.
    fn record(&self, recent: &mut Recent, took: u64) {
        recent.push(took);
        let (typical, long) = recent.median_and_p90();
        self.typical.store(typical, Ordering::Relaxed);
        self.long.store(long, Ordering::Relaxed);
        self.idle_ms
            .store(self.rule.idle_millis(typical), Ordering::Relaxed);
    }

    /// Runs `change` as a writer of the sequence count (the caller holds
    /// the lock, so there is one writer at a time).
    fn write(&self, change: impl FnOnce()) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        change();
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// Runs `read` on a consistent view of the running work: `read` gets
    /// how many start times are in use, and its result is kept only if no
    /// writer changed them meanwhile (the sequence count was the same even
    /// number before and after). `read` may see a torn view on a try whose
    /// result is thrown away, so it must only read. A writer holds the
    /// count odd only for a few stores; after 8 tries that met one, `None`.
    fn read_running<R>(&self, mut read: impl FnMut(usize) -> R) -> Option<R> {
        for _ in 0..8 {
            let before = self.seq.load(Ordering::Acquire);
            if before & 1 == 1 {
                crate::loom::hint::spin_loop();
                continue;
            }
            let n = self.running.load(Ordering::Relaxed).min(self.starts.len());
            let seen = read(n);
            fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != before {
                continue;
            }
            return Some(seen);
        }
        None
    }

    /// The median duration of the last [`WINDOW`] pieces of work; before
    /// any finished, the expected work time (zero when none was given).
    pub(crate) fn typical(&self) -> Duration {
        Duration::from_micros(self.typical.load(Ordering::Relaxed))
    }

    /// The 90th percentile of the last [`WINDOW`] durations; before any
    /// finished, the expected work time (zero when none was given).
    pub(crate) fn long(&self) -> Duration {
        Duration::from_micros(self.long.load(Ordering::Relaxed))
    }

    /// The hint in milliseconds now, for a pool with `in_use` slots held
    /// (read only when work is running).
    #[inline]
    pub(crate) fn millis(&self, in_use: impl FnOnce() -> usize) -> u32 {
        self.millis_when(|| self.now(None), in_use)
    }

    /// [`millis`](Self::millis) with the clock read by `now`, only when
    /// work runs and there is a typical duration to count it against.
    #[inline]
    fn millis_when(&self, now: impl FnOnce() -> u64, in_use: impl FnOnce() -> usize) -> u32 {
        match self.rule {
            Rule::Fixed(millis) => millis,
            Rule::Observed { .. } => {
                // Without a typical duration (cold, nothing expected) the
                // running work says nothing: the idle hint, 1 s.
                if self.running.load(Ordering::Relaxed) == 0
                    || self.typical.load(Ordering::Relaxed) == 0
                {
                    self.idle_ms.load(Ordering::Relaxed)
                } else {
                    self.millis_at(now(), in_use)
                }
            }
        }
    }

    /// The hint at `now` (microseconds since the epoch) from a consistent
    /// read of the running work.
    #[cold]
    fn millis_at(&self, now: u64, in_use: impl FnOnce() -> usize) -> u32 {
        let typical = self.typical.load(Ordering::Relaxed);
        // A refusal that keeps meeting a writer says what it knows without
        // running work.
        let Some((soonest, n)) = self.read_running(|n| (self.soonest_end(now, typical, n), n))
        else {
            return self.idle_ms.load(Ordering::Relaxed);
        };
        let mut expected = soonest;
        if typical > 0 && in_use() > n {
            // A slot held by something not running here.
            expected = Some(expected.map_or(typical, |e| e.min(typical)));
        }
        expected.map_or(self.idle_ms.load(Ordering::Relaxed), |micros| {
            self.rule.millis(micros)
        })
    }

    /// The soonest expected end among the first `n` start times, in
    /// microseconds from `now`. Only two candidates can be the soonest: the
    /// oldest work still younger than `typical` (it ends in
    /// `typical - age`), and the youngest work older than that (it ends in
    /// `age` at the earliest).
    fn soonest_end(&self, now: u64, typical: u64, n: usize) -> Option<u64> {
        let threshold = now.saturating_sub(typical);
        // The first start after `threshold`: the start times ascend.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.starts[mid].load(Ordering::Relaxed) <= threshold {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let expected = |i: usize| {
            remaining(
                now.saturating_sub(self.starts[i].load(Ordering::Relaxed)),
                typical,
            )
        };
        let younger = (lo < n).then(|| expected(lo));
        let older = (lo > 0).then(|| expected(lo - 1));
        match (younger, older) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Test hooks shared by the unit tests and the loom model: start and end
/// work at given times (microseconds since the epoch), and read the running
/// work's record as a refusal does.
#[cfg(test)]
impl WorkTimes {
    /// Work started at `at`.
    pub(crate) fn start(&self, at: u64) -> Started {
        let recent = self.lock();
        self.start_at(&recent, at);
        Started(at)
    }

    /// Work that started at `started` ended at `at`.
    pub(crate) fn finish(&self, started: Started, at: u64) {
        let mut recent = self.lock();
        self.finish_at(&mut recent, started, at);
    }

    /// The start times of the running work, oldest first, as a refusal
    /// reads them (`None` when every try met a writer).
    pub(crate) fn running_starts(&self) -> Option<Vec<u64>> {
        self.read_running(|n| {
            (0..n)
                .map(|i| self.starts[i].load(Ordering::Relaxed))
                .collect()
        })
    }
}

/// How much longer a piece of work that has run `age` is expected to run
/// when work typically takes `typical`.
#[inline]
fn remaining(age: u64, typical: u64) -> u64 {
    if age < typical { typical - age } else { age }
}

/// A duration in microseconds, saturating.
#[inline]
fn micros(d: Duration) -> u64 {
    d.as_secs()
        .saturating_mul(1_000_000)
        .saturating_add(u64::from(d.subsec_micros()))
}

/// Microseconds rounded up to whole seconds, at least 1, saturating.
#[inline]
fn ceil_millis(micros: u64) -> u32 {
    u32::try_from(micros.div_ceil(1_000).max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Refusal;

    const SEC: u64 = 1_000_000;

    fn observed(cap_secs: u64, workers: usize) -> WorkTimes {
        expecting(cap_secs, workers, Duration::ZERO)
    }

    fn expecting(cap_secs: u64, workers: usize, expected: Duration) -> WorkTimes {
        let rule = RetryHint::Observed {
            cap: Duration::from_secs(cap_secs),
        }
        .rule();
        WorkTimes::new(rule, workers, expected)
    }

    impl WorkTimes {
        /// Work that took `took` ran and ended before `at`.
        fn ran(&self, took: u64, at: u64) {
            let started = self.start(at - took);
            self.finish(started, at);
        }

        /// The hint at `at`, every slot held by running work.
        fn hint_at(&self, at: u64) -> u32 {
            self.secs_when(|| at, || self.running.load(Ordering::Relaxed))
        }

        /// The hints below in whole seconds, as `Retry-After` sends them.
        fn secs(&self, in_use: impl FnOnce() -> usize) -> u32 {
            Refusal::whole_secs(self.millis(in_use))
        }

        fn secs_when(&self, now: impl FnOnce() -> u64, in_use: impl FnOnce() -> usize) -> u32 {
            Refusal::whole_secs(self.millis_when(now, in_use))
        }

        fn secs_at(&self, now: u64, in_use: impl FnOnce() -> usize) -> u32 {
            Refusal::whole_secs(self.millis_at(now, in_use))
        }
    }

    impl Rule {
        fn secs(self, micros: u64) -> u32 {
            Refusal::whole_secs(self.millis(micros))
        }
    }

    #[test]
    fn the_fine_hint_keeps_milliseconds_and_says_one_second_while_nothing_is_known() {
        let times = observed(30, 2);
        assert_eq!(times.millis(|| 2), 1000, "no history: 1 s");
        times.ran(20_000, 10 * SEC);
        assert_eq!(times.millis(|| 0), 20, "idle: the typical 20 ms");
        let _walk = times.start(10 * SEC);
        assert_eq!(
            times.millis_when(|| 10 * SEC + 5_500, || 1),
            15,
            "a 20 ms walk 5.5 ms in: 14.5 ms left, rounded up"
        );
        assert_eq!(times.secs(|| 1), 1, "Retry-After still whole seconds");
        let rule = Rule::Observed { cap: 30_000 };
        assert_eq!(rule.millis(0), 1, "at least 1 ms once work was seen");
        assert_eq!(rule.millis(u64::MAX), 30_000, "capped");
    }

    #[test]
    fn the_window_gives_its_lower_median_and_ninetieth_percentile() {
        let mut recent = Recent::default();
        assert_eq!(recent.median_and_p90(), (0, 0), "nothing seen");
        // Pushed out of order: 10, 9, ..., 1.
        for micros in (1..=10).rev() {
            recent.push(micros);
        }
        assert_eq!(recent.median_and_p90(), (5, 9));
        // Past the window the oldest go: 11..=26 remain.
        for micros in 11..=26 {
            recent.push(micros);
        }
        assert_eq!(recent.median_and_p90(), (18, 25));
    }

    #[test]
    fn work_exactly_as_old_as_the_typical_is_expected_to_run_as_long_again() {
        let times = observed(30, 2);
        for i in 1..=16 {
            times.ran(3 * SEC, i * 10 * SEC);
        }
        let _running = times.start(200 * SEC);
        assert_eq!(times.hint_at(203 * SEC), 3, "not zero, not 1 s");
    }

    #[test]
    fn nothing_seen_says_one_second() {
        let times = observed(30, 2);
        assert_eq!(times.secs(|| 2), 1, "no history, nothing running");
        assert_eq!(times.typical(), Duration::ZERO);
    }

    #[test]
    fn cold_pool_without_an_expectation_says_one_second_whatever_runs() {
        // Two 20 s walks started together; none has ever finished.
        let times = observed(30, 2);
        let _a = times.start(0);
        let _b = times.start(0);
        for at in [1, 10, 19, 600] {
            assert_eq!(
                times.hint_at(at * SEC),
                1,
                "at {at} s: nothing seen says how long work takes; 1 s, not the age"
            );
        }
        assert_eq!(
            times.secs_when(|| 10 * SEC, || 3),
            1,
            "a slot held by a caller says nothing on a cold pool"
        );
    }

    #[test]
    fn cold_pool_does_not_point_the_wrong_way() {
        // One 20 s walk, no history: probed 1 s in (its slot frees in 19 s)
        // and 19 s in (it frees in 1 s).
        for expected in [Duration::ZERO, Duration::from_secs(20)] {
            let times = expecting(30, 1, expected);
            let _walk = times.start(0);
            let (frees_in_19, frees_in_1) = (times.hint_at(SEC), times.hint_at(19 * SEC));
            assert!(
                frees_in_1 <= frees_in_19,
                "expecting {expected:?}: frees in 1 s says {frees_in_1}, in 19 s says {frees_in_19}"
            );
        }
    }

    #[test]
    fn cold_pool_counts_down_the_expected_work() {
        let times = expecting(30, 2, Duration::from_secs(20));
        assert_eq!(
            times.typical(),
            Duration::from_secs(20),
            "expected stands in"
        );
        assert_eq!(times.long(), Duration::from_secs(20));
        assert_eq!(times.secs(|| 0), 20, "idle: the expected work time");
        let _old = times.start(0);
        assert_eq!(times.hint_at(SEC), 19, "started 1 s ago: 19 s left");
        assert_eq!(times.hint_at(19 * SEC), 1, "started 19 s ago: 1 s left");
        assert_eq!(times.hint_at(20 * SEC), 20, "overran: as long again");
        let _young = times.start(15 * SEC);
        assert_eq!(
            times.hint_at(18 * SEC),
            2,
            "the oldest work ends first: 2 s left of 20"
        );
        assert_eq!(times.hint_at(19 * SEC + SEC / 2), 1, "at least 1 s");
    }

    #[test]
    fn observed_work_replaces_the_expectation() {
        let times = expecting(30, 1, Duration::from_secs(20));
        times.ran(2 * SEC, 10 * SEC);
        assert_eq!(
            times.typical(),
            Duration::from_secs(2),
            "what was seen wins"
        );
        assert_eq!(times.long(), Duration::from_secs(2));
        let _walk = times.start(100 * SEC);
        assert_eq!(times.hint_at(101 * SEC), 1, "2 s walks: 1 s left");
    }

    #[test]
    fn work_running_past_typical_is_expected_to_run_as_long_again() {
        let times = observed(30, 2);
        for i in 1..=16 {
            times.ran(SEC, i * 10 * SEC);
        }
        assert_eq!(times.typical(), Duration::from_secs(1));
        // Two orphans of ten minutes' work hold both slots.
        let _a = times.start(200 * SEC);
        let _b = times.start(200 * SEC);
        assert_eq!(
            times.hint_at(200 * SEC + SEC / 2),
            1,
            "younger than typical"
        );
        assert_eq!(
            times.hint_at(205 * SEC),
            5,
            "5 s past a 1 s typical: 5 s more"
        );
        assert_eq!(times.hint_at(219 * SEC), 19);
        assert_eq!(times.hint_at(800 * SEC), 30, "capped");
    }

    #[test]
    fn warm_pool_counts_down_the_typical_duration() {
        let times = observed(30, 1);
        for i in 1..=4 {
            times.ran(20 * SEC, i * 100 * SEC);
        }
        let _walk = times.start(1000 * SEC);
        assert_eq!(times.hint_at(1001 * SEC), 19);
        assert_eq!(times.hint_at(1010 * SEC), 10);
        assert_eq!(times.hint_at(1019 * SEC), 1);
        assert_eq!(times.hint_at(1025 * SEC), 25, "overran: as long again");
    }

    #[test]
    fn a_few_long_outliers_do_not_steer_the_hint() {
        let times = observed(30, 2);
        for i in 1..=14 {
            times.ran(SEC, i * 10 * SEC);
        }
        // One client's two 25 s operations.
        times.ran(25 * SEC, 200 * SEC);
        times.ran(25 * SEC, 200 * SEC);
        assert_eq!(times.typical(), Duration::from_secs(1), "the median holds");
        assert_eq!(
            Refusal::whole_secs(times.idle_ms.load(Ordering::Relaxed)),
            1
        );
        // Everyone refused while 1 s work runs is told 1 s, not 12 (the
        // exponentially weighted mean gave 12, then 7, 5, 3).
        let _a = times.start(300 * SEC);
        let _b = times.start(300 * SEC + SEC / 4);
        assert_eq!(times.hint_at(300 * SEC + SEC / 2), 1);
    }

    #[test]
    fn two_short_pieces_outvote_two_long_ones() {
        let times = observed(30, 2);
        times.ran(25 * SEC, 100 * SEC);
        times.ran(25 * SEC, 100 * SEC);
        assert_eq!(
            times.typical(),
            Duration::from_secs(25),
            "long work is all it has seen"
        );
        times.ran(SEC, 102 * SEC);
        times.ran(SEC, 103 * SEC);
        assert_eq!(times.typical(), Duration::from_secs(1), "the lower median");
    }

    #[test]
    fn long_work_becomes_typical_once_it_is_half_the_window() {
        let times = observed(60, 1);
        for i in 1..=16 {
            times.ran(SEC, i * 10 * SEC);
        }
        for i in 1..=8 {
            times.ran(40 * SEC, 200 * SEC + i * 100 * SEC);
            assert_eq!(times.typical().as_secs(), 1, "after {i} long pieces of 16");
        }
        times.ran(40 * SEC, 2000 * SEC);
        assert_eq!(times.typical().as_secs(), 40, "9 of 16: the norm");
        let _walk = times.start(3000 * SEC);
        assert_eq!(times.hint_at(3010 * SEC), 30);
    }

    #[test]
    fn soonest_end_wins_among_running_work() {
        let times = observed(30, 3);
        for i in 1..=16 {
            times.ran(10 * SEC, i * 100 * SEC);
        }
        let hung = times.start(2000 * SEC);
        let _mid = times.start(2095 * SEC);
        let _young = times.start(2099 * SEC);
        // At 2100: hung has run 100 s (100 s more), mid 5 s (5 s more),
        // young 1 s (9 s more).
        assert_eq!(times.hint_at(2100 * SEC), 5);
        times.finish(hung, 2101 * SEC);
        assert_eq!(times.hint_at(2101 * SEC), 4);
    }

    #[test]
    fn a_slot_held_outside_the_workers_frees_in_the_typical_time() {
        let times = observed(30, 2);
        for i in 1..=16 {
            times.ran(2 * SEC, i * 10 * SEC);
        }
        let _hung = times.start(200 * SEC);
        let at = 260 * SEC;
        assert_eq!(
            times.secs_at(at, || 1),
            30,
            "only the hung work holds a slot"
        );
        assert_eq!(
            times.secs_at(at, || 2),
            2,
            "the other slot is held by a caller: typical"
        );
    }

    #[test]
    fn idle_pool_says_the_typical_duration() {
        let times = observed(30, 1);
        times.ran(2_500_000, 10 * SEC);
        assert_eq!(times.secs(|| 1), 3, "rounded up, nothing running");
        let capped = observed(2, 1);
        capped.ran(100 * SEC, 200 * SEC);
        assert_eq!(capped.secs(|| 1), 2, "capped");
        let short = observed(30, 1);
        short.ran(1, 10 * SEC);
        assert_eq!(short.secs(|| 1), 1, "at least 1 s");
    }

    #[test]
    fn fixed_hint_ignores_what_was_seen() {
        let rule = RetryHint::Fixed(Duration::from_millis(1500)).rule();
        assert_eq!(rule, Rule::Fixed(1500), "kept in milliseconds");
        let times = WorkTimes::new(rule, 2, Duration::ZERO);
        let _walk = times.start(0);
        times.ran(SEC, 5 * SEC);
        assert_eq!(times.secs(|| 1), 2, "rounded up");
        assert_eq!(
            RetryHint::Fixed(Duration::from_secs(u64::MAX)).rule(),
            Rule::Fixed(u32::MAX),
            "saturates"
        );
    }

    #[test]
    fn rule_rounds_up_and_stays_within_one_and_cap() {
        let rule = RetryHint::Observed {
            cap: Duration::from_secs(10),
        }
        .rule();
        assert_eq!(rule.secs(0), 1);
        assert_eq!(rule.secs(1), 1);
        assert_eq!(rule.secs(SEC), 1);
        assert_eq!(rule.secs(SEC + 1), 2, "rounds up");
        assert_eq!(rule.secs(u64::MAX), 10, "capped");
    }

    #[test]
    fn the_running_record_keeps_start_times_oldest_first_as_work_ends() {
        let times = observed(30, 3);
        let a = times.start(10);
        let _b = times.start(20);
        let _c = times.start(30);
        assert_eq!(times.running_starts(), Some(vec![10, 20, 30]));
        times.finish(a, 40);
        assert_eq!(
            times.running_starts(),
            Some(vec![20, 30]),
            "the ended work's start is gone, the rest shifted down in order"
        );
    }

    #[test]
    fn refusals_read_a_whole_hint_while_workers_write() {
        let times = std::sync::Arc::new(observed(30, 4));
        let writer = {
            let times = std::sync::Arc::clone(&times);
            std::thread::spawn(move || {
                let clock = Clock::current();
                for _ in 0..20_000 {
                    let a = times.started(&clock);
                    let b = times.started(&clock);
                    let _ = times.finished(&clock, a);
                    let _ = times.finished(&clock, b);
                }
            })
        };
        let mut read = 0u64;
        while !writer.is_finished() {
            let secs = times.secs(|| 4);
            assert!(
                (1..=30).contains(&secs),
                "a hint within [1, cap], got {secs}"
            );
            read += 1;
        }
        writer.join().unwrap();
        assert!(read > 0);
        assert_eq!(
            times.running.load(Ordering::Relaxed),
            0,
            "every start finished"
        );
    }
}
