//! How many of a pool's slots are in use, who may take the next one, and
//! the line of callers waiting for one.
//!
//! This module owns [`Permits`]: the word that counts the slots in use and
//! says whether the pool is closed and whether anyone may be in line, the
//! share each [`Criticality`] may fill, the waiters (most critical first;
//! within a level, patient waiters first, then the bounded queue: oldest
//! first, or newest first once the queue has stood longer than its
//! interval) and the handoff of a released slot to the next waiter. It must
//! never count more slots in use than the capacity, never grant a slot once
//! [`Permits::close`] has returned, never lose a released slot (a slot
//! handed to a waiter that has gone comes back through its cancel), and
//! never block: its lock is held for a few index moves, never across an
//! await, and no waker is woken while it is held (they are collected under
//! the lock and woken after it).
//!
//! The same word keeps the pool's books: how many slots were ever admitted
//! (taken by a caller) and how many of the slots in use are handed to a
//! waiter that has not yet taken them, so that each admission, each return
//! and each handoff is counted by the very operation that makes it, once,
//! and a snapshot of `admitted`, `released` and `in_use` is one load.
//! It also heads the free list of slot numbers ([`SlotId`]): the swap
//! that takes a slot takes a number no slot in use has, so that the
//! holder table is written with plain stores; it must never hand out a
//! number that is in use.
//!
//! An admission may take several slots at once (its cost): the word counts
//! slots, an admission of cost `c` takes `c` of them and one number, and
//! gives all `c` back together. A waiter is served whole: while it is the
//! next to be served and does not fit yet, the slots that come back are
//! set aside for it (counted in use and in transit, one waiter at a time,
//! never all it needs), so that callers of cost 1 do not starve it; they
//! go on or back if it leaves the line unserved. Between waiters with a
//! flow the line serves in fair order (see [`WaitLine::next_served`]),
//! reading what each flow holds from the pool's flow table. In a queue
//! only the flood (the flow with most waiting, at its share) pays for the
//! line: another flow's waiter is not shed when the queue stands and takes
//! the place of the flood's newest waiter when the queue is full.
//!
//! The line is a slab of nodes threaded into six index-linked lists (three
//! levels, patient and queued): a waiter's state (waiting with its waker,
//! granted, shed or closed) lives in its node, which the waiter alone frees,
//! so joining the line allocates nothing once the slab has grown to the
//! most waiters seen at once, and a cancelled waiter unlinks its own node
//! without a scan.

use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

use super::flows::Flows;
use super::stats::SlotCounts;
use crate::caller::Criticality;
use crate::loom::sync::Mutex;
use crate::loom::sync::atomic::{
    AtomicU32, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};

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

/// One of a pool's N slots, by number (`0..N`): the permits hand each
/// taken slot a number no other slot in use has, and the holder table
/// keeps who holds it at that index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotId(u32);

impl SlotId {
    /// A slot a pool in shadow mode handed out past its capacity: no slot
    /// of the N, counted apart (no pool has this many slots).
    pub(crate) const OVERDRAFT: SlotId = SlotId(Self::FLOW | Self::INDEX);

    /// The mark of a slot a flow holds: its flow table keeps the slot's
    /// count, and only a marked slot's return looks there. No pool has
    /// this many slots; [`SlotId::OVERDRAFT`] has the mark too.
    const FLOW: u32 = 1 << 31;

    /// The bits of the slot's number (every number below
    /// [`MAX_CAPACITY`](crate::pool::MAX_CAPACITY) fits).
    const INDEX: u32 = 0xFFFF;

    /// Where an admission's cost less one starts (8 bits): an admission of
    /// cost `c` is one number holding `c` slots of the count, and is always
    /// marked, so that only a marked return looks at its cost.
    const COST_SHIFT: u32 = 16;

    /// The slot's index in a table of N entries (marked or not).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        (self.0 & Self::INDEX) as usize
    }

    /// The same slot, marked: a flow's, or a traced pool's (its return
    /// takes the marked path, which looks at the flow table and the trace).
    #[inline]
    pub(crate) const fn for_flow(self) -> SlotId {
        if self.is_overdraft() {
            self
        } else {
            SlotId(self.0 | Self::FLOW)
        }
    }

    /// The same number holding `cost` slots (1 ..= 256), marked when the
    /// cost is above one.
    #[inline]
    pub(crate) const fn with_cost(self, cost: u32) -> SlotId {
        if cost <= 1 {
            return self;
        }
        SlotId(
            (self.0 & !(0xFF << Self::COST_SHIFT)) | ((cost - 1) << Self::COST_SHIFT) | Self::FLOW,
        )
    }

    /// How many of the pool's slots this admission holds (1 ..= 256).
    #[inline]
    pub(crate) const fn cost(self) -> u32 {
        ((self.0 >> Self::COST_SHIFT) & 0xFF) + 1
    }

    /// Whether it is marked: a flow's or a traced pool's slot, one of a
    /// cost above one, or an overdraft.
    #[inline]
    pub(crate) const fn is_marked(self) -> bool {
        self.0 >= Self::FLOW
    }

    /// The bare number, as the permits' free list knows it (its cost and
    /// mark dropped).
    #[inline]
    pub(crate) const fn unmarked(self) -> SlotId {
        if self.is_overdraft() {
            self
        } else {
            SlotId(self.0 & Self::INDEX)
        }
    }

    /// Slot number `n`, for the tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn for_test(n: usize) -> SlotId {
        SlotId(u32::try_from(n).expect("a slot number"))
    }

    /// Whether it is an overdraft: a shadow admission past the capacity,
    /// of any cost ([`SlotId::OVERDRAFT`], [`SlotId::overdraft`]).
    #[inline]
    pub(crate) const fn is_overdraft(self) -> bool {
        self.0 & (Self::FLOW | Self::INDEX) == Self::FLOW | Self::INDEX
    }

    /// An overdraft of `cost` slots.
    pub(crate) const fn overdraft(cost: u32) -> SlotId {
        if cost <= 1 {
            Self::OVERDRAFT
        } else {
            SlotId(Self::FLOW | Self::INDEX | ((cost - 1) << Self::COST_SHIFT))
        }
    }
}

/// What [`Permits::enqueue_asking`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Enqueued {
    /// A slot was free after all: the caller holds it.
    Acquired(SlotId),
    /// The pool is closed.
    Closed,
    /// The queue is at its bound.
    Full,
    /// The caller waits: poll [`Permits::poll_wait`] with the ticket's key,
    /// and [`Permits::cancel`] it if the wait ends unanswered.
    Waiting(Ticket),
}

/// A waiter's place in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    /// Its node in the line, the waiter's until answered or cancelled.
    pub(crate) key: Key,
    /// Waiters of this level or a more critical one ahead of this one.
    pub(crate) ahead: usize,
    /// The queue stands: a queued caller waits at most the target.
    pub(crate) standing: bool,
    /// Its flow is not the flood (under its share, or with fewer waiting
    /// than another flow): it is served before the flood's waiters, and
    /// may wait for one more release than the queue's own wait.
    pub(crate) favoured: bool,
}

