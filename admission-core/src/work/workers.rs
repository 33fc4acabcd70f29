//! The bounded set of worker threads a pool owns.
//!
//! This module owns the threads, their job queue and closing it. It must
//! never grow past the number of threads it was built with and never block a
//! runtime thread: submitting is a short lock and a notify, and joining the
//! threads is left to the shutdown coordinator's own thread.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::PoisonError;

use crate::loom::sync::{Arc, Condvar, Mutex, MutexGuard};
use crate::loom::thread::{self, JoinHandle};

/// A job: offloaded work wrapped with its slot and its result channel.
pub(crate) type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of threads taking jobs from one queue.
pub(crate) struct Workers {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

struct Shared {
    state: Mutex<State>,
    ready: Condvar,
}

struct State {
    queue: VecDeque<Job>,
    closed: bool,
}

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
            }),
            ready: Condvar::new(),
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
                    let workers = Workers {
                        shared,
                        threads: Mutex::new(threads),
                    };
                    drop(workers.close());
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
        {
            let mut state = self.shared.lock();
            if state.closed {
                return Err(job);
            }
            state.queue.push_back(job);
        }
        self.shared.ready.notify_one();
        Ok(())
    }

    /// Closes the queue: threads finish the job they run and then exit.
    /// Returns the jobs that were queued but not started, so the caller
    /// decides when to drop (cancel) them.
    pub(crate) fn close(&self) -> Vec<Job> {
        let cancelled: Vec<Job> = {
            let mut state = self.shared.lock();
            state.closed = true;
            state.queue.drain(..).collect()
        };
        self.shared.ready.notify_all();
        cancelled
    }

    /// Takes the join handles, once; later calls get none.
    pub(crate) fn take_threads(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.threads.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // The last handle to the pool is gone: let idle threads exit.
        drop(self.close());
    }
}

impl fmt::Debug for Workers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("Workers")
            .field("queued", &state.queue.len())
            .field("closed", &state.closed)
            .finish_non_exhaustive()
    }
}

fn work_loop(shared: &Shared) {
    loop {
        let job = {
            let mut state = shared.lock();
            loop {
                if let Some(job) = state.queue.pop_front() {
                    break Some(job);
                }
                if state.closed {
                    break None;
                }
                state = shared
                    .ready
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
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
