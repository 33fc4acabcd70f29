//! How many of a pool's slots are in use, who may take the next one, and
//! the line of callers waiting for one.
//!
//! This module owns [`Permits`]: the count of slots in use, the share each
//! [`Criticality`] may fill, the waiters (most critical first; within a
//! level, patient waiters first, then the bounded queue: oldest first, or
//! newest first once the queue has stood longer than its interval) and the
//! handoff of a released slot to the next waiter. It must never count more
//! slots in use than the capacity, never lose a released slot (a slot handed
//! to a waiter that has gone comes back through its grant's drop), and
//! never block: its lock is held for a few pointer moves, never across an
//! await or a user callback.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::caller::Criticality;
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

/// Fixed limits for a pool's waiting queue, the one
/// [`Admission::Queue`](crate::Admission::Queue) callers wait in.
///
/// While a level's queue keeps emptying, a queued caller waits at most
/// `interval`. Once it has not been empty for longer than `interval` (a
/// standing queue: the pool is overloaded, not bursty), newcomers of that
/// level wait at most `target` and are served newest first, so the callers
/// still waiting are the ones whose clients are still there (the
/// adaptive-LIFO queue of CoDel's idea that Meta describes in "Fail at
/// Scale"). A full queue makes room for a caller by refusing the oldest
/// queued caller of a less critical level; with none, the caller is
/// refused. Refusals come at that moment, like a fail-fast one, never late.
///
/// Without a policy a pool queues up to twice its capacity and derives the
/// times from its own work: a queued caller waits at most one typical work
/// time (the median of recent work; two for a critical caller), so an
/// admitted caller's answer takes about twice the work at most; a level's
/// queue stands once it has not emptied for four work times, and then gives
/// newcomers an eighth of one. Until the pool has seen its work (and for
/// request-lease pools, whose leases run none) it uses the times of
/// [`QueuePolicy::for_capacity`]. A caller with a deadline may wait as long
/// as its deadline allows, less the work's 90th percentile, while its queue
/// does not stand.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::Pool;
/// use admission_core::pool::QueuePolicy;
///
/// let pool = Pool::builder("registry")
///     .capacity(2)
///     .queue(QueuePolicy {
///         bound: 8,
///         target: Duration::from_millis(5),
///         interval: Duration::from_millis(100),
///     })
///     .build()
///     .unwrap();
/// assert_eq!(pool.capacity(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueuePolicy {
    /// How many callers may wait in the queue at once.
    pub bound: usize,
    /// The longest a newcomer waits once its level's queue stands.
    pub target: Duration,
    /// How long a level's queue may go without emptying before it stands;
    /// also the longest a queued caller without a deadline waits.
    pub interval: Duration,
}

impl QueuePolicy {
    /// Twice `capacity` waiters, a 5 ms target and a 100 ms interval
    /// (CoDel's and Meta's figures): what a pool uses before it has seen
    /// its work.
    pub const fn for_capacity(capacity: usize) -> QueuePolicy {
        QueuePolicy {
            bound: capacity.saturating_mul(2),
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
        }
    }

    pub(crate) fn is_valid(self) -> bool {
        self.bound > 0 && !self.target.is_zero() && self.target <= self.interval
    }
}

/// The share of a pool's slots each [`Criticality`] may fill, in percent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shares {
    percent: [u8; 3],
}

impl Default for Shares {
    /// Critical and default work may fill the pool; sheddable work half of
    /// it. A default share below 100% would leave slots idle for a service
    /// that marks nothing (every caller is default), and on a 2-slot pool
    /// it would halve the capacity of ordinary traffic.
    fn default() -> Self {
        Shares {
            percent: [100, 100, 50],
        }
    }
}

impl Shares {
    pub(crate) fn set(&mut self, level: Criticality, percent: u8) {
        self.percent[level.index()] = percent;
    }

    /// The slots in use at or above which each level is refused: at least
    /// one slot per level, critical always the whole pool, and no level
    /// above a more critical one.
    pub(crate) fn limits(self, capacity: usize) -> Result<[usize; 3], (Criticality, u8)> {
        let mut limits = [capacity; 3];
        for level in Criticality::ALL {
            let percent = self.percent[level.index()];
            let above = match level {
                Criticality::Critical => 100,
                Criticality::Default => self.percent[0],
                Criticality::Sheddable => self.percent[1],
            };
            if percent == 0 || percent > above || (level == Criticality::Critical && percent != 100)
            {
                return Err((level, percent));
            }
            limits[level.index()] = (capacity * usize::from(percent) / 100).max(1);
        }
        Ok(limits)
    }
}

/// Why a slot could not be taken at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoSlot {
    /// The caller's share of the pool is in use.
    Full,
    /// The pool is closed.
    Closed,
}