/// A waiter's node in the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(u32);

/// Why a waiter was let go without a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shed {
    /// A more critical caller took its place in a full queue.
    Displaced,
    /// A waiter of a flow short of its share took its place in a full
    /// queue: its flow had the most waiting.
    Outweighed,
    /// Its level's queue stands and it had waited longer than the target.
    Stale,
    /// The pool closed.
    Closed,
}

/// No node: the end of a list.
const NIL: u32 = u32::MAX;

/// A waiter's state, kept in its node.
#[derive(Debug)]
enum State {
    /// In line; woken through its waker once answered.
    Waiting(Option<Waker>),
    /// Handed a slot, which is counted in use and is the waiter's: with
    /// its number when a returning slot was passed on, without one when a
    /// raised limit made room (the waiter takes a free number as it takes
    /// the slot).
    Granted(Option<SlotId>),
    /// Let go without a slot.
    Shed(Shed),
    /// Not a waiter's: on the free list.
    Free,
}

#[derive(Debug)]
struct Node {
    state: State,
    /// The neighbours in its list while linked; `next` threads the free
    /// list once free.
    prev: u32,
    next: u32,
    /// Which of the six lists: `level * 2 + patience`.
    list: usize,
    /// When a queued caller joined, for shedding it once stale (`None`:
    /// never shed as stale: patient callers, and queued callers promised a
    /// longer wait by a trusted deadline).
    joined: Option<Instant>,
    /// The slots it asks for at once (its cost, at least 1).
    cost: u32,
    /// The slots set aside for it while it is the next to be served but
    /// does not fit yet (counted in use and in transit; below `cost`).
    got: u32,
    /// Its flow's bucket in the pool's flow table ([`NO_FLOW`]: none) and
    /// the flow's weight, for fair order between flows.
    flow: u16,
    weight: u8,
    /// Its flow's pressure when it joined (see [`Ask::pressure`]).
    pressure: u32,
}

/// A waiter without a flow.
pub(crate) const NO_FLOW: u16 = u16::MAX;

/// One index-linked list of waiters.
#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    len: usize,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        len: 0,
    };
}

const fn list_of(level: usize, patience: Patience) -> usize {
    level * 2
        + match patience {
            Patience::Patient => 0,
            Patience::Queued => 1,
        }
}

/// The wakers of the waiters answered under the lock, woken once it is
/// released. A handful fit inline, so a release or a shed allocates only
/// when it answers more waiters at once than that.
#[derive(Debug, Default)]
struct Wakes {
    inline: [Option<Waker>; 4],
    len: usize,
    spill: Vec<Waker>,
}

impl Wakes {
    fn push(&mut self, waker: Option<Waker>) {
        let Some(waker) = waker else { return };
        if let Some(slot) = self.inline.get_mut(self.len) {
            *slot = Some(waker);
            self.len += 1;
        } else {
            self.spill.push(waker);
        }
    }

    /// Wakes them all; called with the line's lock released.
    fn wake(self) {
        for waker in self.inline.into_iter().flatten() {
            waker.wake();
        }
        for waker in self.spill {
            waker.wake();
        }
    }
}

#[derive(Debug)]
struct WaitLine {
    /// Every node, linked, answered (not yet freed by its waiter) or free.
    nodes: Vec<Node>,
    /// The first free node, [`NIL`] when none.
    free: u32,
    lists: [List; 6],
    /// Nodes linked in any list.
    linked: usize,
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
    /// The one waiter slots are set aside for ([`NIL`]: none): the next
    /// to be served, whose cost does not fit yet. One at most, so two
    /// waiters never each hold part of what the other needs.
    parked: u32,
    /// Slots set aside for a waiter that left the line unserved (shed,
    /// cancelled, closed): the permits give them on or back.
    freed: u64,
}

impl WaitLine {
    fn new() -> WaitLine {
        WaitLine {
            nodes: Vec::new(),
            free: NIL,
            lists: [List::EMPTY; 6],
            linked: 0,
            since: [None; 3],
            emptied: [None; 3],
            interval: Duration::ZERO,
            target: Duration::ZERO,
            parked: NIL,
            freed: 0,
        }
    }

    fn queued(&self, level: usize) -> usize {
        self.lists[list_of(level, Patience::Queued)].len
    }

    fn total_queued(&self) -> usize {
        (0..3).map(|level| self.queued(level)).sum()
    }

    fn standing(&self, level: usize, now: Instant) -> bool {
        self.queued(level) > 0
            && self.since[level].is_some_and(|since| now.duration_since(since) > self.interval)
    }

    /// Links a new waiter at the back of `list`, in a free node if any.
    fn push_back(&mut self, list: usize, joined: Option<Instant>, ask: Ask) -> Key {
        let tail = self.lists[list].tail;
        let node = Node {
            state: State::Waiting(None),
            prev: tail,
            next: NIL,
            list,
            joined,
            cost: ask.cost.max(1),
            got: 0,
            flow: ask.flow,
            weight: ask.weight.max(1),
            pressure: ask.pressure,
        };
        let at = if self.free == NIL {
            let at = u32::try_from(self.nodes.len()).expect("fewer than 2^32 waiters");
            self.nodes.push(node);
            at
        } else {
            let at = self.free;
            self.free = self.nodes[at as usize].next;
            self.nodes[at as usize] = node;
            at
        };
        if tail == NIL {
            self.lists[list].head = at;
        } else {
            self.nodes[tail as usize].next = at;
        }
        self.lists[list].tail = at;
        self.lists[list].len += 1;
        self.linked += 1;
        Key(at)
    }

    /// Unlinks node `at` from its list (it stays allocated, its waiter's
    /// until freed); a queued node leaving its queue is noted at `now`.
    fn unlink(&mut self, at: u32, now: Instant) {
        if at == self.parked {
            // It leaves unserved: what was set aside for it goes on.
            self.parked = NIL;
            self.freed += u64::from(std::mem::take(&mut self.nodes[at as usize].got));
        }
        let Node {
            prev, next, list, ..
        } = self.nodes[at as usize];
        if prev == NIL {
            self.lists[list].head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.lists[list].tail = prev;
        } else {
            self.nodes[next as usize].prev = prev;
        }
        self.lists[list].len -= 1;
        self.linked -= 1;
        if list % 2 == 1 && self.lists[list].len == 0 {
            self.emptied[list / 2] = Some(now);
        }
    }

    /// Gives the waiter of node `at` (unlinked) its answer; returns its
    /// waker, to be woken once the lock is released.
    fn answer(&mut self, at: u32, answer: State) -> Option<Waker> {
        match std::mem::replace(&mut self.nodes[at as usize].state, answer) {
            State::Waiting(waker) => waker,
            State::Granted(_) | State::Shed(_) | State::Free => None,
        }
    }

    /// Puts node `at` on the free list: its waiter has left.
    fn free(&mut self, at: u32) {
        let node = &mut self.nodes[at as usize];
        node.state = State::Free;
        node.next = self.free;
        self.free = at;
    }

