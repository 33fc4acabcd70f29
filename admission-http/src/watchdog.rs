//! The watchdog that takes a stalled response's lease back.
//!
//! This module owns [`Watched`] (a leased response body's side of the
//! watch) and the [`Watchdog`] every watched body of a thread registers
//! with: one table of the bodies under watch and one task that sleeps until
//! the earliest of their deadlines, then takes the lease of each body whose
//! consumer let a frame lie unread for its bound. A response that starts
//! being watched costs an entry in a table, not a task: a gRPC call (a
//! message, then trailers) and a streamed response are watched from their
//! first frame.
//!
//! The task runs on the runtime of the first body its thread watched, and
//! is started again on the next one's when that runtime ends. A thread
//! that drives two live current-thread runtimes by turns (rare: each
//! `block_on` in its turn) has its bodies watched while the first of them
//! is driven.
//!
//! It must never hold a body (only its lease: the body stays
//! with its connection), never count the producer's own slowness (a poll
//! answered `Pending`) as a stall, and never drop a lease while it holds
//! the table's lock (a lease's release runs the pool's code).

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::Poll;
use std::time::Duration;

use admission_core::Lease;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::progress::{ProgressTimeout, Side, stalled};

/// A lease under watch: the body's side. Dropping it gives the lease back
/// at once and takes the body out of the watchdog's table.
#[derive(Debug)]
pub(crate) struct Watched {
    state: Arc<State>,
    watchdog: Arc<Watchdog>,
    /// The body's entry in the watchdog's table.
    entry: usize,
}

/// What the body and the watchdog share.
#[derive(Debug)]
struct State {
    lease: Mutex<Option<Lease>>,
    since: Instant,
    bound: Duration,
    /// Milliseconds from `since` to the last frame handed over.
    yielded: AtomicU64,
    /// Whether the consumer is waiting on the producer (the last poll was
    /// `Pending`): not a stall.
    waiting: AtomicBool,
    /// Whether the watchdog took the lease.
    stalled: AtomicBool,
}

impl State {
    fn yielded_at(&self) -> Instant {
        self.since + Duration::from_millis(self.yielded.load(Ordering::Acquire))
    }

