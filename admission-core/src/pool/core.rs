//! The pool itself: a named set of N slots in front of N worker threads.
//!
//! This module owns [`Pool`], its shared state and the admission paths
//! (fail-fast, waiting, waiting with a bound). It must never block a runtime
//! thread and never hand out more than N slots.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, TryAcquireError};

use super::{Counters, PoolBuilder, PoolStats, RetryHint, Slot};
use crate::error::ConfigError;
use crate::refusal::{Code, Refusal};
use crate::work::{RegistryWork, WorkError, Workers};

/// What a pool is used as; decides the code of a fail-fast refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A plain pool (registry work): `ADMISSION_SATURATED`.
    Pool,
    /// A loop owner's reservation: `ADMISSION_RESERVATION_EXHAUSTED`.
    Reservation,
}

/// How a caller asks for a slot.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::Admission;
///
/// // HTTP handlers fail fast; a background walker waits, here at most 2 s.
/// let http = Admission::FailFast;
/// let walker = Admission::WaitFor(Duration::from_secs(2));
/// assert_ne!(http, walker);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Admission {
    /// Refuse at once when no slot is free (HTTP callers).
    #[default]
    FailFast,
    /// Wait for a slot, first come first served (background walkers whose
    /// producer is already bounded).
    Wait,
    /// Wait for a slot at most this long, then refuse with
    /// `ADMISSION_WAIT_TIMEOUT`.
    WaitFor(Duration),
}

/// A named set of N slots and the N worker threads that run its work.
///
/// Cloning is cheap and every clone shares the same slots: keep one per
/// purpose for the whole process. Work offloaded through a pool runs on the
/// pool's own threads (not tokio's shared blocking pool), so its admitted work
/// never queues behind anyone else's, and at no instant do more than N pieces
/// of its work run.
///
/// # Examples
///
/// ```
/// use admission_core::{Admission, Pool};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 2).unwrap();
/// let text = pool
///     .run(|| Ok::<_, std::fmt::Error>("# EOF\n".to_owned()), Admission::FailFast)
///     .await
///     .unwrap();
/// assert_eq!(text, "# EOF\n");
/// assert_eq!(pool.stats().in_use, 0);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Pool {
    pub(crate) inner: Arc<PoolInner>,
}

/// The state every clone of a [`Pool`] and every [`Slot`] share.
#[derive(Debug)]
pub(crate) struct PoolInner {
    /// Interned: refusals carry it without a reference count.
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) capacity: usize,
    pub(crate) semaphore: Semaphore,
    pub(crate) counters: Counters,
    pub(crate) retry: super::Rule,
    pub(crate) refusal_status: u16,
    pub(crate) workers: Workers,
}

impl Pool {
    /// A pool of `capacity` slots and as many worker threads, with the
    /// default retry hint.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when `capacity` is 0 or above
    /// [`MAX_CAPACITY`](crate::MAX_CAPACITY), or `name` is empty.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// assert!(Pool::new("registry", 2).is_ok());
    /// assert!(Pool::new("registry", 0).is_err());
    /// ```
    pub fn new(name: impl Into<String>, capacity: usize) -> Result<Pool, ConfigError> {
        PoolBuilder::new(name).capacity(capacity).build()
    }

    /// A builder for the less common settings (retry hint).
    pub fn builder(name: impl Into<String>) -> PoolBuilder {
        PoolBuilder::new(name)
    }

    pub(crate) fn from_parts(
        name: String,
        capacity: usize,
        retry: RetryHint,
        refusal_status: u16,
        kind: Kind,
    ) -> Result<Pool, ConfigError> {
        if name.is_empty() {
            return Err(ConfigError::EmptyName);
        }
        if capacity == 0 {
            return Err(ConfigError::ZeroCapacity { pool: name });
        }
        if capacity > crate::error::MAX_CAPACITY {
            return Err(ConfigError::CapacityTooLarge {
                pool: name,
                capacity,
            });
        }
        if !retry.is_valid() {
            return Err(ConfigError::RetryHintTooSmall { pool: name });
        }
        if !matches!(refusal_status, 429 | 503) {
            return Err(ConfigError::RefusalStatus {
                pool: name,
                status: refusal_status,
            });
        }
        let name = crate::refusal::intern(name);
        let workers = Workers::spawn(name, capacity).map_err(|err| ConfigError::Spawn {
            pool: name.to_string(),
            kind: err.kind(),
        })?;
        Ok(Pool {
            inner: Arc::new(PoolInner {
                name,
                kind,
                capacity,
                semaphore: Semaphore::new(capacity),
                counters: Counters::default(),
                retry: retry.rule(),
                refusal_status,
                workers,
            }),
        })
    }

