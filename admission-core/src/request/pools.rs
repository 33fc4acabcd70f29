//! The request classes' pools and the entry point for pure work.
//!
//! This module owns [`RequestPools`] and [`RequestPools::execute_pure`], which
//! picks the inherited lease, the active reservation or a fresh lease, in that
//! order. It must never let a reserved call take request capacity, nor a
//! request take reserved capacity.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::adaptive::{AdaptiveLimit, Controller};
use super::context::{self, Context};
use super::{Class, Lease};
use crate::caller::Caller;
use crate::error::ConfigError;
use crate::pool::job::{HeldCapacity, Job};
use crate::pool::{Admission, HasPools, Pool, RegistryWork, RetryHint, WorkError};
use crate::refusal::{Code, Refusal};
use crate::stats::PoolStats;

static GLOBAL: OnceLock<RequestPools> = OnceLock::new();

/// The request classes' pools: *work* for mutations and *control* for reads
/// and terminal control, each with its own slots and worker threads (started
/// only when work is offloaded: a class used for leases starts none).
///
/// # Examples
///
/// ```
/// use admission_core::{Class, Code, RequestPools};
///
/// let requests = RequestPools::new(2, 4).unwrap();
/// let a = requests.try_lease(Class::Work).unwrap();
/// let b = requests.try_lease(Class::Work).unwrap();
/// assert_eq!(requests.try_lease(Class::Work).unwrap_err().code(), Code::Saturated);
/// assert!(requests.try_lease(Class::Control).is_ok(), "classes do not share slots");
/// # drop((a, b));
/// ```
#[derive(Debug, Clone)]
pub struct RequestPools {
    work: Pool,
    control: Pool,
    /// Per class (work, control), the controller of an adaptive limit.
    adaptive: [Option<Arc<Controller>>; 2],
}

/// Builds [`RequestPools`]; see [`RequestPools::builder`].
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RequestPoolsBuilder {
    name: Option<String>,
    work: usize,
    control: usize,
    retry: RetryHint,
    adaptive: [Option<AdaptiveLimit>; 2],
}

impl RequestPoolsBuilder {
    /// Names the set: its classes' pools are named `{name}.work` and
    /// `{name}.control` (in refusals, logs, statistics and the `pool` label
    /// of every metric) instead of `work` and `control`. A process with
    /// two sets of request pools (a queued one and a fail-fast one, or one
    /// per tenant scope) names them apart so their metrics never share a
    /// series; one unnamed set keeps today's names, and a second unnamed
    /// set, or a second set of one name, is a warning at construction.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// let public = RequestPools::new(2, 4).unwrap();
    /// let admin = RequestPools::builder().name("admin").build().unwrap();
    /// assert_eq!(public.pool(Class::Work).name(), "work");
    /// assert_eq!(admin.pool(Class::Work).name(), "admin.work");
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Slots for mutations (default 2).
    pub fn work(mut self, slots: usize) -> Self {
        self.work = slots;
        self
    }

    /// Slots for reads and terminal control (default 4).
    pub fn control(mut self, slots: usize) -> Self {
        self.control = slots;
        self
    }

    /// The retry hint of both classes' refusals.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::pool::RetryHint;
    /// use admission_core::{Class, RequestPools};
    ///
    /// let requests = RequestPools::builder()
    ///     .work(1)
    ///     .retry_hint(RetryHint::Fixed(Duration::from_secs(4)))
    ///     .build()
    ///     .unwrap();
    /// let _held = requests.try_lease(Class::Work).unwrap();
    /// assert_eq!(requests.try_lease(Class::Work).unwrap_err().retry_after_secs(), 4);
    /// ```
    pub fn retry_hint(mut self, retry: RetryHint) -> Self {
        self.retry = retry;
        self
    }

