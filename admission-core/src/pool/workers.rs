//! The worker threads a pool owns, started on demand.
//!
//! This module owns the threads, their job queue and closing it. A thread
//! starts when a job finds no idle thread to take it, up to the pool's
//! capacity, and exits after it has been idle for the keep-alive (as
//! tokio's blocking pool does), so a pool that only counts (a request
//! class used for leases) starts none. It must never grow past the number
//! of threads it was built with and never block a runtime thread:
//! submitting is a short lock and a notify (or, while the pool grows, a
//! thread spawn), and joining the threads is left to the shutdown
//! coordinator's own thread.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::PoisonError;
use std::time::Duration;

use crate::loom::sync::atomic::{AtomicBool, Ordering};
use crate::loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use crate::loom::thread::{self, JoinHandle};

/// A queued job: offloaded work wrapped with its slot and its delivery.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle worker thread waits for a job before it exits, unless
/// the pool's builder says otherwise (tokio's blocking pool waits as long).
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(10);

/// What closing the workers handed over.
#[derive(Debug)]
pub(crate) struct Closed {
    /// Jobs that were queued but not started; they were dropped (cancelled).
    pub(crate) cancelled: usize,
    /// The threads to join, on the first close only.
    pub(crate) threads: Vec<JoinHandle<()>>,
}

/// Up to `capacity` threads taking jobs from one queue.
pub(crate) struct Workers {
    shared: Arc<Shared>,
}

struct Shared {
    /// The pool's name, for the threads' names and the spawn failure's
    /// event.
    pool: &'static str,
    capacity: usize,
    #[cfg_attr(loom, expect(dead_code, reason = "under loom no thread exits idle"))]
    keep_alive: Duration,
    state: Mutex<State>,
    ready: Condvar,
    /// Jobs queued or the queue closed: read without the lock by a worker
    /// that spins briefly before it sleeps.
    pending: AtomicBool,
}

struct State {
    queue: VecDeque<Job>,
    closed: bool,
    /// Threads started and not yet exited.
    live: usize,
    /// Of those, the threads looking for a job (spinning or asleep): a job
    /// beyond them starts a thread.
    idle: usize,
    /// Of those, the threads asleep on `ready`; a submit wakes one only if
    /// there is one.
    sleepers: usize,
    /// The threads started so far, handed to shutdown to join; those that
    /// exited idle are pruned as new ones start.
    threads: Vec<JoinHandle<()>>,
    /// Numbers the threads' names.
    started: usize,
}

/// How long an idle worker looks for the next job before it sleeps. A job
/// that arrives meanwhile starts without a futex wake-up (several
/// microseconds); an idle pool costs at most this much CPU per job.
#[cfg(not(loom))]
const SPIN: Duration = Duration::from_micros(50);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock, so a poisoned lock only means a panic
        // between two queue operations; the queue itself is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Workers {
    /// Workers for the pool named `pool`: up to `capacity` threads named
    /// `admission-{pool}-{n}`, none started yet, each exiting after
    /// `keep_alive` idle.
    pub(crate) fn new(pool: &'static str, capacity: usize, keep_alive: Duration) -> Workers {
        Workers {
            shared: Arc::new(Shared {
                pool,
                capacity,
                keep_alive,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    closed: false,
                    live: 0,
                    idle: 0,
                    sleepers: 0,
                    threads: Vec::new(),
                    started: 0,
                }),
                ready: Condvar::new(),
                pending: AtomicBool::new(false),
            }),
        }
    }

    /// Queues a job, starting a thread for it when no idle one will take
    /// it and the pool has fewer than its capacity; gives the job back when
    /// the workers are closed, or when no thread runs and none could start.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let wake = {
            let mut state = self.shared.lock();
            if state.closed {
                return Err(job);
            }
            if state.queue.len() >= state.idle
                && state.live < self.shared.capacity
                && let Err(err) = self.start(&mut state)
            {
                // Visible, never silent: with a thread left the job waits
                // for it; with none it is given back (its caller sees it
                // cancelled and its slot comes back).
                tracing::error!(
                    pool = self.shared.pool,
                    kind = ?err.kind(),
                    "could not start a worker thread"
                );
                if state.live == 0 {
                    return Err(job);
                }
            }
            state.queue.push_back(job);
            self.shared.pending.store(true, Ordering::Release);
            state.sleepers > 0
        };
        if wake {
            self.shared.ready.notify_one();
        }
        Ok(())
    }

    /// Starts one more thread; it counts as idle until it takes a job.
    fn start(&self, state: &mut State) -> std::io::Result<()> {
        let for_thread = Arc::clone(&self.shared);
        let handle = thread::Builder::new()
            .name(format!("admission-{}-{}", self.shared.pool, state.started))
            .spawn(move || work_loop(&for_thread))?;
        prune(&mut state.threads);
        state.threads.push(handle);
        state.started += 1;
        state.live += 1;
        state.idle += 1;
        Ok(())
    }

    /// Closes the queue: threads finish the job they run and then exit.
    /// The jobs that were queued but not started are dropped (cancelled)
    /// outside the lock, and the join handles are handed over, once.
    pub(crate) fn close(&self) -> Closed {
        let (queued, threads): (Vec<Job>, _) = {
            let mut state = self.shared.lock();
            state.closed = true;
            self.shared.pending.store(true, Ordering::Release);
            (
                state.queue.drain(..).collect(),
                std::mem::take(&mut state.threads),
            )
        };
        self.shared.ready.notify_all();
        let cancelled = queued.len();
        // Dropping a queued job releases its slot and resolves its future
        // with `Cancelled`.
        drop(queued);
        Closed { cancelled, threads }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // The last handle to the pool is gone: let idle threads exit.
        drop(self.close());
    }
}

