//! Per-pool counters and their cheap snapshot.
//!
//! This module owns the atomics a pool updates on its hot paths, the
//! [`PoolStats`] snapshot read from them, and the per-job word that tells a
//! running orphan from running work. It must never take a lock: every
//! update is a relaxed atomic operation (two for a caller leaving or work
//! ending: the job's word, then the gauge), made through a method named for
//! the event it counts.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::time::Duration;

use crate::caller::Criticality;
use crate::refusal::Code;

/// Upper bounds, in seconds, of the histogram buckets (the work's
/// duration and the wait for a slot).
pub const DURATION_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A snapshot of one pool's state and counters.
///
/// `admitted == released + in_use` holds for every snapshot taken while the
/// pool is quiet; orphans count as in use until their work ends, and so
/// does a slot handed to a waiter that has not yet woken to take it (it is
/// admitted when taken, and counted as neither if the waiter gives up).
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
///
/// let pool = Pool::new("registry", 2).unwrap();
/// let slot = pool.try_admit().unwrap();
/// let stats = pool.stats();
/// assert_eq!((stats.capacity, stats.in_use, stats.admitted), (2, 1, 1));
/// drop(slot);
/// assert_eq!(pool.stats().released, 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PoolStats {
    /// The pool's name.
    pub name: String,
    /// The number of slots.
    pub capacity: usize,
    /// The slots callers may take now: `capacity` for a fixed pool, the
    /// current limit of an adaptive request class (see
    /// [`AdaptiveLimit`](crate::AdaptiveLimit)). Slots taken under a higher
    /// limit may keep `in_use` above it until they return.
    pub limit: usize,
    /// Slots held right now (by callers, running work or orphans).
    pub in_use: usize,
    /// Callers waiting for a slot right now (`Wait`, `WaitFor`, `Queue`).
    pub waiting: usize,
    /// Slots ever handed out to a caller.
    pub admitted: u64,
    /// Slots returned.
    pub released: u64,
    /// Admissions refused (fail-fast, timed out or closed); reentrant
    /// waits are not among them.
    pub refused: u64,
    /// Refusals by the refused caller's criticality, in the order of
    /// [`Criticality::ALL`](crate::Criticality::ALL) (critical, default,
    /// sheddable).
    pub refused_by_criticality: [u64; 3],
    /// Refusals by code (in the order of [`Code::ALL`]) and, within each,
    /// by criticality as in
    /// [`refused_by_criticality`](Self::refused_by_criticality); see
    /// [`refused_with`](Self::refused_with). The `ADMISSION_REENTRANT` row
    /// stays zero: reentrant waits are counted in
    /// [`reentrant`](Self::reentrant).
    pub refused_by_code: [[u64; 3]; Code::ALL.len()],
    /// Callers that waited in line and were then admitted: how long each
    /// waited. Fail-fast callers, and callers a free slot admitted at once,
    /// never waited and are not in it.
    pub waited_admitted: Durations,
    /// Callers that waited in line and were then refused (timed out,
    /// displaced, shed by a standing queue, closed): how long each waited.
    pub waited_refused: Durations,
    /// Queued callers displaced from a full queue by a more critical
    /// caller (refused with the pool's saturated code).
    pub evicted: u64,
    /// Queued callers let go by a standing queue once they had waited its
    /// target (refused with `ADMISSION_WAIT_TIMEOUT`).
    pub shed_standing: u64,
    /// Waits refused with `ADMISSION_REENTRANT`: a task waited for a slot
    /// while it held every slot itself. A programming error, not overload,
    /// so it is not counted in `refused`.
    pub reentrant: u64,
    /// Work currently running on a worker thread.
    pub running: usize,
    /// The most work ever seen running at once.
    pub peak_running: usize,
    /// Work that ran to an end (success, error or panic).
    pub finished: u64,
    /// Work whose awaiting future was dropped before it ended, counted
    /// when the work ends.
    pub orphaned: u64,
    /// Orphans still running right now: work whose every caller has gone
    /// (its future dropped) while it runs on, holding its slot. Work
    /// orphaned while still queued for a thread counts from that moment.
    /// When it ends it leaves this gauge and is counted in
    /// [`orphaned`](Self::orphaned).
    pub orphans_running: usize,
    /// Orphaned work that returned an error or panicked.
    pub orphan_failures: u64,
    /// The time orphaned work ran in all: slot time spent on answers no
    /// caller was waiting for once they came.
    pub orphaned_time: Duration,
    /// Work that panicked (orphaned or not).
    pub panicked: u64,
    /// Callers served by joining a coalesced walk instead of starting one.
    pub coalesced: u64,
    /// The typical duration of recent work: the median of the last 16
    /// pieces that finished; before any did, the expected work time given
    /// to [`PoolBuilder::expected_work`](crate::pool::PoolBuilder::expected_work)
    /// (zero when none was). The retry hint starts from it; see
    /// [`RetryHint::Observed`](crate::pool::RetryHint::Observed).
    pub recent_work: Duration,
    /// Cumulative counts of work durations per [`DURATION_BUCKETS`] bound,
    /// followed by the total count.
    pub duration_buckets: Vec<u64>,
    /// Sum of all work durations.
    pub duration_sum: Duration,
    /// Whether the pool runs in shadow mode now ([`Pool::set_shadow`](crate::Pool::set_shadow)):
    /// every decision is made and counted, nothing is refused or waits.
    pub shadow: bool,
    /// Slots held right now past the capacity: admissions that shadow mode
    /// let through where enforcing would have refused them or made them
    /// wait (they are in [`in_use`](Self::in_use), which may then exceed
    /// the capacity).
    pub overdraft: usize,
    /// Admissions shadow mode let through that enforcing would have
    /// refused, by code (in the order of [`Code::ALL`]) and criticality as
    /// in [`refused_by_criticality`](Self::refused_by_criticality); see
    /// [`would_refuse_with`](Self::would_refuse_with). They are not in
    /// [`refused`](Self::refused).
    pub would_refuse_by_code: [[u64; 3]; Code::ALL.len()],
    /// Flows active in the pool right now
    /// ([`Caller::with_flow`](crate::Caller::with_flow)): holding slots,
    /// waiting, or refused within their asking window. One number for the
    /// pool, never one per flow key; at most the flow table's 256 buckets.
    pub active_flows: usize,
    /// The sum of the active flows' weights
    /// ([`Caller::with_weight`](crate::Caller::with_weight)): a flow of
    /// weight `w` is held to `limit × w / flow_weights` slots while the
    /// pool is contended (see [`flow_share`](Self::flow_share)). 0 while
    /// no flow is active.
    pub flow_weights: u64,
    /// Admissions shadow mode let through at once that enforcing would have
    /// made wait for a slot (`Wait`, `WaitFor`, `Queue` with no slot free).
    pub would_wait: u64,
    /// The waits those [`would_wait`](Self::would_wait) admissions would
    /// have had, summed: each estimated when it was let through as the time
    /// until a slot frees (the estimate a refusal's retry hint gives, from
    /// the work running and the pool's typical work). A trace has each one
    /// (`waited_ms` of a `shadow` line).
    pub would_wait_time: Duration,
}