    fn take(&self) -> Option<Lease> {
        self.lease
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

impl Watched {
    /// Starts watching `lease` after a frame was handed over now, or gives
    /// the lease back when the thread's watchdog is not running and there
    /// is no tokio runtime to start it on, or the thread is exiting (the
    /// body then holds it as before, to its end).
    pub(crate) fn start(lease: Lease, bound: ProgressTimeout) -> Result<Watched, Lease> {
        let Some(watchdog) = Watchdog::of_this_thread() else {
            return Err(lease);
        };
        let state = Arc::new(State {
            lease: Mutex::new(Some(lease)),
            since: Instant::now(),
            bound: bound.get(),
            yielded: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            stalled: AtomicBool::new(false),
        });
        match watchdog.watch(&state) {
            Some(entry) => Ok(Watched {
                state,
                watchdog,
                entry,
            }),
            None => match state.take() {
                Some(lease) => Err(lease),
                None => unreachable!("nothing else has seen the state"),
            },
        }
    }

    /// The consumer asked for a frame: whether the watchdog already took
    /// the lease (the response must end).
    pub(crate) fn polled(&self) -> bool {
        self.state.waiting.store(true, Ordering::Release);
        self.state.stalled.load(Ordering::Acquire)
    }

    /// A frame was handed over: the clock starts again.
    pub(crate) fn yielded(&self) {
        let ms = u64::try_from(self.state.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.state.yielded.store(ms, Ordering::Release);
        self.state.waiting.store(false, Ordering::Release);
    }

    /// Whether the lease is still held.
    pub(crate) fn holds_lease(&self) -> bool {
        !self.state.stalled.load(Ordering::Acquire)
    }
}

impl Drop for Watched {
    /// The body ended or was dropped: the lease goes now, not when the
    /// watchdog next wakes, and the body leaves the table.
    fn drop(&mut self) {
        drop(self.state.take());
        self.watchdog.forget(self.entry);
    }
}

/// The bodies a thread's responses put under watch, and the task that
/// watches them.
#[derive(Debug, Default)]
struct Watchdog {
    table: Mutex<Table>,
    /// Wakes the task when a body is watched whose deadline is earlier than
    /// the one it sleeps until (a permit is kept if it is not asleep yet).
    earlier: Notify,
}

#[derive(Debug, Default)]
struct Table {
    /// The watched bodies; `None` where a body left, reused.
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
    /// Whether the task runs (it ends with its runtime; the next body to
    /// be watched starts another on its own).
    running: bool,
    /// When the task wakes next, if it sleeps until a deadline.
    wakes_at: Option<Instant>,
    /// The shortest bound of a body watched so far: with no body under
    /// watch the task still wakes that long after it last looked, so that
    /// a body watched meanwhile with a bound no shorter (every body, as a
    /// rule: one layer, one bound) is due no earlier and need not wake it.
    shortest: Option<Duration>,
}

#[derive(Debug)]
struct Entry {
    state: Arc<State>,
    /// When to look at the body next.
    check_at: Instant,
}

thread_local! {
    /// This thread's watchdog: a current-thread runtime's own (an actix-web
    /// worker's), one of a multi-thread runtime's few (one per worker
    /// thread that watched a body).
    static WATCHDOG: Arc<Watchdog> = Arc::default();
}

impl Watchdog {
    /// This thread's watchdog; `None` while the thread is exiting.
    fn of_this_thread() -> Option<Arc<Watchdog>> {
        WATCHDOG.try_with(Arc::clone).ok()
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `state` under watch, starting the task on the current runtime
    /// when none runs: the body's entry, or `None` when the task must start
    /// and there is no runtime to start it on.
    fn watch(self: &Arc<Self>, state: &Arc<State>) -> Option<usize> {
        let check_at = state.since + state.bound;
        let mut table = self.table();
        // Asked only when the task must start: a body watched while it runs
        // needs no runtime of its own.
        let start = if table.running {
            None
        } else {
            Some(tokio::runtime::Handle::try_current().ok()?)
        };
        table.shortest = Some(table.shortest.map_or(state.bound, |b| b.min(state.bound)));
        let entry = Some(Entry {
            state: Arc::clone(state),
            check_at,
        });
        let index = match table.free.pop() {
            Some(index) => {
                table.entries[index] = entry;
                index
            }
            None => {
                table.entries.push(entry);
                table.entries.len() - 1
            }
        };
        if start.is_some() {
            table.running = true;
            table.wakes_at = None;
        } else if table.wakes_at.is_none_or(|at| check_at < at) {
            self.earlier.notify_one();
        }
        drop(table);
        if let Some(runtime) = start {
            // Spawned outside the lock: a runtime that is shutting down
            // drops the task at once, and with it `Running`, which locks.
            runtime.spawn(watch(Running(Arc::clone(self))));
        }
        Some(index)
    }

    /// Takes the body at `index` out of the table.
    fn forget(&self, index: usize) {
        let mut table = self.table();
        table.entries[index] = None;
        table.free.push(index);
    }

    /// Looks at every body due by `now`: takes into `stalled` the lease of
    /// each whose consumer let a frame lie for its bound, and sets when to
    /// look at each other one next. The earliest of those, or, with none
    /// under watch, the shortest bound from now.
    fn check(&self, now: Instant, stalled: &mut Vec<Lease>) -> Option<Instant> {
        let mut table = self.table();
        let mut next: Option<Instant> = None;
        for entry in table.entries.iter_mut().flatten() {
            let state = &entry.state;
            if state.stalled.load(Ordering::Acquire) {
                continue;
            }
            if entry.check_at <= now {
                let due = state.yielded_at() + state.bound;
                if state.waiting.load(Ordering::Acquire) {
                    // The consumer is waiting on the producer: look again
                    // a bound from now (or after the next frame's bound).
                    entry.check_at = due.max(now + state.bound);
                } else if due <= now {
                    state.stalled.store(true, Ordering::Release);
                    stalled.extend(state.take());
                    continue;
                } else {
                    entry.check_at = due;
                }
            }
            next = Some(next.map_or(entry.check_at, |at| at.min(entry.check_at)));
        }
        let next = next.or(table.shortest.map(|bound| now + bound));
        table.wakes_at = next;
        next
    }
}

/// The watchdog's task's hold on it: marks it as not running when the
/// task ends, which it does only with its runtime (before its first poll,
/// if the runtime is shutting down).
struct Running(Arc<Watchdog>);

impl Drop for Running {
    fn drop(&mut self) {
        let mut table = self.0.table();
        table.running = false;
        table.wakes_at = None;
    }
}

/// The watchdog's task: sleeps until the earliest deadline of the bodies
/// under watch (or until one is watched), then takes the leases of those
/// whose consumer stopped reading.
async fn watch(running: Running) {
    let watchdog = &running.0;
    let mut leases = Vec::new();
    loop {
        let next = watchdog.check(Instant::now(), &mut leases);
        // Given back outside the table's lock.
        for _ in leases.drain(..) {
            stalled(Side::Response);
        }
        let earlier = pin!(watchdog.earlier.notified());
        match next {
            Some(at) => {
                let sleep = pin!(tokio::time::sleep_until(at));
                first_of(sleep, earlier).await;
            }
            None => earlier.await,
        }
    }
}

/// Waits for whichever of `a` and `b` is ready first (polled by hand: no
/// `select!`, and no proc-macro).
async fn first_of<A: Future, B: Future>(mut a: Pin<&mut A>, mut b: Pin<&mut B>) {
    std::future::poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() || b.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use admission_core::{Class, RequestPools};

    use super::{ProgressTimeout, Watchdog, Watched};

    fn bound(ms: u64) -> ProgressTimeout {
        ProgressTimeout::new(Duration::from_millis(ms)).unwrap()
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_shorter_bound_watched_later_is_taken_at_its_own_deadline() {
        let pools = RequestPools::new(1, 2).unwrap();
        let patient =
            Watched::start(pools.try_lease(Class::Control).unwrap(), bound(3_600_000)).unwrap();
        tokio::task::yield_now().await; // the task sleeps until the hour is up
        let hasty = Watched::start(pools.try_lease(Class::Control).unwrap(), bound(50)).unwrap();

        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(!hasty.holds_lease(), "taken at its own bound");
        assert!(patient.holds_lease());
        assert_eq!(pools.pool(Class::Control).stats().in_use, 1);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_body_of_the_same_bound_watched_after_the_table_emptied_wakes_no_one() {
        let pools = RequestPools::new(1, 1).unwrap();
        drop(Watched::start(pools.try_lease(Class::Control).unwrap(), bound(50)).unwrap());
        tokio::task::yield_now().await; // the task looks at an empty table
        tokio::time::advance(Duration::from_millis(10)).await;

        let watchdog = Watchdog::of_this_thread().unwrap();
        let wakes_at = watchdog.table().wakes_at;
        let due = tokio::time::Instant::now() + Duration::from_millis(50);
        let _watched = Watched::start(pools.try_lease(Class::Control).unwrap(), bound(50)).unwrap();
        assert!(
            wakes_at.is_some_and(|at| at <= due),
            "the task looks again before the new body is due ({wakes_at:?}, {due:?}): no wake needed"
        );
    }

    #[test]
    fn without_a_runtime_to_start_the_watchdog_on_the_body_keeps_its_lease() {
        let pools = RequestPools::new(1, 1).unwrap();
        // A thread of its own: its watchdog has never run.
        let given_back = std::thread::scope(|scope| {
            scope
                .spawn(|| Watched::start(pools.try_lease(Class::Control).unwrap(), bound(50)))
                .join()
                .unwrap()
        });
        let Err(lease) = given_back else {
            panic!("watched with no runtime to watch on")
        };
        assert_eq!(
            pools.pool(Class::Control).stats().in_use,
            1,
            "held by the body"
        );
        drop(lease);
        assert_eq!(pools.pool(Class::Control).stats().in_use, 0);
    }

    #[test]
    fn each_runtime_on_a_thread_gets_the_watchdog_running_again() {
        let pools = RequestPools::new(1, 1).unwrap();
        for turn in 0..3 {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            runtime.block_on(async {
                let watched =
                    Watched::start(pools.try_lease(Class::Control).unwrap(), bound(50)).unwrap();
                tokio::time::sleep(Duration::from_millis(60)).await;
                assert!(!watched.holds_lease(), "runtime {turn}: taken at the bound");
            });
            // The watchdog's task ends with its runtime.
            drop(runtime);
            assert_eq!(pools.pool(Class::Control).stats().in_use, 0);
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn many_watched_bodies_share_one_task_and_leave_its_table_when_dropped() {
        let pools = RequestPools::new(1, 64).unwrap();
        let bound = ProgressTimeout::new(Duration::from_secs(3600)).unwrap();
        let metrics = tokio::runtime::Handle::current().metrics();

        let watched: Vec<_> = (0..64)
            .map(|_| Watched::start(pools.try_lease(Class::Control).unwrap(), bound).unwrap())
            .collect();
        tokio::task::yield_now().await;
        assert_eq!(metrics.num_alive_tasks(), 1, "one watchdog for every body");
        assert_eq!(pools.pool(Class::Control).stats().in_use, 64);

        drop(watched);
        assert_eq!(
            pools.pool(Class::Control).stats().in_use,
            0,
            "each lease goes with its body"
        );
        let watchdog = Watchdog::of_this_thread().unwrap();
        let table = watchdog.table();
        assert!(
            table.entries.iter().all(Option::is_none),
            "the table is empty"
        );
        assert_eq!(table.free.len(), 64, "and its entries are reused");
    }
}
