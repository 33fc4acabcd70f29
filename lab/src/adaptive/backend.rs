//! The backend whose true capacity is known: `C` hidden permits, each
//! request holding one for `d`, so that latency grows with queueing once
//! concurrency passes `C`.
//!
//! This module owns [`Backend`]. It never refuses: a request past `C`
//! waits (FIFO) for a permit, as work queued inside a real service would.
//! Both `C` and `d` change at run time, for the capacity step and the
//! timeout plateau.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::Duration;

use tokio::sync::Semaphore;

/// `C` hidden permits held `d` each.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::adaptive::Backend;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let backend = Backend::new(2, Duration::from_millis(50));
/// let start = tokio::time::Instant::now();
/// tokio::join!(backend.serve(), backend.serve(), backend.serve());
/// assert!(start.elapsed() >= Duration::from_millis(100), "the third waited for a permit");
/// # }
/// ```
#[derive(Debug)]
pub struct Backend {
    permits: Semaphore,
    capacity: AtomicUsize,
    hold_us: AtomicU64,
}

impl Backend {
    /// `capacity` permits held `hold` each.
    pub fn new(capacity: usize, hold: Duration) -> Arc<Backend> {
        Arc::new(Backend {
            permits: Semaphore::new(capacity),
            capacity: AtomicUsize::new(capacity),
            hold_us: AtomicU64::new(micros(hold)),
        })
    }

    /// The permits it has now.
    pub fn capacity(&self) -> usize {
        self.capacity.load(SeqCst)
    }

    /// Changes the permits to `to`: added at once, or taken away as
    /// requests give theirs back (none is revoked).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe while shrinking: dropped, it forgets only the
    /// permits it had gathered (none, since `acquire_many` takes all at
    /// once or none).
    pub async fn set_capacity(&self, to: usize) {
        let from = self.capacity.swap(to, SeqCst);
        if to > from {
            self.permits.add_permits(to - from);
        } else if to < from {
            let n = u32::try_from(from - to).unwrap_or(u32::MAX);
            if let Ok(taken) = self.permits.acquire_many(n).await {
                taken.forget();
            }
        }
    }

    /// Changes how long each request holds its permit.
    pub fn set_hold(&self, hold: Duration) {
        self.hold_us.store(micros(hold), SeqCst);
    }

    /// One request: waits for a permit, holds it `d`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a dropped request gives its permit back (or leaves the
    /// line), as a real service's cancelled handler would.
    pub async fn serve(&self) {
        let Ok(_permit) = self.permits.acquire().await else {
            return;
        };
        tokio::time::sleep(Duration::from_micros(self.hold_us.load(SeqCst))).await;
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