impl PoolStats {
    /// Admissions shadow mode let through that enforcing would have refused
    /// with `code`, whatever the caller's criticality.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Code, Pool};
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// pool.set_shadow(true);
    /// let _first = pool.try_admit().unwrap();
    /// let _second = pool.try_admit().expect("shadow mode refuses nothing");
    /// let stats = pool.stats();
    /// assert_eq!(stats.would_refuse_with(Code::Saturated), 1);
    /// assert_eq!((stats.in_use, stats.overdraft, stats.refused), (2, 1, 0));
    /// ```
    pub fn would_refuse_with(&self, code: Code) -> u64 {
        self.would_refuse_by_code[code_index(code)].iter().sum()
    }

    /// Refusals with `code`, whatever the caller's criticality.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Code, Pool};
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// assert!(pool.try_admit().is_err());
    /// let stats = pool.stats();
    /// assert_eq!(stats.refused_with(Code::Saturated), 1);
    /// assert_eq!(stats.refused_with(Code::WaitTimedOut), 0);
    /// ```
    pub fn refused_with(&self, code: Code) -> u64 {
        self.refused_by_code[code_index(code)].iter().sum()
    }

    /// The share of the pool, in slots, a flow of weight 1 is held to now
    /// while the pool is contended: the limit over the active flows'
    /// weights (a flow of weight `w` gets `w` times this); the whole limit
    /// while no flow is active.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Class, RequestPools};
    ///
    /// let requests = RequestPools::new(4, 1).unwrap();
    /// let _a = requests.try_lease_for(Class::Work, Caller::default().with_flow("a")).unwrap();
    /// let _b = requests
    ///     .try_lease_for(Class::Work, Caller::default().with_flow("b").with_weight(3))
    ///     .unwrap();
    /// let stats = requests.pool(Class::Work).stats();
    /// assert_eq!((stats.active_flows, stats.flow_weights), (2, 4));
    /// assert_eq!(stats.flow_share(), 1.0, "a: 4 × 1/4, b: 4 × 3/4");
    /// ```
    pub fn flow_share(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a few thousand slots at most")]
        let limit = self.limit as f64;
        if self.flow_weights == 0 {
            limit
        } else {
            #[expect(clippy::cast_precision_loss, reason = "at most 256 × 255")]
            let weights = self.flow_weights as f64;
            limit / weights
        }
    }
}

