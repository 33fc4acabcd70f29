//! The future for offloaded work's result.
//!
//! This module owns [`WorkFuture`]. Dropping it must never cancel the work or
//! release its slot early: it only stops listening.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use super::job::{Delivery, report_orphan};
use super::stats::Listeners;
use super::{Pool, WorkError};

/// The result of offloaded work, once it ends.
///
/// Dropping it orphans the work: the work runs on, keeps its slot until it
/// ends, and a failure is reported by the pool instead of the caller. While
/// it runs it counts in
/// [`PoolStats::orphans_running`](crate::stats::PoolStats::orphans_running),
/// and once it ends in [`orphaned`](crate::stats::PoolStats::orphaned).
///
/// # Cancel safety
///
/// Dropping is always safe and never cancels the work.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let future = pool.try_admit().unwrap().offload(|| Ok::<_, std::fmt::Error>(2 + 2));
/// assert_eq!(future.await, Ok(4));
/// # }
/// ```
#[must_use = "dropping the future orphans the work; await it for its result"]
#[doc(hidden)]
pub struct WorkFuture<T, E> {
    rx: oneshot::Receiver<Delivery<T, E>>,
    pool: Pool,
    /// Told when this future stops listening before it took the result,
    /// so that a running orphan is counted while it runs.
    listeners: Arc<Listeners>,
    taken: bool,
}

impl<T, E> WorkFuture<T, E> {
    pub(crate) fn new(
        rx: oneshot::Receiver<Delivery<T, E>>,
        pool: Pool,
        listeners: Arc<Listeners>,
    ) -> Self {
        WorkFuture {
            rx,
            pool,
            listeners,
            taken: false,
        }
    }
}

impl<T, E> fmt::Debug for WorkFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkFuture")
            .field("pool", &self.pool.name())
            .field("taken", &self.taken)
            .finish_non_exhaustive()
    }
}

impl<T, E> Future for WorkFuture<T, E> {
    type Output = Result<T, WorkError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let delivered = std::task::ready!(Pin::new(&mut self.rx).poll(cx));
        self.taken = true;
        Poll::Ready(match delivered {
            // The slot comes back before the caller sees the result.
            Ok((result, hold)) => {
                drop(hold);
                result
            }
            // The sender is dropped unsent only when shutdown dropped the
            // job before it started.
            Err(_) => Err(WorkError::Cancelled),
        })
    }
}

impl<T, E> Drop for WorkFuture<T, E> {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        // A running orphan from now until the work ends, unless it has.
        self.listeners.leave(self.pool.counters());
        // Either the job sees the channel closed and reports the orphan
        // itself, or its result is already here and never taken: report it
        // here, before the slot it carries is released.
        self.rx.close();
        if let Ok((result, hold)) = self.rx.try_recv() {
            // The work ended while its caller was still there.
            report_orphan(&self.pool, &result, std::time::Duration::ZERO);
            drop(hold);
        }
    }
}
