//! The incident's executor: a fixed set of N threads fed by a queue with no
//! bound.
//!
//! This module exists to be compared against, not copied. Nothing is ever
//! refused, and a job whose caller went away stays queued and still does
//! its whole walk. Closing it (at shutdown) discards what is still queued so
//! that the demo can end.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// N worker threads taking jobs from one unbounded channel.
#[derive(Debug)]
pub(crate) struct UnboundedQueue {
    jobs: mpsc::Sender<Job>,
    closed: Arc<AtomicBool>,
    queued: Gauge,
}

/// The job was discarded before it ran (the queue was closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Discarded;

impl UnboundedQueue {
    /// Starts `workers` threads; `queued` counts jobs not yet taken.
    pub(crate) fn spawn(workers: usize, queued: Gauge) -> std::io::Result<UnboundedQueue> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let closed = Arc::new(AtomicBool::new(false));
        for i in 0..workers {
            let (rx, closed, queued) = (Arc::clone(&rx), Arc::clone(&closed), queued.clone());
            std::thread::Builder::new()
                .name(format!("unbounded-queue-{i}"))
                .spawn(move || {
                    loop {
                        // The guard is a temporary: the lock is released as
                        // soon as a job is taken, before it runs.
                        let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
                        let Ok(job) = next else { return };
                        queued.dec();
                        if !closed.load(Ordering::Acquire) {
                            job();
                        }
                    }
                })?;
        }
        Ok(UnboundedQueue {
            jobs,
            closed,
            queued,
        })
    }

    /// Queues `work` and waits for its result. Dropping the future does not
    /// take the job out of the queue.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Discarded> {
        let (tx, rx) = oneshot::channel();
        self.queued.inc();
        let job: Job = Box::new(move || {
            let _ = tx.send(work());
        });
        if self.jobs.send(job).is_err() {
            self.queued.dec();
            return Err(Discarded);
        }
        rx.await.map_err(|_| Discarded)
    }

    /// Discards every queued job from now on; returns how many were queued.
    pub(crate) fn close(&self) -> u64 {
        self.closed.store(true, Ordering::Release);
        u64::try_from(self.queued.get()).unwrap_or(0)
    }
}