/// A histogram's snapshot over [`DURATION_BUCKETS`].
///
/// # Examples
///
/// ```
/// use admission_core::{Admission, Pool};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::Wait).await.unwrap();
/// // A free slot admitted it at once: it never waited in line.
/// assert_eq!(pool.stats().waited_admitted.count(), 0);
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct Durations {
    /// Cumulative counts per [`DURATION_BUCKETS`] bound, followed by the
    /// total count.
    pub buckets: Vec<u64>,
    /// The sum of all durations.
    pub sum: Duration,
}

impl Durations {
    /// How many durations were recorded.
    pub fn count(&self) -> u64 {
        self.buckets.last().copied().unwrap_or(0)
    }
}

/// The atomics behind one [`Durations`].
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; DURATION_BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Histogram {
    fn record(&self, took: Duration) {
        let secs = took.as_secs_f64();
        if let Some(i) = DURATION_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(micros(took), Relaxed);
    }

    fn snapshot(&self) -> Durations {
        let mut cumulative = 0;
        let mut buckets: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| {
                cumulative += b.load(Relaxed);
                cumulative
            })
            .collect();
        buckets.push(self.count.load(Relaxed));
        Durations {
            buckets,
            sum: Duration::from_micros(self.sum_micros.load(Relaxed)),
        }
    }
}

/// The refusal counts by code and criticality, sharded: one block of
/// cache lines per shard, so that threads on different cores do not bounce
/// one line between them and a refusal is still one atomic add; a snapshot
/// sums the shards.
#[derive(Debug, Default)]
struct Refusals([RefusalCells; SHARDS]);

const SHARDS: usize = 8;
const LEVELS: usize = Criticality::ALL.len();

#[derive(Debug, Default)]
#[repr(align(64))]
struct RefusalCells([AtomicU64; Code::ALL.len() * LEVELS]);

impl Refusals {
    #[inline]
    fn add(&self, code: Code, criticality: Criticality) {
        self.0[shard()].0[code_index(code) * LEVELS + criticality.index()].fetch_add(1, Relaxed);
    }