    /// The pool's name, as given at construction.
    pub fn name(&self) -> &str {
        self.inner.name
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Takes a slot if one is free, or refuses at once.
    ///
    /// The refusal's code is `ADMISSION_SATURATED`
    /// (`ADMISSION_RESERVATION_EXHAUSTED` for a reservation), or
    /// `ADMISSION_SHUTTING_DOWN` once the pool is closed. It never waits, never
    /// allocates and never touches the work.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when no slot is free or the pool is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let slot = pool.try_admit().unwrap();
    /// assert!(pool.try_admit().is_err());
    /// drop(slot);
    /// assert!(pool.try_admit().is_ok());
    /// ```
    pub fn try_admit(&self) -> Result<Slot, Refusal> {
        let code = match self.inner.kind {
            Kind::Pool => Code::Saturated,
            Kind::Reservation => Code::ReservationExhausted,
        };
        self.try_admit_coded(code)
    }

    /// [`try_admit`](Self::try_admit) with the code a saturated refusal carries.
    #[inline]
    pub(crate) fn try_admit_coded(&self, saturated: Code) -> Result<Slot, Refusal> {
        match self.inner.semaphore.try_acquire() {
            Ok(permit) => {
                permit.forget();
                Ok(Slot::new(Arc::clone(&self.inner)))
            }
            Err(TryAcquireError::NoPermits) => Err(self.inner.refuse(saturated)),
            Err(TryAcquireError::Closed) => Err(self.inner.refuse(Code::ShuttingDown)),
        }
    }

    /// Waits for a slot, first come first served.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a waiter dropped before it is admitted takes nothing and
    /// keeps no place in the queue; a slot released at that moment goes to the
    /// next waiter or back to the pool.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] with `ADMISSION_SHUTTING_DOWN` when the pool is closed
    /// before or while waiting.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let slot = pool.admit().await.unwrap();
    /// assert_eq!(pool.stats().in_use, 1);
    /// drop(slot);
    /// # }
    /// ```
    pub async fn admit(&self) -> Result<Slot, Refusal> {
        match self.inner.semaphore.acquire().await {
            Ok(permit) => {
                permit.forget();
                Ok(Slot::new(Arc::clone(&self.inner)))
            }
            Err(_closed) => Err(self.inner.refuse(Code::ShuttingDown)),
        }
    }

    /// Waits for a slot at most `timeout`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`admit`](Self::admit).
    ///
    /// # Errors
    ///
    /// A [`Refusal`] with `ADMISSION_WAIT_TIMEOUT` when no slot freed in
    /// time, or `ADMISSION_SHUTTING_DOWN` when the pool is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::{Code, Pool};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let refusal = pool.admit_timeout(Duration::from_millis(1)).await.unwrap_err();
    /// assert_eq!(refusal.code(), Code::WaitTimedOut);
    /// # }
    /// ```
    pub async fn admit_timeout(&self, timeout: Duration) -> Result<Slot, Refusal> {
        match tokio::time::timeout(timeout, self.admit()).await {
            Ok(admitted) => admitted,
            Err(_elapsed) => Err(self.inner.refuse(Code::WaitTimedOut)),
        }
    }

    /// Takes a slot the way `admission` says.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as [`admit`](Self::admit).
    ///
    /// # Errors
    ///
    /// A [`Refusal`] as [`try_admit`](Self::try_admit),
    /// [`admit`](Self::admit) or [`admit_timeout`](Self::admit_timeout) give.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Admission, Pool};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let slot = pool.admit_with(Admission::Wait).await.unwrap();
    /// assert!(pool.admit_with(Admission::FailFast).await.is_err());
    /// drop(slot);
    /// # }
    /// ```
    pub async fn admit_with(&self, admission: Admission) -> Result<Slot, Refusal> {
        match admission {
            Admission::FailFast => self.try_admit(),
            Admission::Wait => self.admit().await,
            Admission::WaitFor(timeout) => self.admit_timeout(timeout).await,
        }
    }

    /// The one entry point for registry work: admits as `admission` says,
    /// runs `work` on one of the pool's threads with the slot moved into it,
    /// and returns its result.
    ///
    /// HTTP handlers pass [`Admission::FailFast`]; a background walker whose
    /// producer is already bounded passes [`Admission::Wait`].
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before admission takes nothing. Dropping it after
    /// admission does **not** cancel the work: the work is orphaned, goes on
    /// to its end on its thread and keeps its slot until then. An orphan that
    /// fails is reported once (a `tracing` event and a counter).
    ///
    /// # Errors
    ///
    /// [`WorkError::Refused`] when not admitted, [`WorkError::Failed`] with
    /// the work's own error, [`WorkError::Panicked`] when it panicked, and
    /// [`WorkError::Cancelled`] when shutdown dropped it before it started.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Admission, Pool, WorkError};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let failed = pool
    ///     .run(|| Err::<(), _>(std::fmt::Error), Admission::FailFast)
    ///     .await;
    /// assert_eq!(failed, Err(WorkError::Failed(std::fmt::Error)));
    /// # }
    /// ```
    pub async fn run<W: RegistryWork>(
        &self,
        work: W,
        admission: Admission,
    ) -> Result<W::Output, WorkError<W::Error>> {
        let slot = self.admit_with(admission).await?;
        slot.offload(work).await
    }

    /// A snapshot of the pool's counters.
    pub fn stats(&self) -> PoolStats {
        self.inner.stats()
    }

    /// The retry hint, in whole seconds, a refusal would carry now.
    pub fn retry_after_secs(&self) -> u32 {
        self.inner.retry_after_secs()
    }

    /// Whether shutdown has closed this pool.
    pub fn is_closed(&self) -> bool {
        self.inner.semaphore.is_closed()
    }

    /// Counts one caller served by a shared (coalesced) result.
    pub(crate) fn count_coalesced(&self) {
        self.inner
            .counters
            .coalesced
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether two handles are the same pool.
    pub fn same_pool(&self, other: &Pool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl PoolInner {
    #[inline]
    pub(crate) fn refuse(&self, code: Code) -> Refusal {
        self.counters.refused.add(1);
        Refusal::new(
            self.name,
            code,
            self.retry_after_secs(),
            self.refusal_status,
        )
    }

    #[inline]
    pub(crate) fn retry_after_secs(&self) -> u32 {
        self.retry.secs(self.counters.recent_micros())
    }

    pub(crate) fn in_use(&self) -> usize {
        self.capacity
            .saturating_sub(self.semaphore.available_permits())
    }

    pub(crate) fn stats(&self) -> PoolStats {
        self.counters
            .snapshot(self.name, self.capacity, self.in_use())
    }

    /// Refuses every new admission and wakes waiters with a refusal.
    pub(crate) fn close_gate(&self) {
        self.semaphore.close();
    }
}
