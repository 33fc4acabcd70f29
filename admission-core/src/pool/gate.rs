//! The pool itself: a named set of N slots in front of N worker threads.
//!
//! This module owns [`Pool`], its shared state and the admission paths
//! (fail-fast, waiting, waiting with a bound), and the reporting of a
//! reentrant wait (a programming error: counted on its own, logged once per
//! call site). It must never block a runtime thread, never hand out more
//! than N slots, and never let a task wait forever for a slot that only its
//! own slots could free.

use std::collections::HashSet;
use std::future::{Future, poll_fn};
use std::panic::Location;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::estimate::WorkTimes;
use super::flows::{Flow, Flows, Standing};
use super::holders::Holders;
use super::permits::{
    Ask, Enqueued, Key, NO_FLOW, NoSlot, Patience, Permits, QueuePolicy, Shares, Shed, SlotId,
    Ticket,
};
use super::stats::Counters;
use super::workers::{Closed, Job as QueuedJob, Workers};
use super::{PoolBuilder, PoolStats, RegistryWork, RetryHint, Slot, WorkError};
use crate::caller::{Caller, Criticality};
use crate::error::ConfigError;
use crate::refusal::{Code, PoolName, Refusal};
use crate::trace::{Outcome as TraceOutcome, Tag, Trace, Traced};

/// How many slot-turns ahead a spread refusal may be told to come back
/// (see [`Pool::spread`]).
const SPREAD_TURNS: u64 = 64;

/// The call sites a once-per-call-site log line has been written for.
struct CallSites(OnceLock<Mutex<HashSet<&'static Location<'static>>>>);

impl CallSites {
    const fn new() -> Self {
        CallSites(OnceLock::new())
    }

    /// Whether `at` is seen for the first time (it is remembered).
    fn first(&self, at: &'static Location<'static>) -> bool {
        self.0
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(at)
    }
}

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
    /// Wait for a slot, most critical first and in order within a level,
    /// ahead of the queue of its level (background walkers whose
    /// producer is already bounded). The wait has no bound but the
    /// caller's deadline: made under a request's lease without one, it is
    /// logged at `WARN` once per call site, since a request path should
    /// fail fast or [`Queue`](Self::Queue).
    Wait,
    /// Wait for a slot at most this long, then refuse with
    /// `ADMISSION_WAIT_TIMEOUT`.
    WaitFor(Duration),
    /// Wait in the pool's bounded queue (see
    /// [`QueuePolicy`](crate::pool::QueuePolicy)): ordinary bursts are
    /// served instead of refused, and under overload a caller is refused
    /// with `ADMISSION_SATURATED` (the queue is full) or
    /// `ADMISSION_WAIT_TIMEOUT` (it waited the queue's limit) at that
    /// moment, never answered late.
    Queue,
}

/// A named set of N slots and the N worker threads that run its work.
///
/// Cloning is cheap and every clone shares the same slots: keep one per
/// purpose for the whole process. Work offloaded through a pool runs on the
/// pool's own threads (not tokio's shared blocking pool), so its admitted work
/// never queues behind anyone else's, and at no instant do more than N pieces
/// of its work run.
///
/// # Waiting while holding the slots
///
/// A task that holds every slot of a pool itself and waits for another
/// can only be served by its own slots. A slot counts as held by the task
/// (or, outside any task, the thread) that took it until it is offloaded or
/// dropped; holders are tasks, not futures, so two branches of one
/// `join!` or `select!` are one holder. Such a wait is served like any
/// other if the task frees one of its slots within
/// [`REENTRANT_GRACE`](crate::pool::REENTRANT_GRACE) (100 ms): a branch
/// whose sibling lets go of its slot after an `.await` is admitted. If the
/// task still holds every slot when the grace ends, the wait could never
/// end: [`admit`](Self::admit) and the waiting [`Admission`]s refuse it with
/// `ADMISSION_REENTRANT`, a programming error rather than overload
/// ([`Refusal::is_overload`] is `false`), counted in
/// [`PoolStats::reentrant`](crate::stats::PoolStats::reentrant) and not in
/// `refused`, and logged at `ERROR` once per call site. Outside a tokio
/// runtime, where no timer can bound the wait, it is refused at once.
/// Take slots in the task that uses them, and offload at once:
/// [`run`](Self::run) moves each slot into its work, so branches of one
/// task waiting through `run` are admitted in turn. A request that already
/// holds a lease of a class gets a share of it instead of waiting; see
/// [`RequestPools::try_lease`](crate::RequestPools::try_lease).
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
#[derive(Clone)]
pub struct Pool {
    inner: Arc<PoolInner>,
}

/// The pool's name and size, and whether it closed: a slot, lease or
/// future that prints its pool prints a line, not the pool's internals.
impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("name", &self.inner.name.as_str())
            .field("capacity", &self.inner.capacity)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// The state every clone of a [`Pool`] and every [`Slot`] share.
struct PoolInner {
    /// Interned: refusals carry it without a reference count.
    name: PoolName,
    kind: Kind,
    capacity: usize,
    permits: Permits,
    /// The slots callers may take now: `capacity`, unless
    /// [`Pool::set_limit`] or an adaptive limit moved it (for the
    /// statistics; the permits enforce it).
    limit: AtomicUsize,
    /// An adaptive class's controller moves the limit: the app does not.
    controlled: AtomicBool,
    /// Each level's share, to derive its limit from a new one.
    shares: Shares,
    /// The queue's fixed times; `None` derives them from the work.
    queue: Option<QueuePolicy>,
    holders: Holders,
    counters: Counters,
    /// How long the pool's work takes: the retry hint, deadline
    /// refusals and queue times come from it.
    work_times: WorkTimes,
    /// The return time promised to the last refusal spread, in
    /// microseconds on the work times' clock (see [`Pool::spread`]).
    spread: AtomicU64,
    workers: Workers,
    /// Shadow mode: decide and count, never refuse or make wait.
    shadow: AtomicBool,
    /// The trace this pool records into, once one is set.
    trace: OnceLock<Traced>,
}

impl Pool {
    /// A pool of `capacity` slots and as many worker threads, with the
    /// default retry hint.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when `capacity` is 0 or above
    /// [`MAX_CAPACITY`](crate::pool::MAX_CAPACITY), or `name` is empty.
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
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::builder("registry").capacity(3).build().unwrap();
    /// assert_eq!(pool.capacity(), 3);
    /// ```
    pub fn builder(name: impl Into<String>) -> PoolBuilder {
        PoolBuilder::new(name)
    }

