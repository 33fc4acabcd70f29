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
//! The line is a slab of nodes threaded into six index-linked lists (three
//! levels, patient and queued): a waiter's state (waiting with its waker,
//! granted, shed or closed) lives in its node, which the waiter alone frees,
//! so joining the line allocates nothing once the slab has grown to the
//! most waiters seen at once, and a cancelled waiter unlinks its own node
//! without a scan.

use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::time::Instant;

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
    pub(crate) const OVERDRAFT: SlotId = SlotId(u32::MAX);

    /// The mark of a slot a flow holds: its flow table keeps the slot's
    /// count, and only a marked slot's return looks there. No pool has
    /// this many slots; [`SlotId::OVERDRAFT`] has the mark too.
    const FLOW: u32 = 1 << 31;

    /// The slot's index in a table of N entries (marked or not).
    #[inline]
    pub(crate) const fn index(self) -> usize {
        (self.0 & !Self::FLOW) as usize
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

    /// Whether it is marked: a flow's or a traced pool's slot, or
    /// [`SlotId::OVERDRAFT`].
    #[inline]
    pub(crate) const fn is_marked(self) -> bool {
        self.0 >= Self::FLOW
    }

    /// The same slot unmarked, as the permits know it.
    #[inline]
    pub(crate) const fn unmarked(self) -> SlotId {
        if self.is_overdraft() {
            self
        } else {
            SlotId(self.0 & !Self::FLOW)
        }
    }

    /// Slot number `n`, for the tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn for_test(n: usize) -> SlotId {
        SlotId(u32::try_from(n).expect("a slot number"))
    }

    /// Whether it is [`SlotId::OVERDRAFT`].
    #[inline]
    pub(crate) const fn is_overdraft(self) -> bool {
        self.0 == u32::MAX
    }
}

/// What [`Permits::enqueue`] did.
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
}

/// A waiter's node in the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(u32);