    fn sum(&self) -> [[u64; LEVELS]; Code::ALL.len()] {
        let mut out = [[0; LEVELS]; Code::ALL.len()];
        for cells in &self.0 {
            for (i, cell) in cells.0.iter().enumerate() {
                out[i / LEVELS][i % LEVELS] += cell.load(Relaxed);
            }
        }
        out
    }
}

/// `code`'s place in [`Code::ALL`].
#[inline]
const fn code_index(code: Code) -> usize {
    match code {
        Code::Saturated => 0,
        Code::LeaseUnavailable => 1,
        Code::ReservationExhausted => 2,
        Code::WaitTimedOut => 3,
        Code::ShuttingDown => 4,
        Code::Reentrant => 5,
        Code::BudgetTooShort => 6,
        Code::FlowShare => 7,
    }
}

/// This thread's shard, assigned round-robin on first use.
#[inline]
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// The pool's books, kept by its gate in the word that counts its slots:
/// slots admitted (taken by a caller), returned, and in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotCounts {
    pub(crate) admitted: u64,
    pub(crate) released: u64,
    pub(crate) in_use: usize,
}

/// The atomics behind [`PoolStats`] but for the books; the pool updates
/// them only through these methods.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Refusals per code and criticality; the totals are their sums.
    refused: Refusals,
    waited_admitted: Histogram,
    waited_refused: Histogram,
    evicted: AtomicU64,
    shed_standing: AtomicU64,
    orphaned_micros: AtomicU64,
    reentrant: AtomicU64,
    running: AtomicUsize,
    peak_running: AtomicUsize,
    finished: AtomicU64,
    orphaned: AtomicU64,
    /// Signed: an orphan's end may be counted a moment before its start
    /// (see [`Listeners`]); a snapshot reads below zero as zero.
    orphans_running: AtomicI64,
    orphan_failures: AtomicU64,
    panicked: AtomicU64,
    coalesced: AtomicU64,
    durations: Histogram,
    /// Shadow mode's admissions that enforcing would have refused.
    would_refuse: Refusals,
    would_wait: AtomicU64,
    would_wait_micros: AtomicU64,
    /// Slots held past the capacity (shadow mode), and the books of them.
    overdraft: AtomicUsize,
    overdraft_admitted: AtomicU64,
    overdraft_released: AtomicU64,
}

impl Counters {
    /// An admission was refused with `code`.
    #[inline]
    pub(crate) fn count_refusal(&self, code: Code, criticality: Criticality) {
        self.refused.add(code, criticality);
    }

    /// Shadow mode let through an admission that enforcing would have
    /// refused with `code`.
    #[cold]
    pub(crate) fn count_would_refuse(&self, code: Code, criticality: Criticality) {
        self.would_refuse.add(code, criticality);
    }

    /// Shadow mode let through at once an admission that enforcing would
    /// have made wait about `wait`.
    #[cold]
    pub(crate) fn count_would_wait(&self, wait: Duration) {
        self.would_wait.fetch_add(1, Relaxed);
        let micros = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.would_wait_micros.fetch_add(micros, Relaxed);
    }

    /// A slot past the capacity was handed out (shadow mode).
    #[cold]
    pub(crate) fn take_overdraft(&self, slots: usize) {
        self.overdraft.fetch_add(slots, Relaxed);
        self.overdraft_admitted.fetch_add(slots as u64, Relaxed);
    }

    /// A slot past the capacity came back.
    #[cold]
    pub(crate) fn return_overdraft(&self, slots: usize) {
        self.overdraft.fetch_sub(slots, Relaxed);
        self.overdraft_released.fetch_add(slots as u64, Relaxed);
    }

    /// A caller that waited in line `waited` was then admitted or refused.
    pub(crate) fn count_wait(&self, admitted: bool, waited: Duration) {
        if admitted {
            self.waited_admitted.record(waited);
        } else {
            self.waited_refused.record(waited);
        }
    }