    /// A caller of `level` joined the queue at `now`: the queue has been
    /// non-empty since now, unless it emptied only a moment ago.
    fn joined(&mut self, level: usize, now: Instant) {
        if self.queued(level) > 1 {
            return;
        }
        let a_moment_ago =
            self.emptied[level].is_some_and(|emptied| now.duration_since(emptied) <= self.target);
        if !(a_moment_ago && self.since[level].is_some()) {
            self.since[level] = Some(now);
        }
    }

    /// The next waiter to serve under `limits`: the most critical level
    /// with a waiter whose cost its limit can hold; within it, its patient
    /// waiters first, then its queue (newest first when that queue
    /// stands), each in line order, except that among waiters with a flow
    /// the one whose flow would hold least for its weight once served (what
    /// it holds plus the waiter's cost; then the one whose flow has fewest
    /// waiting, then the first in line) is served first.
    /// Waiters whose cost is above their level's limit are passed over.
    /// The waiter slots are set aside for stays the next unless a waiter
    /// of a more critical level is.
    fn next_served(&self, limits: &[usize; 3], held: &dyn Fn(u16) -> u32) -> Option<(u32, usize)> {
        let parked = (self.parked != NIL).then(|| {
            let node = &self.nodes[self.parked as usize];
            (self.parked, node.list / 2)
        });
        for (level, &limit) in limits.iter().enumerate() {
            if let Some((at, parked_level)) = parked
                && parked_level == level
            {
                return Some((at, level));
            }
            for patience in [Patience::Patient, Patience::Queued] {
                let list = list_of(level, patience);
                let newest_first =
                    patience == Patience::Queued && self.standing(level, Instant::now());
                if let Some(at) = self.first_served(list, limit, newest_first, held) {
                    return Some((at, level));
                }
            }
        }
        None
    }

    /// The waiter of `list` to serve first (see [`next_served`](Self::next_served)).
    fn first_served(
        &self,
        list: usize,
        limit: usize,
        newest_first: bool,
        held: &dyn Fn(u16) -> u32,
    ) -> Option<u32> {
        let List { head, tail, .. } = self.lists[list];
        let step = |at: u32| {
            let node = &self.nodes[at as usize];
            if newest_first { node.prev } else { node.next }
        };
        let fits = |at: u32| self.nodes[at as usize].cost as usize <= limit;
        let mut at = if newest_first { tail } else { head };
        while at != NIL && !fits(at) {
            at = step(at);
        }
        if at == NIL || self.nodes[at as usize].flow == NO_FLOW {
            return (at != NIL).then_some(at);
        }
        // Fair order between the flows waiting in this list.
        let mut waiting = [0_u16; super::flows::BUCKETS];
        let mut scan = at;
        while scan != NIL {
            let node = &self.nodes[scan as usize];
            if let Some(count) = waiting.get_mut(usize::from(node.flow)) {
                *count = count.saturating_add(1);
            }
            scan = step(scan);
        }
        // What its flow would hold once it is served, for its weight:
        // fair order counts cost. In a standing queue (the newest served
        // first) a tie goes to the flow that presses less: the flood's
        // newest waiter is always newer than a tenant's.
        let rank = |at: u32| {
            let node = &self.nodes[at as usize];
            (
                u64::from(held(node.flow)) + u64::from(node.cost),
                u64::from(node.weight),
                waiting.get(usize::from(node.flow)).copied().unwrap_or(0),
                if newest_first { node.pressure } else { 0 },
            )
        };
        let mut best = at;
        let mut scan = step(at);
        while scan != NIL {
            if fits(scan) && self.nodes[scan as usize].flow != NO_FLOW {
                let (
                    (held_a, weight_a, waiting_a, pressure_a),
                    (held_b, weight_b, waiting_b, pressure_b),
                ) = (rank(scan), rank(best));
                // held_a / weight_a < held_b / weight_b, then fewer
                // waiting, then less pressure.
                let (a, b) = (held_a * weight_b, held_b * weight_a);
                if (a, waiting_a, pressure_a) < (b, waiting_b, pressure_b) {
                    best = scan;
                }
            }
            scan = step(scan);
        }
        Some(best)
    }

    /// Lets go of the callers of standing queues that have waited longer
    /// than the target (they are refused at once rather than at their own
    /// limit); returns how many.
    fn shed_stale(&mut self, now: Instant, wakes: &mut Wakes) -> usize {
        let mut shed = 0;
        for level in 0..3 {
            if !self.standing(level, now) {
                continue;
            }
            loop {
                let front = self.lists[list_of(level, Patience::Queued)].head;
                if front == NIL
                    || self.nodes[front as usize]
                        .joined
                        .is_none_or(|joined| now.duration_since(joined) <= self.target)
                {
                    break;
                }
                self.unlink(front, now);
                wakes.push(self.answer(front, State::Shed(Shed::Stale)));
                shed += 1;
            }
        }
        shed
    }

    /// Whether another flow queued at `level` presses harder than
    /// `pressure` (its waiters' pressure when they joined).
    fn presses_less(&self, level: usize, flow: u16, pressure: u32) -> bool {
        let mut at = self.lists[list_of(level, Patience::Queued)].head;
        while at != NIL {
            let node = &self.nodes[at as usize];
            if node.flow != NO_FLOW && node.flow != flow && node.pressure > pressure {
                return true;
            }
            at = node.next;
        }
        false
    }

    /// See [`Permits::evicted_for_flow`].
    fn evict_for_flow(
        &mut self,
        level: usize,
        flow: u16,
        pressure: u32,
        wakes: &mut Wakes,
    ) -> bool {
        // The waiter that joined pressing hardest (the newest of them on a
        // tie: a flood's newest waiter joined pressing hardest of its own).
        let mut victim = None;
        for level in level..3 {
            let mut at = self.lists[list_of(level, Patience::Queued)].head;
            while at != NIL {
                let node = &self.nodes[at as usize];
                if node.flow != NO_FLOW
                    && node.flow != flow
                    && node.pressure > pressure
                    && victim.is_none_or(|(_, most)| node.pressure >= most)
                {
                    victim = Some((at, node.pressure));
                }
                at = node.next;
            }
        }
        let Some((at, _)) = victim else {
            return false;
        };
        self.unlink(at, Instant::now());
        wakes.push(self.answer(at, State::Shed(Shed::Outweighed)));
        true
    }

    /// Makes room in a full queue for a caller of `level` by letting go of
    /// the oldest queued caller of the least critical level below it, if
    /// any (that caller is refused as if the queue had been full for it).
    fn evict_below(&mut self, level: usize, wakes: &mut Wakes) -> bool {
        let Some(lower) = (level + 1..3).rev().find(|&l| self.queued(l) > 0) else {
            return false;
        };
        let oldest = self.lists[list_of(lower, Patience::Queued)].head;
        self.unlink(oldest, Instant::now());
        wakes.push(self.answer(oldest, State::Shed(Shed::Displaced)));
        true
    }
}