/// Why a waiter was let go without a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shed {
    /// A more critical caller took its place in a full queue.
    Displaced,
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
}

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
    fn push_back(&mut self, list: usize, joined: Option<Instant>) -> Key {
        let tail = self.lists[list].tail;
        let node = Node {
            state: State::Waiting(None),
            prev: tail,
            next: NIL,
            list,
            joined,
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

    /// Takes the next waiter a slot may go to while `others` slots are in
    /// use: the most critical level whose share leaves room, its patient
    /// waiters first, then its queue (newest first when that queue stands).
    fn pop(&mut self, others: usize, limits: &[usize; 3]) -> Option<u32> {
        for (level, &limit) in limits.iter().enumerate() {
            if others >= limit {
                continue;
            }
            let patient = self.lists[list_of(level, Patience::Patient)].head;
            let now = Instant::now();
            if patient != NIL {
                self.unlink(patient, now);
                return Some(patient);
            }
            let queue = self.lists[list_of(level, Patience::Queued)];
            if queue.len == 0 {
                continue;
            }
            let at = if self.standing(level, now) {
                queue.tail
            } else {
                queue.head
            };
            self.unlink(at, now);
            return Some(at);
        }
        None
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

    /// Joins the line, unless a slot is free after all: under the lock, the
    /// caller either takes a slot or marks the line as not empty, each by a
    /// compare-and-swap against the count it saw (and neither once closed).
    /// A queued caller's `interval` is the queue's interval from now on
    /// (the pool derives it from its typical work). A queued caller
    /// `promised` a longer wait than the queue's own (by a trusted
    /// deadline) is never shed as stale: it leaves at its own limit, or is
    /// served; refusing it when a slot frees would be a late answer.
    pub(crate) fn enqueue(
        &self,
        level: Criticality,
        patience: Patience,
        (target, interval): (Duration, Duration),
        promised: bool,
    ) -> Enqueued {
        let mut wakes = Wakes::default();
        let enqueued =
            self.enqueue_locked(level, patience, (target, interval), promised, &mut wakes);
        wakes.wake();
        enqueued
    }

    fn enqueue_locked(
        &self,
        level: Criticality,
        patience: Patience,
        (target, interval): (Duration, Duration),
        promised: bool,
        wakes: &mut Wakes,
    ) -> Enqueued {
        let mut line = self.lock();
        if patience == Patience::Queued {
            line.interval = interval;
            line.target = target;
            self.shed_stale(&mut line, wakes);
        }
        if patience == Patience::Queued
            && line.total_queued() >= self.bound
            && !self.evicted_below(&mut line, level, wakes)
        {
            // The bound counts waiters, not slots: a free slot is still
            // taken at once.
            return match self.try_acquire(level) {
                Ok(id) => Enqueued::Acquired(id),
                Err(NoSlot::Closed) => Enqueued::Closed,
                Err(NoSlot::Full) => Enqueued::Full,
            };
        }
        let mut state = self.state.load(SeqCst);
        loop {
            if state & CLOSED != 0 {
                return Enqueued::Closed;
            }
            let free = state & COUNT < self.limit(level);
            let (next, id) = if free {
                self.pop(admitted(state))
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
                    return Enqueued::Acquired(id);
                }
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        let ahead = (0..=level.index())
            .map(|l| line.lists[l * 2].len + line.lists[l * 2 + 1].len)
            .sum();
        let now = Instant::now();
        let joined = (patience == Patience::Queued && !promised).then_some(now);
        let key = line.push_back(list_of(level.index(), patience), joined);
        self.waiting.fetch_add(1, SeqCst);
        let mut standing = false;
        if patience == Patience::Queued {
            line.joined(level.index(), now);
            standing = line.standing(level.index(), now);
        }
        Enqueued::Waiting(Ticket {
            key,
            ahead,
            standing,
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
        let given = match answer {
            Ok(given) => given,
            Err(shed) => return Poll::Ready(Err(shed)),
        };
        // The slot in transit is the caller's now: admitted, with the
        // number it came with or a free one.
        let mut state = self.state.load(SeqCst);
        loop {
            let next = admitted(state).wrapping_sub(TRANSIT_ONE + 1);
            let (next, id) = match given {
                Some(id) => (next, id),
                None => self.pop(next),
            };
            match self.state.compare_exchange(state, next, SeqCst, SeqCst) {
                Ok(_) => {
                    self.after_admission(state, next);
                    return Poll::Ready(Ok(id));
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
                }
                State::Granted(id) => {
                    if let Some(next) = self.next_waiter(&mut line) {
                        // Still in transit, to the next waiter.
                        wakes.push(line.answer(next, State::Granted(id)));
                        self.left_line(&line, 1);
                    } else {
                        self.give_back(TRANSIT_ONE + 1, id);
                    }
                }
                State::Shed(_) | State::Free => {}
            }
            line.free(at);
        }
        // The waiter's own waker, dropped outside the lock.
        drop(own);
        wakes.wake();
    }

    /// The waiter a slot coming back goes to (while the pool is open): the
    /// first one whose share has room beside the slots the others hold.
    fn next_waiter(&self, line: &mut WaitLine) -> Option<u32> {
        let state = self.state.load(SeqCst);
        if state & CLOSED != 0 {
            return None;
        }
        let others = (state & COUNT).saturating_sub(1) as usize;
        line.pop(others, &self.limits())
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
            let mut state = self.state.load(SeqCst);
            while state & (LINE | CLOSED) == LINE && ((state & COUNT) as usize) < limits[0] {
                // Room under the most generous limit, reserved before the
                // waiter is chosen; given back if no waiter's share fits.
                let next = state + TRANSIT_ONE + 1;
                if let Err(actual) = self.state.compare_exchange(state, next, SeqCst, SeqCst) {
                    state = actual;
                    continue;
                }
                let Some(at) = line.pop((state & COUNT) as usize, &limits) else {
                    self.state.fetch_sub(TRANSIT_ONE + 1, SeqCst);
                    break;
                };
                wakes.push(line.answer(at, State::Granted(None)));
                self.left_line(&line, 1);
                state = self.state.load(SeqCst);
            }
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
        }
    }

    /// Lets go of a less critical queued caller to make room for `level`.
    fn evicted_below(&self, line: &mut WaitLine, level: Criticality, wakes: &mut Wakes) -> bool {
        if line.evict_below(level.index(), wakes) {
            // Not `left_line`: the joiner is about to take its place, so
            // the line bit stays.
            self.waiting.fetch_sub(1, SeqCst);
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
        self.release_to_line(id);
    }

    /// [`release`](Self::release) while someone may be in line: decided
    /// under the lock, where the line bit is set and cleared and where
    /// close sets its bit.
    #[cold]
    fn release_to_line(&self, id: SlotId) {
        let mut wakes = Wakes::default();
        {
            let mut line = self.lock();
            self.shed_stale(&mut line, &mut wakes);
            if let Some(at) = self.next_waiter(&mut line) {
                // Returned, and in transit to the waiter.
                self.state.fetch_add(TRANSIT_ONE, SeqCst);
                wakes.push(line.answer(at, State::Granted(Some(id))));
                self.left_line(&line, 1);
            } else {
                self.give_back(1, Some(id));
            }
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
