//! The bounded set of worker threads a pool owns.
//!
//! This module owns the threads, their job queue and closing it. It must
//! never grow past the number of threads it was built with and never block a
//! runtime thread: submitting is a short lock and a notify, and joining the
//! threads is left to the shutdown coordinator's own thread.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::PoisonError;

use crate::loom::sync::atomic::{AtomicBool, Ordering};
use crate::loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use crate::loom::thread::{self, JoinHandle};

/// A queued job: offloaded work wrapped with its slot and its delivery.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// What closing the workers handed over.
#[derive(Debug)]
pub(crate) struct Closed {
    /// Jobs that were queued but not started; they were dropped (cancelled).
    pub(crate) cancelled: usize,
    /// The threads to join, on the first close only.
    pub(crate) threads: Vec<JoinHandle<()>>,
}

/// A fixed set of threads taking jobs from one queue.
pub(crate) struct Workers {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
    /// Jobs queued or the queue closed: read without the lock by a worker
    /// that spins briefly before it sleeps.
    pending: AtomicBool,
}

struct State {
    queue: VecDeque<Job>,
    closed: bool,
    /// Workers asleep on `ready`; a submit wakes one only if there is one.
    sleepers: usize,
}

/// How long an idle worker looks for the next job before it sleeps. A job
/// that arrives meanwhile starts without a futex wake-up (several
/// microseconds); an idle pool costs at most this much CPU per job.
#[cfg(not(loom))]
const SPIN: std::time::Duration = std::time::Duration::from_micros(50);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Jobs run outside the lock, so a poisoned lock only means a panic
        // between two queue operations; the queue itself is still whole.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Workers {
    /// Starts `count` threads named `admission-{pool}-{i}`.
    pub(crate) fn spawn(pool: &str, count: usize) -> std::io::Result<Workers> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                queue: VecDeque::with_capacity(count),
                closed: false,
                sleepers: 0,
            }),
            ready: Condvar::new(),
            pending: AtomicBool::new(false),
        });
        let mut threads = Vec::with_capacity(count);
        for i in 0..count {
            let for_thread = Arc::clone(&shared);
            let spawned = thread::Builder::new()
                .name(format!("admission-{pool}-{i}"))
                .spawn(move || work_loop(&for_thread));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(err) => {
                    // Dropping the workers closes the queue: the threads
                    // already started exit.
                    drop(Workers {
                        shared,
                        threads: Mutex::new(threads),
                    });
                    return Err(err);
                }
            }
        }
        Ok(Workers {
            shared,
            threads: Mutex::new(threads),
        })
    }

    /// Queues a job; gives it back when the workers are closed.
    pub(crate) fn submit(&self, job: Job) -> Result<(), Job> {
        let wake = {
            let mut state = self.shared.lock();
            if state.closed {
                return Err(job);
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

    /// Closes the queue: threads finish the job they run and then exit.
    /// The jobs that were queued but not started are dropped (cancelled)
    /// outside the lock, and the join handles are handed over, once.
    pub(crate) fn close(&self) -> Closed {
        let queued: Vec<Job> = {
            let mut state = self.shared.lock();
            state.closed = true;
            self.shared.pending.store(true, Ordering::Release);
            state.queue.drain(..).collect()
        };
        self.shared.ready.notify_all();
        let cancelled = queued.len();
        // Dropping a queued job releases its slot and resolves its future
        // with `Cancelled`.
        drop(queued);
        let threads =
            std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner));
        Closed { cancelled, threads }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // The last handle to the pool is gone: let idle threads exit.
        drop(self.close());
    }
}

fn work_loop(shared: &Shared) {
    loop {
        let job = {
            let mut state = shared.lock();
            let mut spun = false;
            loop {
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
                state = shared
                    .ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                state.sleepers -= 1;
            }
        };
        match job {
            // The job catches the work's own panic; this catch keeps the
            // thread alive even if reporting it panicked (e.g. a subscriber).
            Some(job) => drop(catch_unwind(AssertUnwindSafe(job))),
            None => return,
        }
    }
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