/// The bits of [`Permits::state`] that count the slots in use (handed to
/// waiters included): [`MAX_CAPACITY`](crate::pool::MAX_CAPACITY) fits.
const COUNT: u64 = (1 << 13) - 1;
/// One slot handed to a waiter that has not taken it yet (13 bits).
const TRANSIT_ONE: u64 = 1 << 13;
/// The admitted count wrapped and the wrap is not yet in `epochs`.
const WRAP: u64 = 1 << 26;
/// Someone may be in line.
const LINE: u64 = 1 << 27;
/// The pool is closed.
const CLOSED: u64 = 1 << 28;
/// Where the number of the first free slot starts (13 bits): the head of
/// the free list, [`NO_SLOT`] when every slot is taken.
const FREE_SHIFT: u32 = 29;
const FREE: u64 = COUNT << FREE_SHIFT;
/// The end of the free list: no slot has this number.
const NO_SLOT: u32 = COUNT as u32;
/// Where the count of admissions starts: the top 22 bits, which wrap
/// (into [`Permits::epochs`]) every 4 million admissions. The count is
/// also the free list's tag: every pop is an admission, so a pop's
/// compare-and-swap fails whenever another pop came between its load and
/// its swap (unless exactly a multiple of 4 million did).
const ADMIT_SHIFT: u32 = 42;
const ADMIT_ONE: u64 = 1 << ADMIT_SHIFT;

const _: () = assert!(crate::error::MAX_CAPACITY as u64 <= COUNT);
const _: () = assert!((crate::error::MAX_CAPACITY as u32) < NO_SLOT);

/// The number of the first free slot in `state`.
#[inline]
const fn free_head(state: u64) -> u32 {
    ((state & FREE) >> FREE_SHIFT) as u32
}

/// `state` with `id` as the first free slot.
#[inline]
const fn with_free_head(state: u64, id: u32) -> u64 {
    (state & !FREE) | ((id as u64) << FREE_SHIFT)
}

/// `state` with one more slot in use, taken by a caller.
#[inline]
const fn admitted(state: u64) -> u64 {
    let next = state.wrapping_add(ADMIT_ONE + 1);
    if next < ADMIT_ONE { next | WRAP } else { next }
}

/// `state` with `cost` more slots in use, taken by one caller (counted as
/// `cost` admissions: the books count slots).
#[inline]
const fn admitted_many(state: u64, cost: u64) -> u64 {
    let next = state.wrapping_add(cost * (ADMIT_ONE + 1));
    if (next >> ADMIT_SHIFT) < (state >> ADMIT_SHIFT) {
        next | WRAP
    } else {
        next
    }
}

/// What a waiter asks for: its cost, and its flow's bucket and weight
/// (for fair order between flows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ask {
    pub(crate) cost: u32,
    pub(crate) flow: u16,
    pub(crate) weight: u8,
    /// Its flow held less than its share when it asked: a standing queue
    /// (the flood of another flow) neither shortens its wait nor sheds it,
    /// and a full queue makes room for it from the flow that presses most.
    pub(crate) under: bool,
    /// How hard its flow presses on the pool (its recent arrivals per unit
    /// of weight, from the flow table): a waiter whose flow presses less
    /// than another waiting flow is not the flood, makes room for itself
    /// in a full queue from the flow that presses most, and wins a tie in
    /// a standing queue. 0 without a flow.
    pub(crate) pressure: u32,
}

#[cfg(test)]
impl Ask {
    /// One slot, no flow.
    pub(crate) const ONE: Ask = Ask {
        cost: 1,
        flow: NO_FLOW,
        weight: 1,
        under: false,
        pressure: 0,
    };
}

/// The slot count and the waiting line of one pool.
///
/// One atomic word holds the count of slots in use, the bit that says the
/// line may not be empty, and the bit that says the pool is closed, so
/// that neither a release and a caller joining the line nor an acquire and
/// a close can miss each other: every slot is taken by a compare-and-swap
/// against a word without the closed bit, the joiner sets the line bit
/// only with a compare-and-swap against the full count it saw, and a
/// release that finds the line bit set decides under the line's lock
/// (where close sets its bit and empties the line) whether its slot goes
/// to a waiter or back to the pool. The word also counts admissions and
/// the slots in transit to a waiter (see the module's doc).
///
/// It also heads the free list of slot numbers, so that each slot taken
/// gets a number ([`SlotId`]) no other slot in use has, by the same
/// compare-and-swap that takes it: the holder table can then record who
/// holds a slot with a plain store to an entry no one else writes, with
/// no second atomic read-modify-write on the admission path. A slot's
/// number goes back on the list by the swap that returns the slot, or
/// passes with it to the waiter it is handed to. The numbers only name
/// holders: the count alone decides admissions.
#[derive(Debug)]
pub(crate) struct Permits {
    /// Per level (most critical first): the slots in use at or above which
    /// that level is not admitted. Fixed for a fixed pool; an adaptive
    /// class moves them with [`Permits::set_limits`].
    limits: [AtomicUsize; 3],
    /// Slots in use, slots in transit, plus [`LINE`] while the line may
    /// have waiters, [`CLOSED`] once closed, and the admissions.
    state: AtomicU64,
    /// How many times the admissions in `state` wrapped.
    epochs: AtomicU64,
    /// The free list's links: for a free slot, the number of the next
    /// free one ([`NO_SLOT`] at the end). Written only by the owner of the
    /// slot as it returns it, before the swap that frees it.
    next_free: Box<[AtomicU32]>,
    /// Waiters in line, for the statistics (the line's length, kept under
    /// its lock).
    waiting: AtomicUsize,
    /// How many callers may wait in the queue at once.
    bound: usize,
    line: Mutex<WaitLine>,
    /// The pool's flow table, made when the first caller with a flow
    /// asks: fair order in the line reads what each flow holds.
    flows: std::sync::OnceLock<Box<Flows>>,
}