    /// A queued caller was displaced by a more critical one.
    pub(crate) fn count_eviction(&self) {
        self.evicted.fetch_add(1, Relaxed);
    }

    /// A standing queue let a queued caller go.
    pub(crate) fn count_standing_shed(&self) {
        self.shed_standing.fetch_add(1, Relaxed);
    }

    /// A wait was refused as reentrant (not a refusal for overload).
    pub(crate) fn count_reentrant(&self) {
        self.reentrant.fetch_add(1, Relaxed);
    }

    /// Work panicked.
    pub(crate) fn count_panic(&self) {
        self.panicked.fetch_add(1, Relaxed);
    }

    /// A caller was served by a coalesced walk.
    pub(crate) fn count_coalesced(&self) {
        self.coalesced.fetch_add(1, Relaxed);
    }

    /// Work outlived its caller; `failed` when it ended in an error or a
    /// panic.
    pub(crate) fn count_orphan(&self, failed: bool, ran: Duration) {
        self.orphaned.fetch_add(1, Relaxed);
        self.orphaned_micros.fetch_add(micros(ran), Relaxed);
        if failed {
            self.orphan_failures.fetch_add(1, Relaxed);
        }
    }

    /// Marks work as started.
    pub(crate) fn start(&self) {
        let now = self.running.fetch_add(1, Relaxed) + 1;
        self.peak_running.fetch_max(now, Relaxed);
    }

    /// Marks work as ended after `took`.
    pub(crate) fn finish(&self, took: Duration) {
        self.running.fetch_sub(1, Relaxed);
        self.finished.fetch_add(1, Relaxed);
        self.durations.record(took);
    }

    /// The snapshot, with the typical work duration the retry hint keeps.
    pub(crate) fn snapshot(
        &self,
        name: &str,
        (capacity, limit): (usize, usize),
        books: SlotCounts,
        (waiting, active_flows, flow_weights): (usize, usize, u64),
        recent_work: Duration,
        shadow: bool,
    ) -> PoolStats {
        let refused_by_code = self.refused.sum();
        let mut refused_by_criticality = [0; LEVELS];
        for row in &refused_by_code {
            for (total, n) in refused_by_criticality.iter_mut().zip(row) {
                *total += n;
            }
        }
        let durations = self.durations.snapshot();
        // Released first: a slot past the capacity that returns between
        // the two loads is then never seen released and not admitted.
        let overdraft_released = self.overdraft_released.load(Relaxed);
        let overdraft = self.overdraft.load(Relaxed);
        let overdraft_admitted = self.overdraft_admitted.load(Relaxed);
        PoolStats {
            name: name.to_owned(),
            capacity,
            limit,
            in_use: books.in_use + overdraft,
            waiting,
            admitted: books.admitted + overdraft_admitted,
            released: books.released + overdraft_released,
            refused: refused_by_criticality.iter().sum(),
            refused_by_criticality,
            refused_by_code,
            waited_admitted: self.waited_admitted.snapshot(),
            waited_refused: self.waited_refused.snapshot(),
            evicted: self.evicted.load(Relaxed),
            shed_standing: self.shed_standing.load(Relaxed),
            reentrant: self.reentrant.load(Relaxed),
            running: self.running.load(Relaxed),
            peak_running: self.peak_running.load(Relaxed),
            finished: self.finished.load(Relaxed),
            orphaned: self.orphaned.load(Relaxed),
            orphans_running: usize::try_from(self.orphans_running.load(Relaxed)).unwrap_or(0),
            orphan_failures: self.orphan_failures.load(Relaxed),
            orphaned_time: Duration::from_micros(self.orphaned_micros.load(Relaxed)),
            panicked: self.panicked.load(Relaxed),
            coalesced: self.coalesced.load(Relaxed),
            recent_work,
            duration_buckets: durations.buckets,
            duration_sum: durations.sum,
            shadow,
            overdraft,
            would_refuse_by_code: self.would_refuse.sum(),
            active_flows,
            flow_weights,
            would_wait: self.would_wait.load(Relaxed),
            would_wait_time: Duration::from_micros(self.would_wait_micros.load(Relaxed)),
        }
    }
}