    #[expect(
        clippy::too_many_arguments,
        reason = "the builder's fields, one call site each"
    )]
    pub(crate) fn from_parts(
        name: String,
        capacity: usize,
        retry: RetryHint,
        expected_work: Duration,
        shares: Shares,
        queue: Option<QueuePolicy>,
        kind: Kind,
        keep_alive: Duration,
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
        let limits = shares.limits(capacity).map_err(|(criticality, percent)| {
            ConfigError::ShareOutOfRange {
                pool: name.clone(),
                criticality,
                percent,
            }
        })?;
        if queue.is_some_and(|queue| !queue.is_valid()) {
            return Err(ConfigError::BadQueue { pool: name });
        }
        let bound = queue.map_or(capacity.saturating_mul(2), |queue| queue.bound);
        let name = crate::refusal::intern_name(name);
        let workers = Workers::new(name.as_str(), capacity, keep_alive);
        Ok(Pool {
            inner: Arc::new(PoolInner {
                name,
                kind,
                capacity,
                permits: Permits::new(capacity, limits, bound),
                limit: AtomicUsize::new(capacity),
                controlled: AtomicBool::new(false),
                shares,
                queue,
                holders: Holders::new(capacity),
                counters: Counters::default(),
                work_times: WorkTimes::new(retry.rule(), capacity, expected_work),
                spread: AtomicU64::new(0),
                workers,
                shadow: AtomicBool::new(false),
                trace: OnceLock::new(),
            }),
        })
    }

    /// The pool's name, as given at construction.
    pub fn name(&self) -> &str {
        self.inner.name.as_str()
    }

    /// The pool's name, interned for the life of the process.
    pub(crate) fn static_name(&self) -> &'static str {
        self.inner.name.as_str()
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
    #[inline]
    pub fn try_admit(&self) -> Result<Slot, Refusal> {
        self.try_admit_coded_for(self.saturated_code(), &Caller::current())
    }

    /// [`try_admit`](Self::try_admit) for `caller` (the primary form: the
    /// task's current caller, or one an adapter read from a request), with
    /// the code a saturated refusal carries, for a slot the current task
    /// holds.
    #[inline]
    pub(crate) fn try_admit_coded_for(
        &self,
        saturated: Code,
        caller: &Caller,
    ) -> Result<Slot, Refusal> {
        let id = self.take_permit_for(saturated, caller)?;
        Ok(self.held(id))
    }

    /// The slot `id`, recorded as held by the current task (or thread).
    #[inline]
    fn held(&self, id: SlotId) -> Slot {
        if !id.is_overdraft() {
            self.inner.holders.record(id);
        }
        Slot::new(self.clone(), id)
    }

    /// [`try_admit`](Self::try_admit) for a slot that goes straight into
    /// work: no task holds it, so it is not recorded as held.
    #[inline]
    pub(crate) fn try_admit_for_work(&self, saturated: Code) -> Result<Slot, Refusal> {
        let id = self.take_permit_for(saturated, &Caller::current())?;
        Ok(Slot::new(self.clone(), id))
    }

    #[inline]
    fn take_permit_for(&self, saturated: Code, caller: &Caller) -> Result<SlotId, Refusal> {
        if caller.takes_care() || self.inner.trace.get().is_some() {
            return self.take_permit_with_care(saturated, caller);
        }
        self.take_plain_permit(saturated, caller.criticality())
    }

    /// [`take_permit_for`](Self::take_permit_for) for a caller with a
    /// deadline or a flow, or any caller of a traced pool: out of line, so
    /// the path of the others is the one it was before either existed. A
    /// traced pool's slot is marked, so that its return is traced too.
    #[inline(never)]
    fn take_permit_with_care(&self, saturated: Code, caller: &Caller) -> Result<SlotId, Refusal> {
        let taken = self.take_cared_permit(saturated, caller);
        if let Ok(id) = taken {
            self.inner.holders.set_cost(id);
        }
        match self.inner.trace.get() {
            Some(traced) => {
                let tag = Tag::of(caller, self.cost_of(caller));
                trace_taken(traced, &taken, (caller.criticality(), tag), Duration::ZERO);
                taken.map(SlotId::for_flow)
            }
            None => taken,
        }
    }

    /// A slot for a caller with a deadline (checked first) or a flow (whose
    /// share decides), or for any caller when neither applies.
    fn take_cared_permit(&self, saturated: Code, caller: &Caller) -> Result<SlotId, Refusal> {
        if caller.deadline().is_some() {
            self.budget_left(caller)?;
        }
        let cost = self.cost_of(caller);
        if let Some(flow) = caller.flow() {
            return self.take_flow_permit(
                saturated,
                caller,
                Flow::new(flow, caller.weight()),
                cost,
            );
        }
        if cost > 1 {
            return self.take_costly_permit(saturated, caller.criticality(), cost);
        }
        self.take_plain_permit(saturated, caller.criticality())
    }

    /// The slots an admission for `caller` takes: its cost, clamped to the
    /// capacity the pool was built with (see [`Caller::with_cost`]).
    #[inline]
    pub(crate) fn cost_of(&self, caller: &Caller) -> u32 {
        #[expect(clippy::cast_possible_truncation, reason = "clamped to a cost")]
        let capacity = self.inner.capacity.min(256) as u32;
        u32::from(caller.cost()).min(capacity)
    }

    /// Checks a cost declared for this pool's admissions (a route's, a
    /// call site's) where it is declared: an admission of a cost above the
    /// capacity the pool was built with would take the whole pool (see
    /// [`Caller::with_cost`]), which is rarely what was meant.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CostAboveCapacity`] when `cost` is above the
    /// pool's capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU8;
    /// use admission_core::{ConfigError, Pool};
    ///
    /// let pool = Pool::new("registry", 4).unwrap();
    /// assert_eq!(pool.check_cost(NonZeroU8::new(4).unwrap()), Ok(()));
    /// assert_eq!(
    ///     pool.check_cost(NonZeroU8::new(5).unwrap()),
    ///     Err(ConfigError::CostAboveCapacity { pool: "registry".into(), cost: 5, capacity: 4 })
    /// );
    /// ```
    pub fn check_cost(&self, cost: std::num::NonZeroU8) -> Result<(), ConfigError> {
        if usize::from(cost.get()) > self.inner.capacity {
            return Err(ConfigError::CostAboveCapacity {
                pool: self.name().to_owned(),
                cost: cost.get(),
                capacity: self.inner.capacity,
            });
        }
        Ok(())
    }

    /// A slot for a caller without a flow whose admission takes `cost`
    /// slots, by the capacity alone.
    #[cold]
    #[inline(never)]
    fn take_costly_permit(
        &self,
        saturated: Code,
        level: Criticality,
        cost: u32,
    ) -> Result<SlotId, Refusal> {
        match self.inner.permits.try_acquire_many(level, cost) {
            Ok(id) => Ok(id),
            Err(NoSlot::Full) if self.is_shadow() => {
                Ok(self.overdraft(Some((saturated, level)), cost))
            }
            Err(NoSlot::Full) => Err(self.refuse_for(saturated, level)),
            Err(NoSlot::Closed) => Err(self.refuse_for(Code::ShuttingDown, level)),
        }
    }

    /// A slot for a caller of `level`, by the capacity alone.
    #[inline]
    fn take_plain_permit(&self, saturated: Code, level: Criticality) -> Result<SlotId, Refusal> {
        match self.inner.permits.try_acquire(level) {
            Ok(id) => Ok(id),
            Err(NoSlot::Full) if self.is_shadow() => {
                Ok(self.overdraft(Some((saturated, level)), 1))
            }
            Err(NoSlot::Full) => Err(self.refuse_for(saturated, level)),
            Err(NoSlot::Closed) => Err(self.refuse_for(Code::ShuttingDown, level)),
        }
    }

    /// [`take_permit_for`](Self::take_permit_for) for a caller with a flow
    /// (see the module `flows` and [`Caller::with_flow`]): under
    /// the flow table's lock, a flow under its share takes any free slot; a
    /// flow at its share takes one only if no other active flow that asked
    /// is under its own, and is refused `ADMISSION_FLOW_SHARE` otherwise.
    /// A refused flow asks from then on. Out of the way of the path
    /// callers without a flow take (cold: laid out apart from it).
    #[cold]
    #[inline(never)]
    fn take_flow_permit(
        &self,
        saturated: Code,
        caller: &Caller,
        flow: Flow,
        cost: u32,
    ) -> Result<SlotId, Refusal> {
        let level = caller.criticality();
        let mut table = self.flows().lock();
        let (standing, _) = table.standing_for(flow, self.inner.limit.load(Relaxed), cost);
        let (yields, shared) = match standing {
            Standing::Under => (false, false),
            Standing::AtShare { yields, shared, .. } => (yields, shared),
        };
        let shadow = self.is_shadow();
        if yields && !shadow {
            let refusal = self.refuse_for(Code::FlowShare, level);
            table.asked(flow, asking_window(&refusal));
            return Err(refusal);
        }
        match self.inner.permits.try_acquire_many(level, cost) {
            Ok(id) => {
                if yields {
                    self.inner
                        .counters
                        .count_would_refuse(Code::FlowShare, level);
                }
                table.admitted(flow, id);
                Ok(id.for_flow())
            }
            Err(NoSlot::Full) => {
                let code = if yields || shared {
                    Code::FlowShare
                } else {
                    saturated
                };
                if shadow {
                    let id = self.overdraft(Some((code, level)), cost);
                    table.admitted(flow, id);
                    return Ok(id);
                }
                let refusal = self.refuse_for(code, level);
                table.asked(flow, asking_window(&refusal));
                Err(refusal)
            }
            Err(NoSlot::Closed) => Err(self.refuse_for(Code::ShuttingDown, level)),
        }
    }

    /// Before a caller with a flow joins the line: refused with
    /// `ADMISSION_FLOW_SHARE` (in shadow, counted) when it holds its share
    /// and another active flow that asked is under its own, as a fail-fast
    /// caller would be, unless it queues and another flow holds as much or
    /// presses harder (it is not the flood: the line settles between
    /// them); otherwise it asks for as long as it may `wait`. Returns its
    /// bucket (its place in the line's fair order, see
    /// `WaitLine::next_served`), whether it is under its share (the line
    /// then treats it as not the flood) and its pressure.
    #[cold]
    fn flow_may_wait(
        &self,
        caller: &Caller,
        flow: Flow,
        cost: u32,
        patience: Patience,
        wait: Duration,
    ) -> Result<(u16, bool, u32), Refusal> {
        let level = caller.criticality();
        let mut table = self.flows().lock();
        let (standing, pressure) = table.standing_for(flow, self.inner.limit.load(Relaxed), cost);
        let favoured = match standing {
            Standing::Under => true,
            // In a queue, a flow that holds no more than another, or that
            // presses less than another, is not the flood: it waits, and
            // the line settles between them.
            Standing::AtShare {
                yields: true,
                tied,
                flood,
                ..
            } if patience != Patience::Queued || (!tied && flood) => {
                if self.is_shadow() {
                    self.inner
                        .counters
                        .count_would_refuse(Code::FlowShare, level);
                    return Ok((NO_FLOW, false, 0));
                }
                let refusal = self.refuse_for(Code::FlowShare, level);
                table.asked(flow, asking_window(&refusal));
                return Err(refusal);
            }
            // At its share: it waits in line, served after the flows that
            // hold less; unless another active flow presses harder (then
            // it is not the flood), the line decides whether it is.
            Standing::AtShare { flood, .. } => !flood,
        };
        // It asks for as long as it may wait: while it is in line.
        Ok((table.asked(flow, wait), favoured, pressure))
    }

    /// A waiter with a flow took slot `id`: counted to its flow, and
    /// marked as a flow's.
    #[cold]
    fn flow_admitted(&self, caller: &Caller, id: SlotId) -> SlotId {
        let Some(flow) = caller.flow() else {
            return id;
        };
        self.flows()
            .lock()
            .admitted(Flow::new(flow, caller.weight()), id);
        id.for_flow()
    }

    /// The flow table, made on first use.
    fn flows(&self) -> &Flows {
        self.inner.permits.flows(self.inner.capacity)
    }

    /// A slot past the capacity, in shadow mode, for an admission that
    /// enforcing would have refused with `would_refuse` (or, `None`, made
    /// wait).
    #[cold]
    #[inline(never)]
    fn overdraft(&self, would_refuse: Option<(Code, Criticality)>, cost: u32) -> SlotId {
        let counters = &self.inner.counters;
        // A wait it would have had: until a slot frees, as a refusal's hint
        // estimates it from the work running now.
        let would_wait = match would_refuse {
            Some((code, level)) => {
                counters.count_would_refuse(code, level);
                Duration::ZERO
            }
            None => {
                let wait = Duration::from_millis(u64::from(self.retry_after_millis()));
                counters.count_would_wait(wait);
                wait
            }
        };
        counters.take_overdraft(cost as usize);
        if let Some(traced) = self.inner.trace.get() {
            let current = Caller::current();
            let (code, level) = match would_refuse {
                Some((code, level)) => (Some(code), level),
                None => (None, current.criticality()),
            };
            let tag = Tag::of(&current, cost);
            traced.decided((level, tag), TraceOutcome::Shadow(code), would_wait);
        }
        SlotId::overdraft(cost)
    }

    /// For a caller with a deadline: its time left, and how long it may
    /// wait for a slot; a refusal when the time left is shorter than the
    /// pool's typical work (the median of its last 16 durations): the
    /// caller is then more likely than not to get no answer in time, and
    /// admitting it would only make an orphan. A wait ends while the work
    /// would still end in time nine times in ten (the 90th percentile of the
    /// same window), so a caller that waited does not become the orphan.
    fn budget_left(&self, caller: &Caller) -> Result<Option<Budget>, Refusal> {
        let Some(remaining) = caller.remaining() else {
            return Ok(None);
        };
        let times = &self.inner.work_times;
        if remaining.is_zero() || remaining < times.typical() {
            if self.is_shadow() {
                // Counted, then admitted as if the caller had no deadline.
                let counters = &self.inner.counters;
                counters.count_would_refuse(Code::BudgetTooShort, caller.criticality());
                return Ok(None);
            }
            return Err(self.refuse_for(Code::BudgetTooShort, caller.criticality()));
        }
        Ok(Some(Budget {
            remaining,
            wait: remaining.saturating_sub(times.long()),
        }))
    }

    /// Waits for a slot: most critical first, in order within a level, ahead
    /// of the queue of its level.
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
    /// before or while waiting, and `ADMISSION_REENTRANT` when the calling
    /// task holds every slot of this pool itself and still does after
    /// [`REENTRANT_GRACE`](crate::pool::REENTRANT_GRACE) (the wait could
    /// never end; see [`Pool`]'s "Waiting while holding the slots").
    ///
    /// # Panics
    ///
    /// When the calling task holds every slot, inside a tokio runtime
    /// built without its timer (`enable_time`): the grace needs it.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Code, Pool};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let slot = pool.admit().await.unwrap();
    /// assert_eq!(pool.stats().in_use, 1);
    ///
    /// // Waiting for a second slot while holding the only one would hang:
    /// // refused once the grace shows nothing else can free one.
    /// let refusal = pool.admit().await.unwrap_err();
    /// assert_eq!(refusal.code(), Code::Reentrant);
    /// assert!(!refusal.is_overload(), "a programming error, not overload");
    /// assert_eq!((pool.stats().reentrant, pool.stats().refused), (1, 0));
    /// drop(slot);
    /// # }
    /// ```
    #[track_caller]
    pub fn admit(&self) -> impl Future<Output = Result<Slot, Refusal>> {
        self.admit_with(Admission::Wait)
    }

    /// Waits in line for a permit, at most `limit` (a queued caller at most
    /// the queue's limit), never past the caller's deadline less the typical
    /// work; a task that holds every slot of this pool waits at most the
    /// grace, and is refused as reentrant if it still does then.
    async fn wait_for_permit(
        &self,
        caller: &Caller,
        patience: Patience,
        limit: Option<Duration>,
        at: &'static Location<'static>,
    ) -> Result<SlotId, Refusal> {
        let Some(traced) = self.inner.trace.get() else {
            return self.wait_untraced(caller, patience, limit, at).await;
        };
        let started = Instant::now();
        let taken = self.wait_untraced(caller, patience, limit, at).await;
        let tag = Tag::of(caller, self.cost_of(caller));
        trace_taken(
            traced,
            &taken,
            (caller.criticality(), tag),
            started.elapsed(),
        );
        // Marked: its return is traced too.
        taken.map(SlotId::for_flow)
    }

    async fn wait_untraced(
        &self,
        caller: &Caller,
        patience: Patience,
        mut limit: Option<Duration>,
        at: &'static Location<'static>,
    ) -> Result<SlotId, Refusal> {
        let level = caller.criticality();
        let budget = self.budget_left(caller)?;
        let cost = self.cost_of(caller);
        let mut ask = Ask {
            cost,
            flow: NO_FLOW,
            weight: caller.weight(),
            under: false,
            pressure: 0,
        };
        let times = match patience {
            Patience::Queued => self.queue_times(level),
            Patience::Patient => QueueTimes::default(),
        };
        if let Some(flow) = caller.flow() {
            let wait = match patience {
                Patience::Queued => times.wait,
                Patience::Patient => limit.unwrap_or(Duration::from_secs(2)),
            };
            (ask.flow, ask.under, ask.pressure) = self.flow_may_wait(
                caller,
                Flow::new(flow, caller.weight()),
                cost,
                patience,
                wait,
            )?;
        }
        let mut suspect = match self.inner.permits.try_acquire_many(level, cost) {
            Ok(id) => return Ok(id),
            Err(NoSlot::Closed) => return Err(self.refuse_for(Code::ShuttingDown, level)),
            Err(NoSlot::Full) if self.is_shadow() => return Ok(self.overdraft(None, cost)),
            Err(NoSlot::Full) => self.inner.holders.current_task_blocks(cost),
        };
        if suspect && tokio::runtime::Handle::try_current().is_err() {
            // No timer to give the caller's own slots a grace: only they
            // could end this wait.
            return Err(self.reentrant(level, at));
        }
        // A trusted deadline that allows more than the queue's own wait is
        // a promise a standing queue must not break by shedding it.
        let promised = patience == Patience::Queued
            && !caller.deadline_is_asserted()
            && budget.is_some_and(|budget| budget.wait > times.wait);
        let Ticket {
            key,
            ahead,
            standing,
            favoured,
        } = match self.inner.permits.enqueue_asking(
            level,
            patience,
            (times.target, times.window),
            promised,
            ask,
        ) {
            Enqueued::Acquired(id) => return Ok(id),
            Enqueued::Closed => return Err(self.refuse_for(Code::ShuttingDown, level)),
            Enqueued::Full => return Err(self.refuse_for(self.saturated_code(), level)),
            Enqueued::Waiting(ticket) => ticket,
        };
        let in_line = InLine {
            permits: &self.inner.permits,
            key,
            armed: true,
        };
        let since = Instant::now();
        let counters = &self.inner.counters;
        if let Some(budget) = budget {
            // The callers ahead share the slots: each round of them takes
            // about the typical work, and then this caller's own.
            #[expect(clippy::cast_precision_loss, reason = "a few thousand waiters at most")]
            let rounds = ahead as f64 / self.inner.capacity as f64 + 1.0;
            if budget.remaining < self.inner.work_times.typical().mul_f64(rounds) {
                drop(in_line);
                return Err(self.refuse_for(Code::BudgetTooShort, level));
            }
        }
        let left = budget.map(|budget| budget.wait);
        // A flow that is not the flood is served at the next release it
        // may take: one wait, and one more for a release the timer rounds
        // past it.
        let wait = if favoured { times.wait * 2 } else { times.wait };
        limit = match (patience, left) {
            // A standing queue serves the newest: the rest wait the target.
            (Patience::Queued, left) if standing => {
                Some(left.map_or(times.target, |l| l.min(times.target)))
            }
            // Otherwise a caller with a deadline waits as long as it allows;
            // one a client asserted never past the queue's own limit.
            (Patience::Queued, Some(left)) if caller.deadline_is_asserted() => Some(left.min(wait)),
            (Patience::Queued, left) => Some(left.unwrap_or(wait)),
            (Patience::Patient, Some(left)) => Some(limit.map_or(left, |l| l.min(left))),
            (Patience::Patient, None) => limit,
        };
        if limit.is_none() {
            self.unbounded_in_request(at);
        }
        let deadline = limit.map(|limit| Instant::now() + limit);
        let mut answered = pin!(poll_fn(|cx| self.inner.permits.poll_wait(key, cx)));
        let answer = loop {
            let grace = suspect.then(|| Instant::now() + REENTRANT_GRACE);
            let until = match (deadline, grace) {
                (Some(deadline), Some(grace)) => Some(deadline.min(grace)),
                (deadline, grace) => deadline.or(grace),
            };
            let Some(until) = until else {
                break answered.as_mut().await;
            };
            if let Ok(answer) = tokio::time::timeout_at(until, answered.as_mut()).await {
                break answer;
            }
            if suspect && self.inner.holders.current_task_blocks(cost) {
                drop(in_line);
                return Err(self.reentrant(level, at));
            }
            // Another task holds a slot now: this is an ordinary wait.
            suspect = false;
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                drop(in_line);
                counters.count_wait(false, since.elapsed());
                if patience == Patience::Queued && standing && limit == Some(times.target) {
                    counters.count_standing_shed();
                }
                return Err(self.refuse_for(Code::WaitTimedOut, level));
            }
        };
        in_line.disarm();
        counters.count_wait(answer.is_ok(), since.elapsed());
        match answer {
            Ok(id) => Ok(id),
            // A more critical caller took this one's place in a full queue.
            Err(Shed::Displaced) => {
                counters.count_eviction();
                Err(self.refuse_for(self.saturated_code(), level))
            }
            // A flow short of its share took this flooding flow's place.
            Err(Shed::Outweighed) => {
                counters.count_eviction();
                Err(self.refuse_for(Code::FlowShare, level))
            }
            // Its queue stands and it waited past the target.
            Err(Shed::Stale) => {
                counters.count_standing_shed();
                Err(self.refuse_for(Code::WaitTimedOut, level))
            }
            Err(Shed::Closed) => Err(self.refuse_for(Code::ShuttingDown, level)),
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
    /// time, or as [`admit`](Self::admit) refuses.
    ///
    /// # Panics
    ///
    /// When it has to wait outside a tokio runtime with its timer enabled
    /// (`enable_time`): the bound is tokio's timer.
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
    /// // Another caller (here a task) holds the only slot and does not let go.
    /// let (holder, release) = (pool.clone(), tokio::sync::oneshot::channel::<()>());
    /// let (taken, held) = tokio::sync::oneshot::channel();
    /// let walk = tokio::spawn(async move {
    ///     let _slot = holder.try_admit().unwrap();
    ///     taken.send(()).unwrap();
    ///     let _ = release.1.await;
    /// });
    /// held.await.unwrap();
    /// let refusal = pool.admit_timeout(Duration::from_millis(1)).await.unwrap_err();
    /// assert_eq!(refusal.code(), Code::WaitTimedOut);
    /// # drop(release.0);
    /// # walk.await.unwrap();
    /// # }
    /// ```
    #[track_caller]
    pub fn admit_timeout(&self, timeout: Duration) -> impl Future<Output = Result<Slot, Refusal>> {
        self.admit_with(Admission::WaitFor(timeout))
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
    /// # Panics
    ///
    /// As [`admit`](Self::admit): only for a task holding every slot, in a
    /// runtime built without its timer.
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
    #[track_caller]
    pub fn admit_with(&self, admission: Admission) -> impl Future<Output = Result<Slot, Refusal>> {
        self.admit_with_for(admission, None)
    }

    /// [`admit_with`](Self::admit_with) for `caller` rather than the
    /// task's current one (`None`): a lease's top-up admits for the slots
    /// its route costs on top of what the request already holds.
    #[track_caller]
    pub(crate) fn admit_with_for(
        &self,
        admission: Admission,
        caller: Option<Caller>,
    ) -> impl Future<Output = Result<Slot, Refusal>> {
        let at = Location::caller();
        async move {
            let caller = caller.unwrap_or_else(Caller::current);
            let (patience, limit) = match admission {
                Admission::FailFast => {
                    return self.try_admit_coded_for(self.saturated_code(), &caller);
                }
                Admission::Wait => (Patience::Patient, None),
                Admission::WaitFor(timeout) => (Patience::Patient, Some(timeout)),
                Admission::Queue => (Patience::Queued, None),
            };
            let id = self.wait_for_permit(&caller, patience, limit, at).await?;
            let id = if caller.has_flow() {
                self.flow_admitted(&caller, id)
            } else {
                id
            };
            self.inner.holders.set_cost(id);
            Ok(self.held(id))
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
    /// # Panics
    ///
    /// As [`admit`](Self::admit): only for a task holding every slot, in a
    /// runtime built without its timer.
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
    #[track_caller]
    pub fn run<W: RegistryWork>(
        &self,
        work: W,
        admission: Admission,
    ) -> impl Future<Output = Result<W::Output, WorkError<W::Error>>> {
        let at = Location::caller();
        async move {
            let (patience, limit) = match admission {
                Admission::FailFast => {
                    let slot = self.try_admit_for_work(self.saturated_code())?;
                    return slot.offload(work).await;
                }
                Admission::Wait => (Patience::Patient, None),
                Admission::WaitFor(timeout) => (Patience::Patient, Some(timeout)),
                Admission::Queue => (Patience::Queued, None),
            };
            let caller = Caller::current();
            let id = self.wait_for_permit(&caller, patience, limit, at).await?;
            let id = if caller.has_flow() {
                self.flow_admitted(&caller, id)
            } else {
                id
            };
            // No task holds a slot that goes straight into work.
            Slot::new(self.clone(), id).offload(work).await
        }
    }

    /// The queue's times for a caller of `level`: the fixed policy's (its
    /// interval both the longest wait and the standing window), or from the
    /// typical work: a wait of one work time (two for a critical caller,
    /// whose work is worth it), a queue that stands once it has not emptied
    /// for four, and a target of an eighth of one (at least 5, 20 and 1 ms);
    /// or the defaults before any work was seen.
    fn queue_times(&self, level: Criticality) -> QueueTimes {
        let fixed = |queue: QueuePolicy| QueueTimes {
            target: queue.target,
            wait: queue.interval,
            window: queue.interval,
        };
        if let Some(queue) = self.inner.queue {
            return fixed(queue);
        }
        let typical = self.inner.work_times.typical();
        if typical.is_zero() {
            return fixed(QueuePolicy::for_capacity(self.inner.capacity));
        }
        let wait = typical.max(Duration::from_millis(5));
        QueueTimes {
            target: (typical / 8).max(Duration::from_millis(1)),
            wait: match level {
                Criticality::Critical => wait * 2,
                _ => wait,
            },
            window: (typical * 4).max(Duration::from_millis(20)),
        }
    }

    pub(crate) fn saturated_code(&self) -> Code {
        match self.inner.kind {
            Kind::Pool => Code::Saturated,
            Kind::Reservation => Code::ReservationExhausted,
        }
    }

    /// A snapshot of the pool's counters.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 2).unwrap();
    /// let _slot = pool.try_admit().unwrap();
    /// assert_eq!(pool.stats().in_use, 1);
    /// ```
    pub fn stats(&self) -> PoolStats {
        let (active_flows, flow_weights) = self
            .inner
            .permits
            .flow_table()
            .map_or((0, 0), super::flows::Flows::active);
        self.inner.counters.snapshot(
            self.inner.name.as_str(),
            (self.inner.capacity, self.inner.limit.load(Relaxed)),
            self.inner.permits.slot_counts(),
            (self.inner.permits.waiting(), active_flows, flow_weights),
            self.inner.work_times.typical(),
            self.is_shadow(),
        )
    }

    /// Switches the pool between enforcing (the default) and shadow mode,
    /// for the next admission on.
    ///
    /// In shadow mode every decision is still made and counted, but
    /// nothing is refused for load and nothing waits for a slot: an
    /// admission enforcing would refuse (no slot free, a deadline too short
    /// for the work) is let through and counted in
    /// [`PoolStats::would_refuse_by_code`], one that would wait in
    /// [`PoolStats::would_wait`]. Slots let through past the capacity are
    /// counted in [`PoolStats::overdraft`] and in `in_use`, which may then
    /// exceed the capacity. A closed pool still refuses
    /// (`ADMISSION_SHUTTING_DOWN`). Work run on the pool
    /// ([`run`](Self::run), [`Slot::offload`]) still runs on its N threads:
    /// shadow mode lifts the admission, not the bound on threads; a request
    /// class ([`RequestPools::set_shadow`](crate::RequestPools::set_shadow))
    /// has no threads, so its leases never wait at all. Use it to roll out a
    /// limit: watch what it would refuse before it refuses anything.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Code, Pool};
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// pool.set_shadow(true);
    /// let _held = pool.try_admit().unwrap();
    /// let past = pool.try_admit().expect("let through");
    /// assert_eq!(pool.stats().would_refuse_with(Code::Saturated), 1);
    ///
    /// pool.set_shadow(false);
    /// assert!(pool.try_admit().is_err(), "enforced from the next admission on");
    /// drop(past);
    /// assert_eq!(pool.stats().overdraft, 0);
    /// ```
    pub fn set_shadow(&self, shadow: bool) {
        self.inner.shadow.store(shadow, Relaxed);
    }

    /// Whether the pool runs in shadow mode ([`set_shadow`](Self::set_shadow)).
    #[inline]
    pub fn is_shadow(&self) -> bool {
        self.inner.shadow.load(Relaxed)
    }

    /// Records this pool's admissions into `trace` from now on: each
    /// admission when its slot is released, each refusal when it is made
    /// (see [`Trace`] for what an entry holds). A pool records into one
    /// trace for its life; asking again for the same trace does nothing.
    ///
    /// # Errors
    ///
    /// [`ConfigError::AlreadyTraced`] when the pool already records into
    /// another trace.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{ConfigError, Pool, trace::Trace};
    ///
    /// let pool = Pool::new("walks", 2)?;
    /// let trace = Trace::new(4096)?;
    /// pool.trace_into(&trace)?;
    /// pool.trace_into(&trace)?; // the same trace: nothing changes
    /// assert_eq!(
    ///     pool.trace_into(&Trace::new(16)?).unwrap_err(),
    ///     ConfigError::AlreadyTraced { pool: "walks".into() }
    /// );
    /// # Ok::<(), ConfigError>(())
    /// ```
    pub fn trace_into(&self, trace: &Trace) -> Result<(), ConfigError> {
        let traced = self
            .inner
            .trace
            .get_or_init(|| Traced::new(trace, self.static_name(), self.inner.capacity));
        if traced.same_trace(trace) {
            Ok(())
        } else {
            Err(ConfigError::AlreadyTraced {
                pool: self.name().to_owned(),
            })
        }
    }

    /// The retry hint, in whole seconds, a refusal would carry now: the
    /// expected time until a slot frees, counting the work running now
    /// (see [`RetryHint::Observed`] for how), at least 1 and at most the
    /// cap.
    ///
    /// It costs one atomic load while no work runs, and a clock read plus
    /// a few loads while some does: the statistic behind it is computed
    /// when work finishes, never here.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// // Work is timed on the runtime's clock: paused here, so the walk
    /// // takes 1.2 s without the example waiting for it.
    /// let pool = Pool::new("registry", 1).unwrap();
    /// assert_eq!(pool.retry_after_secs(), 1, "nothing seen yet");
    ///
    /// let (started, running) = tokio::sync::oneshot::channel();
    /// let (release, held) = std::sync::mpsc::channel::<()>();
    /// let walk = move || {
    ///     started.send(()).unwrap();
    ///     held.recv().map_err(|_| std::fmt::Error)
    /// };
    /// let walking = pool.try_admit().unwrap().offload(walk);
    /// running.await.unwrap();
    /// tokio::time::advance(std::time::Duration::from_millis(1200)).await;
    /// release.send(()).unwrap();
    /// walking.await.unwrap();
    /// assert_eq!(pool.retry_after_secs(), 2, "a walk takes 1.2 s: 2 s, rounded up");
    /// # }
    /// ```
    pub fn retry_after_secs(&self) -> u32 {
        crate::Refusal::whole_secs(self.retry_after_millis())
    }

    /// The hint before it is rounded to seconds, what
    /// [`Refusal::retry_after_millis`] carries.
    fn retry_after_millis(&self) -> u32 {
        // Read whether the hint needs it or not: the count is a loom atomic
        // in the models, and the hint's need depends on the clock.
        let in_use = self.in_use();
        self.inner.work_times.millis(|| in_use)
    }

    /// `refusal` with its hint moved to the next free turn: each refusal
    /// is promised a return time one slot-turn (a long hold, the 90th
    /// percentile, and an eighth more, over the capacity) after the
    /// previous promise, and never before its own
    /// hint, so callers refused together are told different waits, in the
    /// order they were refused, and do not all come back at once to
    /// collide again. Promises reach at most [`SPREAD_TURNS`] turns ahead.
    /// A refusal that is no overload, or from a pool that has not learned
    /// its hold yet, is unchanged.
    pub(crate) fn spread(&self, refusal: Refusal) -> Refusal {
        let times = &self.inner.work_times;
        // The 90th percentile, not the median: a promise a turn too early
        // meets the slot still held and is refused again.
        let hold = times.long();
        if !refusal.is_overload() || hold.is_zero() {
            return refusal;
        }
        let capacity = u64::try_from(self.inner.capacity).unwrap_or(u64::MAX);
        // An eighth more than the hold: a caller back a little late (its
        // timer, the network) must not meet the turn before its own still
        // running, which would push it, and everyone after it, back a round.
        let hold = u64::try_from(hold.as_micros()).unwrap_or(u64::MAX);
        let turn = hold.saturating_add(hold / 8) / capacity;
        let now = times.now_micros();
        let earliest = now.saturating_add(u64::from(refusal.retry_after_millis()) * 1000);
        let latest = earliest.saturating_add(turn.saturating_mul(SPREAD_TURNS));
        let promised = &self.inner.spread;
        let mut seen = promised.load(Relaxed);
        let at = loop {
            let at = seen.clamp(earliest, latest);
            match promised.compare_exchange_weak(seen, at.saturating_add(turn), Relaxed, Relaxed) {
                Ok(_) => break at,
                Err(now_seen) => seen = now_seen,
            }
        };
        let millis = (at - now).div_ceil(1000);
        refusal.with_retry_after_millis(u32::try_from(millis).unwrap_or(u32::MAX))
    }

    /// How long the pool's work takes; the job records starts and ends
    /// here.
    pub(crate) fn work_times(&self) -> &WorkTimes {
        &self.inner.work_times
    }

    /// Changes, live, how many of the pool's slots callers may hold at
    /// once: from 1 up to the capacity it was built with (its slot numbers
    /// and at most that many threads; build it with the most you would
    /// ever allow). Takes effect for the next admission. Each criticality
    /// keeps its share of the new limit.
    ///
    /// A lower limit interrupts nothing: work running on slots above it
    /// goes on to its end, and slots are not handed out again until fewer
    /// than the limit are held. A higher one hands the room it makes to the
    /// callers waiting in line at once. A loop owner's reserved slots are
    /// a pool of their own, never shrunk by a change here; an adaptive
    /// class's limit is its controller's to move.
    ///
    /// # Errors
    ///
    /// [`ConfigError::LimitOutOfRange`] for 0 or more than the capacity;
    /// [`ConfigError::AdaptiveLimit`] for an adaptive class's pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 8).unwrap();
    /// let held: Vec<_> = (0..3).map(|_| pool.try_admit().unwrap()).collect();
    /// pool.set_limit(2).unwrap();
    /// assert!(pool.try_admit().is_err(), "3 held, a limit of 2: nobody more");
    /// assert_eq!(pool.stats().limit, 2);
    /// drop(held);
    /// assert!(pool.set_limit(9).is_err(), "above the capacity");
    /// ```
    pub fn set_limit(&self, limit: usize) -> Result<(), ConfigError> {
        if self.inner.controlled.load(Relaxed) {
            return Err(ConfigError::AdaptiveLimit {
                pool: self.inner.name.as_str().to_owned(),
            });
        }
        if limit == 0 || limit > self.inner.capacity {
            return Err(ConfigError::LimitOutOfRange {
                pool: self.inner.name.as_str().to_owned(),
                limit,
                capacity: self.inner.capacity,
            });
        }
        self.move_limit(limit);
        Ok(())
    }

    /// An adaptive class's controller moves this pool's limit from now on.
    pub(crate) fn controlled(&self) {
        self.inner.controlled.store(true, Relaxed);
    }

    /// Moves the slots callers may take to `limit` (clamped to 1 ..=
    /// capacity), each level keeping its share: [`set_limit`](Self::set_limit)
    /// and an adaptive class's controller call it. A lower limit revokes no
    /// slot; a higher one wakes waiters at once (see [`Permits::set_limits`]).
    pub(crate) fn move_limit(&self, limit: usize) {
        let limit = limit.clamp(1, self.inner.capacity);
        if self.inner.limit.swap(limit, Relaxed) == limit {
            return;
        }
        let limits = self
            .inner
            .shares
            .limits(limit)
            .expect("shares were checked at construction, for any limit");
        self.inner.permits.set_limits(limits);
    }

    /// Whether shutdown has closed this pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// assert!(!Pool::new("registry", 1).unwrap().is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.permits.is_closed()
    }

    /// The pool as the task-local scope keeps a reservation's: its shared
    /// state, the `Arc` this clone already has, moved (no count changes).
    pub(crate) fn into_held(self) -> crate::scope::Held {
        self.inner as crate::scope::Held
    }

    /// The pool a scope keeps as `held`, if it is one.
    pub(crate) fn from_held(held: &crate::scope::Held) -> Option<Pool> {
        Arc::clone(held)
            .downcast::<PoolInner>()
            .ok()
            .map(|inner| Pool { inner })
    }

    /// Whether two handles are the same pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// assert!(pool.same_pool(&pool.clone()));
    /// assert!(!pool.same_pool(&Pool::new("registry", 1).unwrap()));
    /// ```
    pub fn same_pool(&self, other: &Pool) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Logs, once per call site, a wait with no bound (`Admission::Wait`,
    /// no deadline) made under a request's lease: a request path should
    /// fail fast or queue (bounded), or its client waits as long as the
    /// pool is full. A loop owner's wait (under its reservation, or
    /// outside any scope) is what `Wait` is for, and is not logged.
    #[cold]
    fn unbounded_in_request(&self, at: &'static Location<'static>) {
        let in_request =
            crate::scope::with_current(|held| held.is_some_and(|held| !held.is::<PoolInner>()));
        if !in_request {
            return;
        }
        static SEEN: CallSites = CallSites::new();
        if SEEN.first(at) {
            tracing::warn!(
                pool = self.inner.name.as_str(),
                location = %at,
                "a request waits for a slot with no bound (Admission::Wait, no deadline): \
                 its client waits as long as the pool stays full; in a request path use \
                 Admission::FailFast, Admission::Queue (bounded) or Admission::WaitFor \
                 (logged once per call site)"
            );
        }
    }

    /// A reentrant wait's refusal: a programming error, so counted in
    /// `reentrant` (not `refused`) and logged at `ERROR` the first time
    /// each call site `at` makes one.
    #[cold]
    fn reentrant(&self, criticality: Criticality, at: &'static Location<'static>) -> Refusal {
        self.inner.counters.count_reentrant();
        static SEEN: CallSites = CallSites::new();
        if SEEN.first(at) {
            tracing::error!(
                pool = self.inner.name.as_str(),
                code = Code::Reentrant.as_str(),
                location = %at,
                "a task waited for a slot while holding every slot of the pool itself; \
                 the wait could never end (a programming error: offload the held slots \
                 or take them in the task that uses them)"
            );
        }
        Refusal::for_pool(
            self.inner.name,
            Code::Reentrant,
            criticality,
            self.retry_after_millis(),
        )
    }

    /// A refusal with `code` for a caller of `criticality`, counted.
    ///
    /// Never inlined: out of line it returns the refusal in one register,
    /// stored into the admission's result as one word; inlined into
    /// `try_admit` its fields were stored one by one, and the caller's read
    /// of that word waited on the stores (refusals took half as long again).
    #[inline(never)]
    fn refuse_for(&self, code: Code, criticality: Criticality) -> Refusal {
        self.inner.counters.count_refusal(code, criticality);
        Refusal::for_pool(
            self.inner.name,
            code,
            criticality,
            self.retry_after_millis(),
        )
    }

    fn in_use(&self) -> usize {
        self.inner.permits.in_use()
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.inner.counters
    }

    /// Returns slot `id`: clears its holder, then gives back its permit.
    #[inline]
    pub(crate) fn release(&self, id: SlotId) {
        if id.is_marked() {
            self.release_marked(id);
            return;
        }
        self.inner.holders.clear(id);
        self.inner.permits.release(id);
    }

    /// [`release`](Self::release) of a slot past the capacity, or of a
    /// marked slot (a flow's, or a traced pool's): the trace records its
    /// hold, and its flow holds one fewer before the permit returns (so the
    /// count follows the slot, not its number, which may be reused at
    /// once).
    #[cold]
    fn release_marked(&self, marked: SlotId) {
        let cost = marked.cost();
        if marked.is_overdraft() {
            self.inner.counters.return_overdraft(cost as usize);
            return;
        }
        let id = marked.unmarked();
        if let Some(traced) = self.inner.trace.get() {
            traced.released(id.index());
        }
        if let Some(flows) = self.inner.permits.flow_table() {
            flows.released(marked);
        }
        self.inner.holders.clear(id);
        if cost > 1 {
            self.inner.holders.set_cost(id);
            self.inner.permits.release_many(id, cost);
        } else {
            self.inner.permits.release(id);
        }
    }

    /// Clears slot `id`'s holder: the slot moved into work, no task holds it.
    #[inline]
    pub(crate) fn forget_holder(&self, id: SlotId) {
        if !id.is_overdraft() {
            self.inner.holders.clear(id);
        }
    }

    /// The holder table, for the models.
    #[cfg(all(test, loom))]
    pub(crate) fn holders(&self) -> &Holders {
        &self.inner.holders
    }

    /// The flow table, if a caller with a flow asked, for the models.
    #[cfg(all(test, loom))]
    pub(crate) fn flow_table(&self) -> Option<&Flows> {
        self.inner.permits.flow_table()
    }

    /// The permits, for the models.
    #[cfg(all(test, loom))]
    pub(crate) fn permits(&self) -> &Permits {
        &self.inner.permits
    }

    /// Queues a job on the pool's threads; gives it back once closed.
    pub(crate) fn submit(&self, job: QueuedJob) -> Result<(), QueuedJob> {
        self.inner.workers.submit(job)
    }

    /// Closes the pool for shutdown: refuses every new admission (waiters
    /// wake with a refusal), cancels the queued work (its slots come back,
    /// its futures resolve as cancelled) and hands over the worker threads
    /// to join. A second call finds nothing left to hand over.
    pub(crate) fn close(&self) -> Closed {
        self.inner.permits.close();
        self.inner.workers.close()
    }
}

/// How long a flow refused with `refusal` counts as asking: twice its
/// retry hint in whole seconds (so at least 2 s), time for a client that
/// honours `Retry-After` to come back once, a little late.
fn asking_window(refusal: &Refusal) -> Duration {
    Duration::from_secs(2 * u64::from(refusal.retry_after_secs()))
}

/// How long a queued caller may wait.
#[derive(Debug, Clone, Copy, Default)]
struct QueueTimes {
    /// In a standing queue.
    target: Duration,
    /// In a queue that does not stand.
    wait: Duration,
    /// How long the queue may go without emptying before it stands.
    window: Duration,
}

/// A caller's deadline as admission sees it.
#[derive(Debug, Clone, Copy)]
struct Budget {
    /// The time left.
    remaining: Duration,
    /// How long it may wait for a slot.
    wait: Duration,
}

/// How long a task that holds every slot of a pool may wait for another
/// before it is refused as reentrant: long enough for a sibling branch of
/// its `join!` to let go of a slot after an `.await`, short enough that a
/// wait only its own slots could end is reported at once in human terms.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// assert_eq!(admission_core::pool::REENTRANT_GRACE, Duration::from_millis(100));
/// ```
pub const REENTRANT_GRACE: Duration = Duration::from_millis(100);

/// A waiter in line, which leaves the line when the wait ends without its
/// answer (it timed out, or its future was dropped): the node is unlinked,
/// or a slot handed to it at that moment is given back.
struct InLine<'a> {
    permits: &'a Permits,
    key: Key,
    armed: bool,
}

impl InLine<'_> {
    /// The waiter saw its answer: nothing to leave.
    fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        if self.armed {
            // A slot handed to it as it gave up goes on to the next waiter
            // or back to the pool, counted as neither admitted nor returned.
            self.permits.cancel(self.key);
        }
    }
}

/// Traces a slot taken (or refused) for a caller of `criticality` that
/// waited `waited`: an admission is timed from now, a refusal recorded now.
/// A shadow slot past the capacity was traced when it was made.
fn trace_taken(
    traced: &Traced,
    taken: &Result<SlotId, Refusal>,
    who: (Criticality, Tag),
    waited: Duration,
) {
    match taken {
        Ok(id) if id.is_overdraft() => {}
        Ok(id) => traced.admitted(id.index(), who, waited),
        Err(refusal) => traced.decided(who, TraceOutcome::Refused(refusal.code()), waited),
    }
}