impl Permits {
    /// Permits for `capacity` slots (every limit at most that), all free:
    /// the free list runs `0, 1, .., capacity - 1` from the head, which is
    /// slot 0 in a zero word.
    pub(crate) fn new(capacity: usize, limits: [usize; 3], bound: usize) -> Self {
        debug_assert!(limits.iter().all(|&limit| limit <= capacity));
        let next_free = (1..=capacity)
            .map(|next| {
                AtomicU32::new(if next == capacity {
                    NO_SLOT
                } else {
                    next as u32
                })
            })
            .collect();
        Permits {
            limits: limits.map(AtomicUsize::new),
            state: AtomicU64::new(0),
            epochs: AtomicU64::new(0),
            next_free,
            waiting: AtomicUsize::new(0),
            bound,
            line: Mutex::new(WaitLine::new()),
            flows: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn in_use(&self) -> usize {
        (self.state.load(SeqCst) & COUNT) as usize
    }

    /// The books, from one load of the word: slots admitted, returned, and
    /// in use (those in transit to a waiter are in use, not yet admitted).
    pub(crate) fn slot_counts(&self) -> SlotCounts {
        loop {
            let epochs = self.epochs.load(SeqCst);
            let state = self.state.load(SeqCst);
            if state & WRAP != 0 {
                // The admission that wrapped is counting its epoch.
                crate::loom::thread::yield_now();
                continue;
            }
            if self.epochs.load(SeqCst) != epochs {
                continue;
            }
            let admitted = (epochs << (64 - ADMIT_SHIFT)) | (state >> ADMIT_SHIFT);
            let in_use = state & COUNT;
            let held = in_use - ((state / TRANSIT_ONE) & COUNT);
            return SlotCounts {
                admitted,
                released: admitted - held,
                in_use: in_use as usize,
            };
        }
    }

    /// Sets the word after a compare-and-swap from `state` to `next`
    /// succeeded: counts an admissions' wrap into `epochs`.
    #[inline]
    fn after_admission(&self, state: u64, next: u64) {
        if next & WRAP != 0 && state & WRAP == 0 {
            self.wrapped();
        }
    }

    #[cold]
    fn wrapped(&self) {
        self.epochs.fetch_add(1, SeqCst);
        self.state.fetch_and(!WRAP, SeqCst);
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(SeqCst)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(SeqCst) & CLOSED != 0
    }

    #[cfg(all(test, not(loom)))]
    fn with_admitted(limits: [usize; 3], bound: usize, admitted: u64) -> Self {
        let permits = Permits::new(limits[0], limits, bound);
        permits.state.store(admitted << ADMIT_SHIFT, SeqCst);
        permits.epochs.store(admitted >> (64 - ADMIT_SHIFT), SeqCst);
        permits
    }

    fn lock(&self) -> crate::loom::sync::MutexGuard<'_, WaitLine> {
        self.line
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `next` (the word with one more slot taken) with the first free slot
    /// of the word it was computed from off the free list, and that slot's
    /// number. Its link is read after that word: a swap from it fails if
    /// the list changed since (a push changes the head and the count, a
    /// pop the admissions).
    #[inline]
    fn pop(&self, next: u64) -> (u64, SlotId) {
        let id = free_head(next);
        let after = self
            .next_free
            .get(id as usize)
            .map_or(NO_SLOT, |link| link.load(Relaxed));
        (with_free_head(next, after), SlotId(id))
    }

    /// `state` less `taken` with `id` back at the head of the free list,
    /// its link set to the head it covers (the caller owns `id`, so no one
    /// else writes that link).
    #[inline]
    fn push(&self, state: u64, taken: u64, id: SlotId) -> u64 {
        if let Some(link) = self.next_free.get(id.index()) {
            link.store(free_head(state), Relaxed);
        }
        with_free_head(state - taken, id.0)
    }

    /// Gives `taken` back from the word (a slot, and its transit for one
    /// handed to a waiter) and `id` back to the free list.
    fn give_back(&self, taken: u64, id: Option<SlotId>) {
        let Some(id) = id else {
            self.state.fetch_sub(taken, SeqCst);
            return;
        };
        let mut state = self.state.load(SeqCst);
        loop {
            let next = self.push(state, taken, id);
            match self.state.compare_exchange(state, next, SeqCst, SeqCst) {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
    }

    /// Takes a slot if the pool is open and the level's share has room:
    /// one compare-and-swap against a word without the closed bit, which
    /// also takes the slot's number off the free list.
    #[inline]
    pub(crate) fn try_acquire(&self, level: Criticality) -> Result<SlotId, NoSlot> {
        let mut state = self.state.load(SeqCst);
        loop {
            if state & CLOSED != 0 {
                return Err(NoSlot::Closed);
            }
            // Read after the word: a slot taken by the swap below was free
            // under a limit that held while the word did not change (see
            // `set_limits`).
            if state & COUNT >= self.limit(level) {
                return Err(NoSlot::Full);
            }
            let (next, id) = self.pop(admitted(state));
            match self
                .state
                .compare_exchange_weak(state, next, SeqCst, SeqCst)
            {
                Ok(_) => {
                    self.after_admission(state, next);
                    return Ok(id);
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// [`try_acquire`](Self::try_acquire) for `cost` slots at once (at
    /// most the capacity): all of them under the level's limit, with one
    /// number, by one compare-and-swap; the id carries the cost.
    pub(crate) fn try_acquire_many(&self, level: Criticality, cost: u32) -> Result<SlotId, NoSlot> {
        if cost <= 1 {
            return self.try_acquire(level);
        }
        let mut state = self.state.load(SeqCst);
        loop {
            if state & CLOSED != 0 {
                return Err(NoSlot::Closed);
            }
            if (state & COUNT) + u64::from(cost) > self.limit(level) {
                return Err(NoSlot::Full);
            }
            let (next, id) = self.pop(admitted_many(state, u64::from(cost)));
            match self
                .state
                .compare_exchange_weak(state, next, SeqCst, SeqCst)
            {
                Ok(_) => {
                    self.after_admission(state, next);
                    return Ok(id.with_cost(cost));
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// The pool's flow table, made on first use with `capacity` slots.
    pub(crate) fn flows(&self, capacity: usize) -> &Flows {
        self.flows.get_or_init(|| Box::new(Flows::new(capacity)))
    }

    /// The pool's flow table, if a caller with a flow asked.
    #[inline]
    pub(crate) fn flow_table(&self) -> Option<&Flows> {
        self.flows.get().map(|flows| &**flows)
    }

    /// Joins the line, unless a slot is free after all: under the lock, the
    /// caller either takes a slot or marks the line as not empty, each by a
    /// compare-and-swap against the count it saw (and neither once closed).
    /// A queued caller's `interval` is the queue's interval from now on
    /// (the pool derives it from its typical work). A queued caller
    /// `promised` a longer wait than the queue's own (by a trusted
    /// deadline) is never shed as stale: it leaves at its own limit, or is
    /// served; refusing it when a slot frees would be a late answer.
    #[cfg(test)]
    pub(crate) fn enqueue(
        &self,
        level: Criticality,
        patience: Patience,
        (target, interval): (Duration, Duration),
        promised: bool,
    ) -> Enqueued {
        self.enqueue_asking(level, patience, (target, interval), promised, Ask::ONE)
    }

    /// `enqueue` (in tests) for a waiter that asks for more than one
    /// slot, or has a flow.
    pub(crate) fn enqueue_asking(
        &self,
        level: Criticality,
        patience: Patience,
        (target, interval): (Duration, Duration),
        promised: bool,
        ask: Ask,
    ) -> Enqueued {
        let mut wakes = Wakes::default();
        let enqueued = self.enqueue_locked(
            level,
            patience,
            (target, interval),
            promised,
            ask,
            &mut wakes,
        );
        wakes.wake();
        enqueued
    }

    fn enqueue_locked(
        &self,
        level: Criticality,
        patience: Patience,
        (target, interval): (Duration, Duration),
        promised: bool,
        ask: Ask,
        wakes: &mut Wakes,
    ) -> Enqueued {
        let mut line = self.lock();
        if patience == Patience::Queued {
            line.interval = interval;
            line.target = target;
            self.shed_stale(&mut line, wakes);
        }
        // A flow that presses less than another waiting flow is not the
        // flood either.
        let ask = Ask {
            under: ask.under
                || (patience == Patience::Queued
                    && ask.flow != NO_FLOW
                    && line.presses_less(level.index(), ask.flow, ask.pressure)),
            ..ask
        };
        if patience == Patience::Queued
            && line.total_queued() >= self.bound
            && !self.evicted_below(&mut line, level, wakes)
            && !(ask.under && self.evicted_for_flow(&mut line, level, ask, wakes))
        {
            // The bound counts waiters, not slots: a free slot is still
            // taken at once.
            return match self.try_acquire_many(level, ask.cost) {
                Ok(id) => Enqueued::Acquired(id),
                Err(NoSlot::Closed) => Enqueued::Closed,
                Err(NoSlot::Full) => Enqueued::Full,
            };
        }
        let cost = u64::from(ask.cost.max(1));
        let mut state = self.state.load(SeqCst);
        loop {
            if state & CLOSED != 0 {
                return Enqueued::Closed;
            }
            let free = (state & COUNT) + cost <= self.limit(level);
            let (next, id) = if free {
                self.pop(admitted_many(state, cost))
            } else {
                (state | LINE, SlotId(NO_SLOT))
            };
            match self.state.compare_exchange(state, next, SeqCst, SeqCst) {
                Ok(_) if free => {
                    self.after_admission(state, next);
                    // A caller evicted to make room may have been the last
                    // in line.
                    if line.linked == 0 && next & LINE != 0 {
                        self.state.fetch_and(!LINE, SeqCst);
                    }
                    #[expect(clippy::cast_possible_truncation, reason = "a cost fits 32 bits")]
                    return Enqueued::Acquired(id.with_cost(cost as u32));
                }
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        let ahead = (0..=level.index())
            .map(|l| line.lists[l * 2].len + line.lists[l * 2 + 1].len)
            .sum();
        let now = Instant::now();
        // A flow under its share is not the flood a standing queue sheds.
        let joined = (patience == Patience::Queued && !promised && !ask.under).then_some(now);
        let key = line.push_back(list_of(level.index(), patience), joined, ask);
        self.waiting.fetch_add(1, SeqCst);
        let mut standing = false;
        if patience == Patience::Queued {
            line.joined(level.index(), now);
            standing = line.standing(level.index(), now) && !ask.under;
        }
        Enqueued::Waiting(Ticket {
            key,
            ahead,
            standing,
            favoured: ask.under,
        })
    }

    /// Whether the waiter of `key` has been answered: `Ready(Ok(()))` when
    /// it was handed a slot (now the caller's), `Ready(Err(_))` when it was
    /// let go without one; in both cases its node is freed and the key must
    /// not be used again. `Pending` keeps `cx`'s waker to wake it by.
    pub(crate) fn poll_wait(&self, key: Key, cx: &mut Context<'_>) -> Poll<Result<SlotId, Shed>> {
        let mut line = self.lock();
        let at = key.0;
        let answer = match &mut line.nodes[at as usize].state {
            State::Waiting(waker) => {
                match waker {
                    Some(waker) if waker.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            }
            State::Granted(id) => Ok(*id),
            State::Shed(shed) => Err(*shed),
            State::Free => unreachable!("a waiter polls only its own node"),
        };
        line.free(at);
        let cost = line.nodes[at as usize].cost;
        let given = match answer {
            Ok(given) => given,
            Err(shed) => return Poll::Ready(Err(shed)),
        };
        // The slots in transit are the caller's now: admitted, with the
        // number they came with or a free one.
        let mut state = self.state.load(SeqCst);
        loop {
            let next = if cost == 1 {
                admitted(state).wrapping_sub(TRANSIT_ONE + 1)
            } else {
                admitted_many(state, u64::from(cost))
                    .wrapping_sub(u64::from(cost) * (TRANSIT_ONE + 1))
            };
            let (next, id) = match given {
                Some(id) => (next, id),
                None => self.pop(next),
            };
            match self.state.compare_exchange(state, next, SeqCst, SeqCst) {
                Ok(_) => {
                    self.after_admission(state, next);
                    return Poll::Ready(Ok(id.with_cost(cost)));
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Leaves the line (a waiter that gave up before it saw its answer): a
    /// waiter still in line unlinks its node; one that was handed a slot at
    /// that very moment passes it on to the next waiter it may go to, or
    /// back to the pool, counted as neither admitted nor returned.
    pub(crate) fn cancel(&self, key: Key) {
        let at = key.0;
        let mut wakes = Wakes::default();
        let mut own = None;
        {
            let mut line = self.lock();
            match line.nodes[at as usize].state {
                State::Waiting(_) => {
                    line.unlink(at, Instant::now());
                    own = line.answer(at, State::Free);
                    self.left_line(&line, 1);
                    self.settle(&mut line, &mut wakes);
                }
                State::Granted(id) => {
                    // Its slots go on to the next waiters, or back.
                    let cost = u64::from(line.nodes[at as usize].cost);
                    self.state.fetch_sub(cost * TRANSIT_ONE, SeqCst);
                    self.dispatch(&mut line, cost, id, &mut wakes);
                }
                State::Shed(_) | State::Free => {}
            }
            line.free(at);
        }
        // The waiter's own waker, dropped outside the lock.
        drop(own);
        wakes.wake();
    }

    /// Hands `units` slots (counted in use, in transit to nobody) and the
    /// number `id` to the waiters they may go to, in the order
    /// [`WaitLine::next_served`] gives, and takes free room under the
    /// limits for waiters that fit; what no waiter takes goes back to the
    /// pool. A waiter that is next but does not fit yet gets the slots
    /// that come back set aside for it (all but the last it needs, so it
    /// is served only once the slots it fits beside are free).
    fn dispatch(
        &self,
        line: &mut WaitLine,
        mut units: u64,
        mut id: Option<SlotId>,
        wakes: &mut Wakes,
    ) {
        let flows = self.flow_table();
        // Slots handed to flows' waiters by this dispatch, not yet taken
        // (and so not yet in the flow table): fair order counts them.
        let mut granted = [(NO_FLOW, 0_u32); 8];
        loop {
            let held = |bucket: u16| {
                let pending = granted
                    .iter()
                    .find(|&&(at, _)| at == bucket)
                    .map_or(0, |&(_, n)| n);
                flows.map_or(0, |flows| flows.held_in(bucket)) + pending
            };
            let state = self.state.load(SeqCst);
            if state & CLOSED != 0 || line.linked == 0 {
                break;
            }
            let limits = self.limits();
            if line.parked != NIL {
                let node = &line.nodes[line.parked as usize];
                if node.cost as usize > limits[node.list / 2] {
                    // A lowered limit: it cannot be served now, and holds
                    // nothing meanwhile.
                    let got = u64::from(std::mem::take(&mut line.nodes[line.parked as usize].got));
                    line.parked = NIL;
                    self.state.fetch_sub(got * TRANSIT_ONE, SeqCst);
                    units += got;
                }
            }
            let Some((at, level)) = line.next_served(&limits, &held) else {
                break;
            };
            if line.parked != NIL && line.parked != at {
                // A more critical waiter is next: what was set aside for
                // the other goes on.
                let got = u64::from(std::mem::take(&mut line.nodes[line.parked as usize].got));
                line.parked = NIL;
                self.state.fetch_sub(got * TRANSIT_ONE, SeqCst);
                units += got;
                continue;
            }
            let node = &line.nodes[at as usize];
            let (cost, got) = (u64::from(node.cost), u64::from(node.got));
            let others = (state & COUNT) - units - got;
            let need = cost - got;
            let give = units.min(need);
            if others + cost <= limits[level] as u64 {
                // Served whole: the slots coming back, and free room.
                let room = need - give;
                let next = state + room + (give + room) * TRANSIT_ONE;
                if self
                    .state
                    .compare_exchange(state, next, SeqCst, SeqCst)
                    .is_err()
                {
                    continue;
                }
                units -= give;
                let bucket = line.nodes[at as usize].flow;
                if bucket != NO_FLOW
                    && let Some(entry) = granted
                        .iter_mut()
                        .find(|(at, _)| *at == bucket || *at == NO_FLOW)
                {
                    *entry = (bucket, entry.1 + line.nodes[at as usize].cost);
                }
                line.nodes[at as usize].got = 0;
                if line.parked == at {
                    line.parked = NIL;
                }
                line.unlink(at, Instant::now());
                wakes.push(line.answer(at, State::Granted(id.take())));
                self.left_line(line, 1);
                continue;
            }
            // Not yet: set aside what comes back for it, never all it needs.
            let keep = units.min(cost - 1 - got);
            if keep > 0 {
                self.state.fetch_add(keep * TRANSIT_ONE, SeqCst);
                #[expect(clippy::cast_possible_truncation, reason = "below its cost")]
                {
                    line.nodes[at as usize].got += keep as u32;
                }
                line.parked = at;
                units -= keep;
            }
            break;
        }
        if units > 0 || id.is_some() {
            self.give_back(units, id);
        }
    }

    /// Gives on (or back) the slots set aside for waiters that left the
    /// line unserved.
    fn settle(&self, line: &mut WaitLine, wakes: &mut Wakes) {
        let freed = std::mem::take(&mut line.freed);
        if freed > 0 {
            self.state.fetch_sub(freed * TRANSIT_ONE, SeqCst);
            self.dispatch(line, freed, None, wakes);
        }
    }

    /// The slots in use at or above which `level` is not admitted now.
    #[inline]
    fn limit(&self, level: Criticality) -> u64 {
        self.limits[level.index()].load(SeqCst) as u64
    }

    fn limits(&self) -> [usize; 3] {
        self.limits.each_ref().map(|limit| limit.load(SeqCst))
    }

    /// Changes the limits at run time (an adaptive class). A lower limit
    /// revokes nothing: it takes effect as slots return (a returned slot
    /// goes to a waiter only while the others in use leave room under it),
    /// and no caller is admitted over it from the moment it is stored. A
    /// higher one hands the slots it frees to the waiters in line at once.
    ///
    /// Stored under the line's lock, so a joiner either saw the new limits
    /// or is in line when they are stored; each slot handed over is counted
    /// in use by a compare-and-swap against the count it was checked
    /// against, so a fail-fast admission racing it cannot take the same
    /// room.
    pub(crate) fn set_limits(&self, limits: [usize; 3]) {
        let mut wakes = Wakes::default();
        {
            let mut line = self.lock();
            for (limit, new) in self.limits.iter().zip(limits) {
                limit.store(new, SeqCst);
            }
            // Room under the new limits goes to the waiters that fit, each
            // counted by a compare-and-swap against the count it was
            // checked against.
            self.dispatch(&mut line, 0, None, &mut wakes);
        }
        wakes.wake();
    }

    /// Lets go of stale callers of standing queues (see
    /// [`WaitLine::shed_stale`]) and counts them out of the line.
    fn shed_stale(&self, line: &mut WaitLine, wakes: &mut Wakes) {
        if line.total_queued() == 0 {
            return;
        }
        let shed = line.shed_stale(Instant::now(), wakes);
        if shed > 0 {
            self.left_line(line, shed);
            self.settle(line, wakes);
        }
    }

    /// Lets go of a less critical queued caller to make room for `level`.
    /// Makes room in a full queue for a waiter of `ask`'s flow, not the
    /// flood: the newest queued waiter, at `level` or below, of the flow
    /// that presses hardest goes, if it presses harder than `ask`'s.
    fn evicted_for_flow(
        &self,
        line: &mut WaitLine,
        level: Criticality,
        ask: Ask,
        wakes: &mut Wakes,
    ) -> bool {
        if line.evict_for_flow(level.index(), ask.flow, ask.pressure, wakes) {
            self.waiting.fetch_sub(1, SeqCst);
            self.settle(line, wakes);
            true
        } else {
            false
        }
    }

    fn evicted_below(&self, line: &mut WaitLine, level: Criticality, wakes: &mut Wakes) -> bool {
        if line.evict_below(level.index(), wakes) {
            // Not `left_line`: the joiner is about to take its place, so
            // the line bit stays.
            self.waiting.fetch_sub(1, SeqCst);
            self.settle(line, wakes);
            true
        } else {
            false
        }
    }

    /// Counts `n` waiters out of the line, and clears the line bit once the
    /// line is empty (under the lock, where the bit is set).
    fn left_line(&self, line: &WaitLine, n: usize) {
        self.waiting.fetch_sub(n, SeqCst);
        if line.linked == 0 {
            self.state.fetch_and(!LINE, SeqCst);
        }
    }

    /// Gives slot `id` back: to the next waiter it may go to (the slot
    /// stays counted in use and is now that waiter's, number included), or
    /// to the pool, its number back on the free list by the same swap. A
    /// closed pool hands nothing over.
    #[inline]
    pub(crate) fn release(&self, id: SlotId) {
        let mut state = self.state.load(SeqCst);
        while state & LINE == 0 {
            let next = self.push(state, 1, id);
            match self
                .state
                .compare_exchange_weak(state, next, SeqCst, SeqCst)
            {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        self.release_to_line(id, 1);
    }

    /// [`release`](Self::release) of an admission of `cost` slots (its
    /// bare number `id`): all of them back together, to the waiters they
    /// may go to or to the pool.
    pub(crate) fn release_many(&self, id: SlotId, cost: u32) {
        let cost = u64::from(cost.max(1));
        let mut state = self.state.load(SeqCst);
        while state & LINE == 0 {
            let next = self.push(state, cost, id);
            match self
                .state
                .compare_exchange_weak(state, next, SeqCst, SeqCst)
            {
                Ok(_) => return,
                Err(actual) => state = actual,
            }
        }
        self.release_to_line(id, cost);
    }

    /// [`release`](Self::release) while someone may be in line: decided
    /// under the lock, where the line bit is set and cleared and where
    /// close sets its bit.
    #[cold]
    fn release_to_line(&self, id: SlotId, cost: u64) {
        let mut wakes = Wakes::default();
        {
            let mut line = self.lock();
            self.shed_stale(&mut line, &mut wakes);
            // Returned, and in transit to the waiters served, if any.
            self.dispatch(&mut line, cost, Some(id), &mut wakes);
        }
        wakes.wake();
    }

    /// Closes: from the moment this returns no slot is granted, by any
    /// path, and every waiter in line is answered (refused) and woken.
    pub(crate) fn close(&self) {
        let mut wakes = Wakes::default();
        {
            let mut line = self.lock();
            self.state.fetch_or(CLOSED, SeqCst);
            let now = Instant::now();
            let mut answered = 0;
            for list in 0..line.lists.len() {
                while line.lists[list].head != NIL {
                    let at = line.lists[list].head;
                    line.unlink(at, now);
                    wakes.push(line.answer(at, State::Shed(Shed::Closed)));
                    answered += 1;
                }
            }
            line.since = [None; 3];
            line.emptied = [None; 3];
            // What was set aside for a waiter goes back.
            let freed = std::mem::take(&mut line.freed);
            self.state.fetch_sub(freed * (TRANSIT_ONE + 1), SeqCst);
            self.waiting.fetch_sub(answered, SeqCst);
            self.state.fetch_and(!LINE, SeqCst);
        }
        wakes.wake();
    }
}

#[cfg(test)]
impl Permits {
    /// The numbers on the free list, head first, at most N + 1 of them
    /// (a cycle shows as a list longer than N).
    pub(crate) fn free_slots(&self) -> Vec<u32> {
        let mut free = Vec::new();
        let mut at = free_head(self.state.load(SeqCst));
        while at != NO_SLOT && free.len() <= self.next_free.len() {
            free.push(at);
            at = self
                .next_free
                .get(at as usize)
                .map_or(NO_SLOT, |link| link.load(SeqCst));
        }
        free
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every slot in use has a number no other has, and the free list holds
    /// exactly the others, however slots are taken, returned, handed to a
    /// waiter or made room for by a raised limit.
    #[test]
    fn slot_numbers_in_use_are_distinct_and_the_free_list_holds_the_rest() {
        let permits = Permits::new(3, [2, 2, 2], 4);
        let check = |held: &[SlotId]| {
            let mut all: Vec<u32> = held.iter().map(|id| id.0).collect();
            all.extend(permits.free_slots());
            all.sort_unstable();
            assert_eq!(
                all,
                [0, 1, 2],
                "held {held:?}, free {:?}",
                permits.free_slots()
            );
        };
        let a = permits.try_acquire(Criticality::Default).unwrap();
        let b = permits.try_acquire(Criticality::Default).unwrap();
        check(&[a, b]);
        let Enqueued::Waiting(waiter) = permits.enqueue(
            Criticality::Default,
            Patience::Patient,
            (Duration::ZERO, Duration::ZERO),
            false,
        ) else {
            panic!("the limit is reached");
        };
        // A raised limit makes room: the waiter takes a free number.
        permits.set_limits([3, 3, 3]);
        let mut cx = Context::from_waker(Waker::noop());
        let Poll::Ready(Ok(c)) = permits.poll_wait(waiter.key, &mut cx) else {
            panic!("granted by the raised limit");
        };
        check(&[a, b, c]);
        permits.release(a);
        check(&[b, c]);
        let a = permits.try_acquire(Criticality::Default).unwrap();
        check(&[a, b, c]);
        for id in [a, b, c] {
            permits.release(id);
        }
        check(&[]);
    }

    /// The admissions wrap out of the word into `epochs` with nothing lost:
    /// the books read across the wrap count on by one per admission.
    #[test]
    fn the_books_count_on_across_the_admissions_wrap() {
        let field = 1_u64 << (64 - ADMIT_SHIFT);
        let start = 3 * field - 2;
        let permits = Permits::with_admitted([4, 4, 4], 8, start);
        let mut seen = Vec::new();
        for _ in 0..4 {
            let id = permits.try_acquire(Criticality::Default).unwrap();
            permits.release(id);
            seen.push(permits.slot_counts());
        }
        let admitted: Vec<u64> = seen.iter().map(|b| b.admitted).collect();
        assert_eq!(admitted, [start + 1, start + 2, start + 3, start + 4]);
        assert!(
            seen.iter()
                .all(|b| b.admitted == b.released && b.in_use == 0)
        );
        assert_eq!(permits.state.load(SeqCst) & WRAP, 0, "the wrap was counted");
    }

    /// A slot handed to a waiter is returned (by its releaser) and in use,
    /// not yet admitted; taken, it is admitted; a waiter that gives up as
    /// it is handed one passes it on, counted as neither.
    #[test]
    fn a_handoff_is_counted_once_whether_the_waiter_takes_it_or_not() {
        let permits = Permits::new(1, [1, 1, 1], 2);
        let id = permits.try_acquire(Criticality::Default).unwrap();
        let wait = |permits: &Permits| match permits.enqueue(
            Criticality::Default,
            Patience::Patient,
            (Duration::ZERO, Duration::ZERO),
            false,
        ) {
            Enqueued::Waiting(ticket) => ticket.key,
            other => panic!("the pool is full: {other:?}"),
        };
        let (first, second) = (wait(&permits), wait(&permits));
        let books = |admitted, released, in_use| SlotCounts {
            admitted,
            released,
            in_use,
        };
        permits.release(id);
        assert_eq!(
            permits.slot_counts(),
            books(1, 1, 1),
            "returned, in transit"
        );
        permits.cancel(first);
        assert_eq!(
            permits.slot_counts(),
            books(1, 1, 1),
            "passed on, uncounted"
        );
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(
            permits.poll_wait(second, &mut cx),
            Poll::Ready(Ok(id)),
            "the slot's number went with it"
        );
        assert_eq!(permits.slot_counts(), books(2, 1, 1), "taken: admitted");
        permits.release(id);
        assert_eq!(permits.slot_counts(), books(2, 2, 0));
    }

    /// Once `close` has returned, neither the fail-fast path nor the line
    /// grants a slot, and a waiter in line is answered.
    #[test]
    fn nothing_is_granted_once_closed() {
        let permits = Permits::new(1, [1, 1, 1], 2);
        let id = permits.try_acquire(Criticality::Default).unwrap();
        let Enqueued::Waiting(ticket) = permits.enqueue(
            Criticality::Default,
            Patience::Patient,
            (Duration::ZERO, Duration::ZERO),
            false,
        ) else {
            panic!("the pool is full");
        };
        permits.close();
        permits.release(id);
        assert_eq!(permits.in_use(), 0, "the release went to the pool");
        let mut cx = Context::from_waker(Waker::noop());
        assert_eq!(
            permits.poll_wait(ticket.key, &mut cx),
            Poll::Ready(Err(Shed::Closed))
        );
        assert_eq!(
            permits.try_acquire(Criticality::Critical),
            Err(NoSlot::Closed)
        );
        let times = (Duration::from_secs(1), Duration::from_secs(1));
        for patience in [Patience::Patient, Patience::Queued] {
            assert_eq!(
                permits.enqueue(Criticality::Critical, patience, times, false),
                Enqueued::Closed
            );
        }
        assert_eq!((permits.in_use(), permits.waiting()), (0, 0));
    }
}