/// How a waiter waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Patience {
    /// `Wait` / `WaitFor`: a background caller whose producer is bounded;
    /// served before the queue of its level and never dropped by it.
    Patient,
    /// `Queue`: bounded in number and in time by the [`QueuePolicy`].
    Queued,
}

/// What [`Permits::enqueue`] did.
#[derive(Debug)]
pub(crate) enum Enqueued<G> {
    /// A slot was free after all: the caller holds it.
    Acquired,
    /// The pool is closed.
    Closed,
    /// The queue is at its bound.
    Full,
    /// The caller waits; its grant (or why it was dropped from the line)
    /// arrives on `grant`.
    Waiting(Ticket<G>),
}

/// A waiter's place in line.
#[derive(Debug)]
pub(crate) struct Ticket<G> {
    pub(crate) id: u64,
    pub(crate) grant: oneshot::Receiver<Answer<G>>,
    /// Waiters of this level or a more critical one ahead of this one.
    pub(crate) ahead: usize,
    /// The queue stands: a queued caller waits at most the target.
    pub(crate) standing: bool,
}

#[derive(Debug)]
struct Waiter<G> {
    id: u64,
    grant: oneshot::Sender<Answer<G>>,
    /// When a queued caller joined (patient ones are never shed).
    joined: Option<Instant>,
}

/// What a waiter is told: its slot, or why the line let it go.
pub(crate) type Answer<G> = Result<G, Shed>;

/// Why a queued caller was let go before a slot came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shed {
    /// A more critical caller took its place in a full queue.
    Displaced,
    /// Its level's queue stands and it had waited longer than the target.
    Stale,
}

#[derive(Debug)]
struct Level<G> {
    patient: VecDeque<Waiter<G>>,
    queued: VecDeque<Waiter<G>>,
}

impl<G> Default for Level<G> {
    fn default() -> Self {
        Level {
            patient: VecDeque::new(),
            queued: VecDeque::new(),
        }
    }
}

impl<G> Level<G> {
    fn line(&mut self, patience: Patience) -> &mut VecDeque<Waiter<G>> {
        match patience {
            Patience::Patient => &mut self.patient,
            Patience::Queued => &mut self.queued,
        }
    }

    fn len(&self) -> usize {
        self.patient.len() + self.queued.len()
    }
}

#[derive(Debug)]
struct Line<G> {
    levels: [Level<G>; 3],
    /// Queued (not patient) waiters, per level.
    queued: [usize; 3],
    /// Per level, when its queue last went from empty to not empty: each
    /// level stands or drains on its own, so a flood of sheddable callers
    /// never shortens a critical caller's wait.
    since: [Option<Instant>; 3],
    /// Per level, when its queue last became empty: a queue that a joiner
    /// finds emptied less than a target ago has not drained (under overload
    /// it empties for a moment as its last caller is served, shed or gives
    /// up), so it keeps standing.
    emptied: [Option<Instant>; 3],
    /// How long a queue may go without emptying before it stands (the
    /// newest joiner's interval).
    interval: Duration,
    /// How long a caller may wait in a standing queue (the newest
    /// joiner's target).
    target: Duration,
    next_id: u64,
}

impl<G> Line<G> {
    fn standing(&self, level: usize, now: Instant) -> bool {
        self.queued[level] > 0
            && self.since[level].is_some_and(|since| now.duration_since(since) > self.interval)
    }

    fn total_queued(&self) -> usize {
        self.queued.iter().sum()
    }

    /// A queued caller of `level` left the queue (served, shed or gone).
    fn took_queued(&mut self, level: usize, now: Instant) {
        self.queued[level] -= 1;
        if self.queued[level] == 0 {
            self.emptied[level] = Some(now);
        }
    }

    /// A caller of `level` joins the queue at `now`: the queue has been
    /// non-empty since now, unless it emptied only a moment ago.
    fn joined(&mut self, level: usize, now: Instant) {
        self.queued[level] += 1;
        if self.queued[level] > 1 {
            return;
        }
        let a_moment_ago =
            self.emptied[level].is_some_and(|emptied| now.duration_since(emptied) <= self.target);
        if !(a_moment_ago && self.since[level].is_some()) {
            self.since[level] = Some(now);
        }
    }

    /// Takes the next waiter a slot may go to while `others` slots are in
    /// use: the most critical level whose share leaves room, its patient
    /// waiters first, then its queue (newest first when that queue stands).
    fn pop(&mut self, others: usize, limits: &[usize; 3]) -> Option<Waiter<G>> {
        for (level, &limit) in limits.iter().enumerate() {
            if others >= limit {
                continue;
            }
            if let Some(waiter) = self.levels[level].patient.pop_front() {
                return Some(waiter);
            }
            if self.queued[level] == 0 {
                continue;
            }
            let now = Instant::now();
            let queue = &mut self.levels[level].queued;
            let waiter = if self.since[level]
                .is_some_and(|since| now.duration_since(since) > self.interval)
            {
                queue.pop_back()
            } else {
                queue.pop_front()
            };
            if let Some(waiter) = waiter {
                self.took_queued(level, now);
                return Some(waiter);
            }
        }
        None
    }