    /// Makes `class`'s capacity adaptive: it gets `limit`'s ceiling as its
    /// slots (and worker threads), and how many of them callers may take
    /// moves between the floor and the ceiling, learned from the latency
    /// and throughput of its leases (from admission to the end of the
    /// response). It never refuses or pins a request to measure: it grows
    /// while more concurrency is served without a queue, cuts by Little's
    /// law when latency rises above the work's own, re-learns the work's
    /// own latency only when cutting concurrency cost throughput (so a
    /// standing queue cannot drift it upward), and halves while most leases
    /// time out. The current limit is [`PoolStats::limit`] and the
    /// `admission_slots_limit` metric. Fixed capacity is the default.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{AdaptiveLimit, Class, Code, RequestPools};
    ///
    /// let requests = RequestPools::builder()
    ///     .adaptive(Class::Work, AdaptiveLimit::new(1, 32))
    ///     .build()
    ///     .unwrap();
    /// let _first = requests.try_lease(Class::Work).unwrap();
    /// let refused = requests.try_lease(Class::Work).unwrap_err();
    /// assert_eq!(refused.code(), Code::Saturated, "the limit starts at the floor");
    /// ```
    pub fn adaptive(mut self, class: Class, limit: AdaptiveLimit) -> Self {
        self.adaptive[class_index(class)] = Some(limit);
        self
    }

    /// Builds both pools.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a class has 0 slots or too many, the retry
    /// hint is below 1 ms, or an adaptive limit is out of range
    /// ([`ConfigError::BadAdaptiveLimit`]).
    pub fn build(self) -> Result<RequestPools, ConfigError> {
        let pool = |class: Class, slots| -> Result<(Pool, Option<Arc<Controller>>), ConfigError> {
            let adaptive = self.adaptive[class_index(class)];
            if let Some(limit) = adaptive
                && !limit.is_valid()
            {
                return Err(ConfigError::BadAdaptiveLimit {
                    pool: class.as_str().to_owned(),
                });
            }
            let name = match &self.name {
                Some(set) => format!("{set}.{}", class.as_str()),
                None => class.as_str().to_owned(),
            };
            let pool = Pool::builder(name)
                .capacity(adaptive.map_or(slots, AdaptiveLimit::ceiling))
                .retry_hint(self.retry)
                .build()?;
            let controller = adaptive.map(|limit| Arc::new(Controller::new(pool.clone(), limit)));
            Ok((pool, controller))
        };
        warn_if_set_named_twice(self.name.as_deref());
        let (work, work_adaptive) = pool(Class::Work, self.work)?;
        let (control, control_adaptive) = pool(Class::Control, self.control)?;
        Ok(RequestPools {
            work,
            control,
            adaptive: [work_adaptive, control_adaptive],
        })
    }
}

impl RequestPools {
    /// Pools of `work` and `control` slots.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a class has 0 slots or too many.
    pub fn new(work: usize, control: usize) -> Result<RequestPools, ConfigError> {
        Self::builder().work(work).control(control).build()
    }

    /// A builder, with *work* 2 and *control* 4 slots.
    pub fn builder() -> RequestPoolsBuilder {
        RequestPoolsBuilder {
            name: None,
            work: 2,
            control: 4,
            retry: RetryHint::default(),
            adaptive: [None; 2],
        }
    }

    /// The pool behind a class.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// assert_eq!(RequestPools::new(2, 4).unwrap().pool(Class::Control).capacity(), 4);
    /// ```
    pub fn pool(&self, class: Class) -> &Pool {
        match class {
            Class::Work => &self.work,
            Class::Control => &self.control,
        }
    }

    /// Checks, where the app is built, a cost declared for `class`'s
    /// leases (a route's, see [`Caller::with_cost`]): the HTTP adapters
    /// call it for every route that declares one, so a cost the class can
    /// never hold is a construction error, not an admission that takes the
    /// whole class at run time.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CostAboveCapacity`] when `cost` is above the class's
    /// capacity (the one it was built with: a live limit lowered below the
    /// cost later makes the lease wait, or be refused as saturated, until
    /// it is raised).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU8;
    /// use admission_core::{Class, ConfigError, RequestPools};
    ///
    /// let requests = RequestPools::new(2, 4).unwrap();
    /// let four = NonZeroU8::new(4).unwrap();
    /// assert_eq!(requests.check_cost(Class::Control, four), Ok(()));
    /// assert!(matches!(
    ///     requests.check_cost(Class::Work, four),
    ///     Err(ConfigError::CostAboveCapacity { cost: 4, capacity: 2, .. })
    /// ));
    /// ```
    pub fn check_cost(&self, class: Class, cost: std::num::NonZeroU8) -> Result<(), ConfigError> {
        self.pool(class).check_cost(cost)
    }

