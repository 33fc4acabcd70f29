//! Construction of pools with every setting checked up front.
//!
//! This module owns [`PoolBuilder`]. It must never let a pool exist with a
//! setting out of range: every check runs in [`PoolBuilder::build`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use super::gate::Kind;
use super::permits::Shares;
use super::{Pool, QueuePolicy, RetryHint};
use crate::caller::Criticality;
use crate::error::ConfigError;

/// Builds a [`Pool`]; every setting is checked in [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::ConfigError;
/// use admission_core::pool::{Pool, RetryHint};
///
/// let pool = Pool::builder("registry")
///     .capacity(2)
///     .retry_hint(RetryHint::Observed { cap: Duration::from_secs(10) })
///     .build()
///     .unwrap();
/// assert_eq!(pool.capacity(), 2);
///
/// let err = Pool::builder("registry")
///     .capacity(2)
///     .retry_hint(RetryHint::Fixed(Duration::ZERO))
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, ConfigError::RetryHintTooSmall { .. }));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PoolBuilder {
    name: String,
    capacity: usize,
    retry: RetryHint,
    expected_work: Duration,
    shares: Shares,
    queue: Option<QueuePolicy>,
    keep_alive: Duration,
}

impl PoolBuilder {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            capacity: 1,
            retry: RetryHint::default(),
            expected_work: Duration::ZERO,
            shares: Shares::default(),
            queue: None,
            keep_alive: super::workers::KEEP_ALIVE,
        }
    }

    /// The number of slots, and the most worker threads (default 1).
    ///
    /// The threads start on demand: one when work finds no idle thread to
    /// take it, up to this many, and each exits after it has been idle for
    /// the [`keep_alive`](Self::keep_alive). A pool whose slots are only
    /// held (a request class used for leases) starts none.
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The share of the slots `criticality` may fill, in percent: work of
    /// that level is admitted only while fewer slots than that share are in
    /// use (at least one slot). Defaults: critical and default 100,
    /// sheddable 50. Critical stays 100, and no level may have more than a
    /// more critical one; [`build`](Self::build) refuses anything else.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Criticality, Pool};
    ///
    /// // Keep a quarter of the pool for critical work.
    /// let pool = Pool::builder("registry")
    ///     .capacity(8)
    ///     .share(Criticality::Default, 75)
    ///     .share(Criticality::Sheddable, 25)
    ///     .build();
    /// assert!(pool.is_ok());
    /// let wrong = Pool::builder("registry").share(Criticality::Sheddable, 0).build();
    /// assert!(wrong.is_err());
    /// ```
    pub fn share(mut self, criticality: Criticality, percent: u8) -> Self {
        self.shares.set(criticality, percent);
        self
    }

    /// The bounded queue [`Admission::Queue`](crate::Admission::Queue)
    /// callers wait in (default:
    /// [`QueuePolicy::for_capacity`]).
    pub fn queue(mut self, queue: QueuePolicy) -> Self {
        self.queue = Some(queue);
        self
    }

    /// How long an idle worker thread waits for work before it exits
    /// (default 10 s, as tokio's blocking pool). The next work starts a
    /// thread again; zero makes every thread exit as soon as it finds no
    /// work.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::builder("registry")
    ///     .capacity(4)
    ///     .keep_alive(Duration::from_secs(60))
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(pool.capacity(), 4);
    /// ```
    pub fn keep_alive(mut self, keep_alive: Duration) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// How refusals compute `Retry-After` (default: observed, capped at 30 s).
    pub fn retry_hint(mut self, retry: RetryHint) -> Self {
        self.retry = retry;
        self
    }

    /// How long the pool's work is expected to take, used until the pool
    /// has seen a piece of its work end (default: no expectation).
    ///
    /// Until then it stands in for the typical duration the pool learns
    /// from its work: the observed `Retry-After` is the expected remaining
    /// time of the running work, at least 1 s (see
    /// [`RetryHint::Observed`]); a caller whose deadline leaves less than
    /// this is refused with `ADMISSION_BUDGET_TOO_SHORT`; and the bounded
    /// queue's times derive from it. Without it a cold pool says
    /// `Retry-After: 1` whatever runs, and neither refuses short deadlines
    /// nor derives queue times until work has ended. From the first piece
    /// of work that ends, what the pool has seen replaces it. Zero means no
    /// expectation.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::Pool;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // Registry walks take about 20 s.
    /// let pool = Pool::builder("registry")
    ///     .capacity(1)
    ///     .expected_work(Duration::from_secs(20))
    ///     .build()
    ///     .unwrap();
    /// let (release, held) = std::sync::mpsc::channel::<()>();
    /// let walk = pool
    ///     .try_admit()
    ///     .unwrap()
    ///     .offload(move || held.recv().map_err(|_| std::fmt::Error));
    /// // The walk has just started: its slot frees in about 20 s.
    /// let refusal = pool.try_admit().unwrap_err();
    /// assert!((19..=20).contains(&refusal.retry_after_secs()));
    /// release.send(()).unwrap();
    /// walk.await.unwrap();
    /// # }
    /// ```
    pub fn expected_work(mut self, expected: Duration) -> Self {
        self.expected_work = expected;
        self
    }

    /// Builds the pool; its worker threads start when work needs them.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for an empty name, a capacity of 0 or above
    /// [`MAX_CAPACITY`](crate::pool::MAX_CAPACITY), or a retry hint below
    /// 1 ms.
    pub fn build(self) -> Result<Pool, ConfigError> {
        warn_if_built_repeatedly(&self.name);
        self.build_as(Kind::Pool)
    }

    /// Builds the pool behind a loop owner's reservation.
    pub(crate) fn build_reservation(self) -> Result<Pool, ConfigError> {
        self.build_as(Kind::Reservation)
    }

    fn build_as(self, kind: Kind) -> Result<Pool, ConfigError> {
        Pool::from_parts(
            self.name,
            self.capacity,
            self.retry,
            self.expected_work,
            self.shares,
            self.queue,
            kind,
            self.keep_alive,
        )
    }
}

/// How many pools of one name a process builds before it is told: a pool
/// is built once at startup, so a name built this often is a pool built
/// per request (or per call), which admits everything and starts threads
/// for each.
pub(crate) const REPEATED_BUILDS: u64 = 8;

/// Warns when pools of `name` have been built [`REPEATED_BUILDS`] times,
/// and again at each eightfold more (64, 512, …), so a pool built per
/// request is logged a handful of times, not per request.
fn warn_if_built_repeatedly(name: &str) {
    static BUILT: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
    let built = {
        let mut table = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
        let count = table
            .get_or_insert_with(HashMap::new)
            .entry(name.to_owned())
            .or_default();
        *count += 1;
        *count
    };
    let mut threshold = REPEATED_BUILDS;
    while threshold < built {
        threshold = threshold.saturating_mul(8);
    }
    if built == threshold {
        tracing::warn!(
            pool = name,
            built,
            "pools of this name built repeatedly: build a pool once, at startup, \
             and pass clones of it (a pool built per request admits everything)"
        );
    }
}