    /// Lets go of the callers of standing queues that have waited longer
    /// than the target (they are refused at once rather than at their own
    /// limit); returns how many.
    fn shed_stale(&mut self, now: Instant) -> usize {
        let mut shed = 0;
        for level in 0..3 {
            if !self.standing(level, now) {
                continue;
            }
            while let Some(front) = self.levels[level].queued.front() {
                if front
                    .joined
                    .is_none_or(|joined| now.duration_since(joined) <= self.target)
                {
                    break;
                }
                if let Some(waiter) = self.levels[level].queued.pop_front() {
                    let _gone = waiter.grant.send(Err(Shed::Stale));
                }
                self.took_queued(level, now);
                shed += 1;
            }
        }
        shed
    }

    /// Makes room in a full queue for a caller of `level` by dropping the
    /// oldest queued caller of the least critical level below it, if any
    /// (that caller is refused as if the queue had been full for it).
    fn evict_below(&mut self, level: usize) -> bool {
        let Some(lower) = (level + 1..3).rev().find(|&l| self.queued[l] > 0) else {
            return false;
        };
        if let Some(waiter) = self.levels[lower].queued.pop_front() {
            let _gone = waiter.grant.send(Err(Shed::Displaced));
        }
        self.took_queued(lower, Instant::now());
        true
    }
}

/// The "someone may be in line" bit of [`Permits::state`]; the bits below
/// count the slots in use.
const LINE: usize = 1 << (usize::BITS - 1);

/// The slot count and the waiting line of one pool; `G` is the grant a
/// waiter receives (it gives the slot back when dropped unused).
///
/// The count of slots in use and the bit that says the line may not be
/// empty share one atomic word, so a release and a caller joining the line
/// cannot miss each other: the joiner sets the bit only with a
/// compare-and-swap against the full count it saw, and a release that finds
/// the bit set hands its slot over under the line's lock instead of
/// counting it free.
#[derive(Debug)]
pub(crate) struct Permits<G> {
    /// Per level (most critical first): the slots in use at or above which
    /// that level is not admitted.
    limits: [usize; 3],
    /// Slots in use, plus [`LINE`] while the line may have waiters.
    state: AtomicUsize,
    /// Waiters in line, for the statistics (the line's length, kept under
    /// its lock).
    waiting: AtomicUsize,
    closed: AtomicBool,
    /// How many callers may wait in the queue at once.
    bound: usize,
    line: Mutex<Line<G>>,
}

impl<G> Permits<G> {
    pub(crate) fn new(limits: [usize; 3], bound: usize) -> Self {
        Permits {
            limits,
            state: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            bound,
            line: Mutex::new(Line {
                levels: Default::default(),
                queued: [0; 3],
                since: [None; 3],
                emptied: [None; 3],
                interval: Duration::ZERO,
                target: Duration::ZERO,
                next_id: 0,
            }),
        }
    }

    pub(crate) fn in_use(&self) -> usize {
        self.state.load(SeqCst) & !LINE
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(SeqCst)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(SeqCst)
    }

    fn lock(&self) -> crate::loom::sync::MutexGuard<'_, Line<G>> {
        self.line
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a slot if the level's share has room.
    #[inline]
    pub(crate) fn try_acquire(&self, level: Criticality) -> Result<(), NoSlot> {
        let limit = self.limits[level.index()];
        let mut state = self.state.load(SeqCst);
        loop {
            if self.closed.load(SeqCst) {
                return Err(NoSlot::Closed);
            }
            if state & !LINE >= limit {
                return Err(NoSlot::Full);
            }
            match self
                .state
                .compare_exchange_weak(state, state + 1, SeqCst, SeqCst)
            {
                Ok(_) => return Ok(()),
                Err(actual) => state = actual,
            }
        }
    }