    /// Switches both classes between enforcing (the default) and shadow
    /// mode ([`Pool::set_shadow`]), for the next lease on: every adapter's
    /// layer over these pools then serves what it would have refused or
    /// queued, and counts it (`would_refuse_by_code`, `would_wait` in each
    /// class's [`stats`](Pool::stats)). One class alone:
    /// `requests.pool(class).set_shadow(..)`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, Code, RequestPools};
    ///
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// requests.set_shadow(true);
    /// let _one = requests.try_lease(Class::Work).unwrap();
    /// let _two = requests.try_lease(Class::Work).expect("served in shadow mode");
    /// assert_eq!(requests.pool(Class::Work).stats().would_refuse_with(Code::Saturated), 1);
    /// ```
    pub fn set_shadow(&self, shadow: bool) {
        self.work.set_shadow(shadow);
        self.control.set_shadow(shadow);
    }

    /// Records both classes' leases into `trace` (see
    /// [`Pool::trace_into`]): each lease when it is released, with how long
    /// it was held, and each refusal when it is made.
    ///
    /// # Errors
    ///
    /// [`ConfigError::AlreadyTraced`] when a class's pool already records
    /// into another trace.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools, trace::Trace};
    ///
    /// let pools = RequestPools::new(1, 1)?;
    /// let trace = Trace::new(1024)?;
    /// pools.trace_into(&trace)?;
    /// drop(pools.try_lease(Class::Work)?);
    /// let mut lines = Vec::new();
    /// trace.write_json_lines(&mut lines)?;
    /// assert!(String::from_utf8(lines)?.contains(r#""outcome":"admitted""#));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trace_into(&self, trace: &crate::trace::Trace) -> Result<(), ConfigError> {
        self.work.trace_into(trace)?;
        self.control.trace_into(trace)
    }

    /// Takes a lease of `class`, or refuses at once with
    /// `ADMISSION_SATURATED` naming the class.
    ///
    /// One request, one lease per class: inside the scope of a lease of the
    /// same class and pools ([`Lease::scope`], which both adapters and
    /// `#[admitted]` run a request under), this returns a share of that
    /// lease instead of taking a second slot. So stacked layers, a layer and
    /// the attribute, or a router-wide and a per-scope middleware hold one
    /// slot per request, and an idle server never refuses itself.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] when the class has no free slot or is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let outer = requests.try_lease(Class::Work).unwrap();
    /// let inner = outer.scope(async { requests.try_lease(Class::Work) }).await;
    /// assert!(inner.is_ok(), "the request's own lease is shared, not refused");
    /// assert_eq!(requests.pool(Class::Work).stats().in_use, 1);
    /// # }
    /// ```
    pub fn try_lease(&self, class: Class) -> Result<Lease, Refusal> {
        self.try_lease_for(class, Caller::current())
    }

    /// [`try_lease`](Self::try_lease) for `caller` instead of the task's
    /// current one: what an adapter does with the caller it read from a
    /// request's headers, without a scope around the admission. A task
    /// that already holds a lease of `class` still shares it, topped up to
    /// `caller`'s cost when that is more (a costly route under a
    /// router-wide layer): the slots on top are admitted as `caller`'s, all
    /// or none, and go back when the returned lease's last share does.
    ///
    /// # Errors
    ///
    /// As [`try_lease`](Self::try_lease)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Class, Criticality, RequestPools};
    ///
    /// let requests = RequestPools::new(2, 4).unwrap();
    /// let _one = requests.try_lease(Class::Work).unwrap();
    /// let shed = requests.try_lease_for(Class::Work, Caller::new(Criticality::Sheddable));
    /// assert_eq!(shed.unwrap_err().criticality(), Criticality::Sheddable, "half the class is its share");
    /// ```
    pub fn try_lease_for(&self, class: Class, caller: Caller) -> Result<Lease, Refusal> {
        let pool = self.pool(class);
        if let Some(lease) = Lease::held_in(pool) {
            return match lease.short_of(&caller) {
                None => Ok(lease),
                Some(rest) => pool
                    .try_admit_coded_for(pool.saturated_code(), &rest)
                    .map(|slot| lease.topped_up(slot))
                    .map_err(|refusal| pool.spread(refusal)),
            };
        }
        pool.try_admit_coded_for(pool.saturated_code(), &caller)
            .map(|slot| self.lease_of(slot, class))
            .map_err(|refusal| pool.spread(refusal))
    }

    /// Takes a lease of `class` the way `admission` says: fail fast, wait,
    /// wait at most a bound, or wait in the class pool's bounded queue. A
    /// request that already holds a lease of `class` shares it, topped up
    /// to the current caller's cost as [`try_lease_for`](Self::try_lease_for)
    /// says (the slots on top admitted as `admission` says).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a caller dropped while it waits takes nothing and
    /// leaves the line.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] as [`Pool::admit_with`] gives.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Admission, Class, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let lease = requests.lease_with(Class::Work, Admission::Queue).await.unwrap();
    /// assert_eq!(lease.class(), Class::Work);
    /// # }
    /// ```
    pub async fn lease_with(&self, class: Class, admission: Admission) -> Result<Lease, Refusal> {
        let pool = self.pool(class);
        if let Some(lease) = Lease::held_in(pool) {
            return match lease.short_of(&Caller::current()) {
                None => Ok(lease),
                Some(rest) => pool
                    .admit_with_for(admission, Some(rest))
                    .await
                    .map(|slot| lease.topped_up(slot)),
            };
        }
        pool.admit_with(admission)
            .await
            .map(|slot| self.lease_of(slot, class))
    }

    fn lease_of(&self, slot: crate::pool::Slot, class: Class) -> Lease {
        Lease::new(slot, class, self.adaptive[class_index(class)].as_ref())
    }

    /// Waits for a lease of `class`; inside a lease of the same class, shares
    /// it as [`try_lease`](Self::try_lease) does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before admission, it takes nothing.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] with `ADMISSION_SHUTTING_DOWN` when the class is closed,
    /// or `ADMISSION_REENTRANT` when the task holds every slot of the class
    /// outside a lease scope (see [`Pool::admit`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let lease = requests.lease(Class::Work).await.unwrap();
    /// assert_eq!(lease.class(), Class::Work);
    /// # }
    /// ```
    pub async fn lease(&self, class: Class) -> Result<Lease, Refusal> {
        self.lease_with(class, Admission::Wait).await
    }

    /// Waits for a lease of `class` at most `timeout`; inside a lease of the
    /// same class, shares it as [`try_lease`](Self::try_lease) does.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before admission, it takes nothing.
    ///
    /// # Errors
    ///
    /// A [`Refusal`] with `ADMISSION_WAIT_TIMEOUT` when no slot freed in
    /// time, or as [`lease`](Self::lease) refuses.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::{Class, Code, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// // Another request, served on another thread, holds the only slot.
    /// let other = requests.clone();
    /// let _held = std::thread::spawn(move || other.try_lease(Class::Work).unwrap())
    ///     .join()
    ///     .unwrap();
    /// let refusal = requests
    ///     .lease_timeout(Class::Work, Duration::from_millis(5))
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(refusal.code(), Code::WaitTimedOut);
    ///
    /// // Holding the only slot itself, a caller is refused at once instead.
    /// drop(_held);
    /// let _mine = requests.try_lease(Class::Work).unwrap();
    /// let refusal = requests.pool(Class::Work).admit().await.unwrap_err();
    /// assert_eq!(refusal.code(), Code::Reentrant);
    /// # }
    /// ```
    pub async fn lease_timeout(&self, class: Class, timeout: Duration) -> Result<Lease, Refusal> {
        self.lease_with(class, Admission::WaitFor(timeout)).await
    }

    /// The one entry point for pure work. It runs `work` under, in order:
    ///
    /// 1. the request lease the task inherited (no second slot is taken;
    ///    `class` is ignored);
    /// 2. the active loop reservation: one of its slots, per call, refused
    ///    with `ADMISSION_RESERVATION_EXHAUSTED` when every slot is held;
    /// 3. a fresh lease of `class`, refused with
    ///    `ADMISSION_LEASE_UNAVAILABLE` when none is free.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future does not cancel work that started: it keeps its
    /// slot (or its share of the lease) until it ends.
    ///
    /// # Errors
    ///
    /// [`WorkError::Refused`] when no capacity was found, or the work's own
    /// end as [`Pool::run`] describes.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, Code, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let _held = requests.try_lease(Class::Work).unwrap();
    /// let refused = requests
    ///     .execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(()))
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(refused.refusal().unwrap().code(), Code::LeaseUnavailable);
    /// # }
    /// ```
    pub async fn execute_pure<W: RegistryWork>(
        &self,
        class: Class,
        work: W,
    ) -> Result<W::Output, WorkError<W::Error>> {
        let job = match context::current() {
            // The work holds a share of the lease until it ends.
            Context::Lease(lease) => Ok(Job::new(lease.pool().clone(), lease.share(), work)),
            Context::Reservation(pool) => pool
                .try_admit_for_work(Code::ReservationExhausted)
                .map(|slot| Job::new(pool, HeldCapacity::Slot(slot), work)),
            // The fresh lease serves this one call: its slot goes straight
            // into the work.
            Context::Empty => {
                let pool = self.pool(class);
                pool.try_admit_for_work(Code::LeaseUnavailable)
                    .map(|slot| Job::new(pool.clone(), HeldCapacity::Slot(slot), work))
            }
        }?;
        job.spawn().await
    }

    /// Makes `self` the process-wide request pools that
    /// [`global`](Self::global) returns (and `#[admitted]` handlers use).
    /// Call it once at startup, before the first request.
    ///
    /// It serves `#[admitted]` handlers that name no `pools`. Everything
    /// else takes its pools as a value: build them at startup and give the
    /// layer (or the handler's state) a clone.
    ///
    /// # In tests
    ///
    /// The global pools are one set for the whole process: every test of a
    /// binary (libtest runs them in parallel, on threads of one process)
    /// shares their slots, so test servers refuse each other's requests
    /// under load. A test server should get its own `RequestPools` (its
    /// layer's, or `#[admitted(pools = ...)]`), and a test that needs the
    /// global ones should live in a test binary of its own.
    ///
    /// # Errors
    ///
    /// [`ConfigError::GlobalAlreadySet`] when global pools were already
    /// installed or already created by a call to [`global`](Self::global).
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{ConfigError, RequestPools};
    ///
    /// fn main() -> Result<(), Box<dyn std::error::Error>> {
    ///     RequestPools::new(3, 6)?.install_global()?;
    ///     assert_eq!(RequestPools::global().pool(admission_core::Class::Work).capacity(), 3);
    ///     let again = RequestPools::new(1, 1)?.install_global();
    ///     assert_eq!(again, Err(ConfigError::GlobalAlreadySet), "only once");
    ///     Ok(())
    /// }
    /// ```
    pub fn install_global(self) -> Result<(), ConfigError> {
        GLOBAL.set(self).map_err(|_| ConfigError::GlobalAlreadySet)
    }

    /// The process-wide request pools: those given to
    /// [`install_global`](Self::install_global), or else *work* 2 and
    /// *control* 4 with the defaults, created on first use.
    ///
    /// # Panics
    ///
    /// When the default pools cannot start their worker threads.
    pub fn global() -> &'static RequestPools {
        GLOBAL.get_or_init(|| {
            RequestPools::builder()
                .build()
                .unwrap_or_else(|err| panic!("default request pools: {err}"))
        })
    }

    /// Snapshots of both classes' pools, *work* first.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::RequestPools;
    ///
    /// let [work, control] = RequestPools::new(2, 4).unwrap().stats();
    /// assert_eq!((work.capacity, control.capacity), (2, 4));
    /// ```
    pub fn stats(&self) -> [PoolStats; 2] {
        [self.work.stats(), self.control.stats()]
    }
}

/// Warns, once per name, when a second set of request pools of one name
/// (or a second unnamed set) is built: the two would export their metrics
/// as the same series. Once per name: a test binary that builds a set per
/// test is told once, not per test.
fn warn_if_set_named_twice(name: Option<&str>) {
    static BUILT: Mutex<BTreeMap<String, u8>> = Mutex::new(BTreeMap::new());
    let set = name.unwrap_or_default();
    let builds = {
        let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
        let builds = built.entry(set.to_owned()).or_default();
        *builds = builds.saturating_add(1);
        *builds
    };
    if builds == 2 {
        tracing::warn!(
            set,
            "a second set of request pools of this name: their metrics share series; \
             name each set with `RequestPools::builder().name(..)`"
        );
    }
}

const fn class_index(class: Class) -> usize {
    match class {
        Class::Work => 0,
        Class::Control => 1,
    }
}

impl HasPools for RequestPools {
    fn each_pool(&self, each: &mut dyn FnMut(&Pool)) {
        each(&self.work);
        each(&self.control);
    }
}