/// Forgets the handles of threads that exited idle (detaching a finished
/// thread frees it), so a pool that grows and shrinks all day keeps at most
/// its capacity of handles.
#[cfg(not(loom))]
fn prune(threads: &mut Vec<JoinHandle<()>>) {
    threads.retain(|thread| !thread.is_finished());
}

/// Under loom no thread exits idle: there is nothing to prune.
#[cfg(loom)]
fn prune(_threads: &mut Vec<JoinHandle<()>>) {}

fn work_loop(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        let mut spun = false;
        let job = loop {
            if let Some(job) = state.queue.pop_front() {
                if state.queue.is_empty() && !state.closed {
                    shared.pending.store(false, Ordering::Relaxed);
                }
                break Some(job);
            }
            if state.closed {
                break None;
            }
            if !spun {
                // Look for the next job without the lock for a moment;
                // whatever happens, the queue is checked again under the
                // lock before sleeping, so no wake-up is lost.
                drop(state);
                spin_for_work(shared);
                spun = true;
                state = shared.lock();
                continue;
            }
            state.sleepers += 1;
            let timed_out;
            (state, timed_out) = sleep(shared, state);
            state.sleepers -= 1;
            if timed_out && state.queue.is_empty() {
                // Idle for the keep-alive: exit, under the lock that a
                // submit reads the idle threads under, so a job submitted
                // from now on starts a thread of its own.
                break None;
            }
        };
        state.idle -= 1;
        let Some(job) = job else {
            state.live -= 1;
            return;
        };
        drop(state);
        // The job catches the work's own panic; this catch keeps the
        // thread alive even if reporting it panicked (e.g. a subscriber).
        drop(catch_unwind(AssertUnwindSafe(job)));
        state = shared.lock();
        state.idle += 1;
    }
}

/// Sleeps until woken or the keep-alive passes; says whether it passed.
#[cfg(not(loom))]
fn sleep<'a>(shared: &'a Shared, state: MutexGuard<'a, State>) -> (MutexGuard<'a, State>, bool) {
    let (state, timeout) = shared
        .ready
        .wait_timeout(state, shared.keep_alive)
        .unwrap_or_else(PoisonError::into_inner);
    (state, timeout.timed_out())
}

/// Under loom an idle thread sleeps until woken: the models explore the
/// queue, not the clock.
#[cfg(loom)]
fn sleep<'a>(shared: &'a Shared, state: MutexGuard<'a, State>) -> (MutexGuard<'a, State>, bool) {
    let state = shared
        .ready
        .wait(state)
        .unwrap_or_else(PoisonError::into_inner);
    (state, false)
}

/// Spins until a job may be pending or [`SPIN`] has passed.
#[cfg(not(loom))]
fn spin_for_work(shared: &Shared) {
    let started = std::time::Instant::now();
    while !shared.pending.load(Ordering::Acquire) {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
        if started.elapsed() >= SPIN {
            return;
        }
    }
}

/// Under loom a spin would only multiply the interleavings: go straight to
/// the lock.
#[cfg(loom)]
fn spin_for_work(_shared: &Shared) {}