    /// Joins the line, unless a slot is free after all: under the lock, the
    /// caller either takes a slot or marks the line as not empty, each by a
    /// compare-and-swap against the count it saw.
    /// A queued caller's `interval` is the queue's interval from now on
    /// (the pool derives it from its typical work).
    pub(crate) fn enqueue(
        &self,
        level: Criticality,
        patience: Patience,
        (target, interval): (Duration, Duration),
    ) -> Enqueued<G> {
        let mut line = self.lock();
        if self.closed.load(SeqCst) {
            return Enqueued::Closed;
        }
        if patience == Patience::Queued {
            line.interval = interval;
            line.target = target;
            self.shed_stale(&mut line);
        }
        if patience == Patience::Queued
            && line.total_queued() >= self.bound
            && !self.evicted_below(&mut line, level)
        {
            // The bound counts waiters, not slots: a free slot is still
            // taken at once.
            return match self.try_acquire(level) {
                Ok(()) => Enqueued::Acquired,
                Err(NoSlot::Closed) => Enqueued::Closed,
                Err(NoSlot::Full) => Enqueued::Full,
            };
        }
        let limit = self.limits[level.index()];
        let mut state = self.state.load(SeqCst);
        loop {
            let next = if state & !LINE < limit {
                state + 1
            } else {
                state | LINE
            };
            match self.state.compare_exchange(state, next, SeqCst, SeqCst) {
                Ok(_) if next == state + 1 => return Enqueued::Acquired,
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        let ahead = line.levels[..=level.index()].iter().map(Level::len).sum();
        let id = line.next_id;
        line.next_id += 1;
        let (tx, rx) = oneshot::channel();
        let joined = (patience == Patience::Queued).then(Instant::now);
        line.levels[level.index()].line(patience).push_back(Waiter {
            id,
            grant: tx,
            joined,
        });
        self.waiting.fetch_add(1, SeqCst);
        let mut standing = false;
        if patience == Patience::Queued {
            let now = Instant::now();
            line.joined(level.index(), now);
            standing = line.standing(level.index(), now);
        }
        Enqueued::Waiting(Ticket {
            id,
            grant: rx,
            ahead,
            standing,
        })
    }

    /// Leaves the line (a waiter that gave up). Nothing to do when the
    /// waiter was already handed a slot: its grant, dropped with the
    /// receiver, gives the slot back.
    pub(crate) fn cancel(&self, level: Criticality, patience: Patience, id: u64) {
        let mut line = self.lock();
        let waiters = line.levels[level.index()].line(patience);
        if let Some(at) = waiters.iter().position(|w| w.id == id) {
            waiters.remove(at);
            if patience == Patience::Queued {
                line.took_queued(level.index(), Instant::now());
            }
            self.left_line(&line);
        }
    }

    /// Lets go of stale callers of standing queues (see
    /// [`Line::shed_stale`]) and counts them out of the line.
    fn shed_stale(&self, line: &mut Line<G>) {
        if line.total_queued() == 0 {
            return;
        }
        let shed = line.shed_stale(Instant::now());
        if shed > 0 {
            self.waiting.fetch_sub(shed, SeqCst);
            if line.levels.iter().all(|level| level.len() == 0) {
                self.state.fetch_and(!LINE, SeqCst);
            }
        }
    }

    /// Drops a less critical queued caller to make room for `level`.
    fn evicted_below(&self, line: &mut Line<G>, level: Criticality) -> bool {
        if line.evict_below(level.index()) {
            // The line is not empty: the joiner is about to be in it.
            self.waiting.fetch_sub(1, SeqCst);
            true
        } else {
            false
        }
    }

    /// Counts one waiter out of the line, and clears the line bit once the
    /// line is empty (under the lock, where the bit is set).
    fn left_line(&self, line: &Line<G>) {
        self.waiting.fetch_sub(1, SeqCst);
        if line.levels.iter().all(|level| level.len() == 0) {
            self.state.fetch_and(!LINE, SeqCst);
        }
    }

    /// Gives one slot back: to the next waiter it may go to (the slot stays
    /// counted in use and now belongs to the returned waiter, who must be
    /// sent its grant, or the slot released again if it has gone), or to
    /// the pool.
    pub(crate) fn release(&self) -> Option<oneshot::Sender<Answer<G>>> {
        let mut state = self.state.load(SeqCst);
        while state & LINE == 0 {
            match self
                .state
                .compare_exchange_weak(state, state - 1, SeqCst, SeqCst)
            {
                Ok(_) => return None,
                Err(actual) => state = actual,
            }
        }
        // Someone may be in line: decide under the lock, where the line bit
        // is set and cleared.
        let mut line = self.lock();
        self.shed_stale(&mut line);
        let others = (self.state.load(SeqCst) & !LINE).saturating_sub(1);
        if !self.closed.load(SeqCst)
            && let Some(waiter) = line.pop(others, &self.limits)
        {
            self.left_line(&line);
            return Some(waiter.grant);
        }
        self.state.fetch_sub(1, SeqCst);
        None
    }

    /// Closes: no slot is taken from now on, and every waiter is told (its
    /// grant sender dropped).
    pub(crate) fn close(&self) {
        self.closed.store(true, SeqCst);
        let mut line = self.lock();
        let dropped: usize = line.levels.iter().map(Level::len).sum();
        line.levels = Default::default();
        line.queued = [0; 3];
        line.since = [None; 3];
        line.emptied = [None; 3];
        self.waiting.fetch_sub(dropped, SeqCst);
        self.state.fetch_and(!LINE, SeqCst);
    }
}