/// Who still waits for one piece of work's result, so that the counters
/// can tell a running orphan from running work.
///
/// One word: bit 0 says the work has ended (or will never run), the rest
/// counts the callers still listening (one for offloaded work, any number
/// for a coalesced walk), starting at one. The last caller to leave before
/// the work ends makes it a running orphan; the end of the work, or a
/// caller joining again (a coalesced walk), unmakes it. Each decision is
/// one read-modify-write of the word, so exactly one of the two sides
/// counts each transition; the gauge itself is a relaxed add, and may
/// briefly see the end before the start (the snapshot clamps it at zero).
#[derive(Debug)]
pub(crate) struct Listeners(AtomicUsize);

const ENDED: usize = 1;
const ONE: usize = 2;

impl Listeners {
    /// One caller listening, work not yet ended.
    pub(crate) fn new() -> Self {
        Listeners(AtomicUsize::new(ONE))
    }

    /// Another caller listens (joins a coalesced walk).
    pub(crate) fn listen(&self, counters: &Counters) {
        let before = self.0.fetch_add(ONE, Relaxed);
        if before == 0 {
            // It was a running orphan; it has a caller again.
            counters.orphans_running.fetch_sub(1, Relaxed);
        }
    }

    /// A caller stopped listening before it took the result.
    pub(crate) fn leave(&self, counters: &Counters) {
        let before = self.0.fetch_sub(ONE, Relaxed);
        if before == ONE {
            // The last caller left while the work runs on.
            counters.orphans_running.fetch_add(1, Relaxed);
        }
    }

    /// The work ended, or was dropped unrun; called once.
    pub(crate) fn end(&self, counters: &Counters) {
        let before = self.0.fetch_or(ENDED, Relaxed);
        if before == 0 {
            // A running orphan no more.
            counters.orphans_running.fetch_sub(1, Relaxed);
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running_orphans(counters: &Counters) -> i64 {
        counters.orphans_running.load(Relaxed)
    }

    #[test]
    fn the_last_caller_leaving_running_work_makes_it_a_running_orphan_until_it_ends() {
        let counters = Counters::default();
        let walk = Listeners::new();
        walk.listen(&counters);
        walk.leave(&counters);
        assert_eq!(running_orphans(&counters), 0, "one caller still listens");
        walk.leave(&counters);
        assert_eq!(running_orphans(&counters), 1, "every caller has gone");
        walk.listen(&counters);
        assert_eq!(running_orphans(&counters), 0, "a caller joined again");
        walk.leave(&counters);
        assert_eq!(running_orphans(&counters), 1);
        walk.end(&counters);
        assert_eq!(running_orphans(&counters), 0, "ended: no longer running");
    }

    #[test]
    fn a_caller_leaving_after_the_work_ended_counts_no_running_orphan() {
        let counters = Counters::default();
        let work = Listeners::new();
        work.end(&counters);
        work.leave(&counters);
        assert_eq!(running_orphans(&counters), 0);
        let taken = Listeners::new();
        taken.end(&counters);
        assert_eq!(running_orphans(&counters), 0, "its caller took the result");
    }

    #[test]
    fn a_snapshot_reads_a_gauge_briefly_below_zero_as_zero() {
        let counters = Counters::default();
        counters.orphans_running.store(-1, Relaxed);
        assert_eq!(
            counters
                .snapshot(
                    "p",
                    (1, 1),
                    SlotCounts {
                        admitted: 0,
                        released: 0,
                        in_use: 0,
                    },
                    (0, 0, 0),
                    Duration::ZERO,
                    false,
                )
                .orphans_running,
            0
        );
    }
}
