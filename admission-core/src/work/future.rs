//! The future for offloaded work's result.
//!
//! This module owns [`WorkFuture`]. Dropping it must never cancel the work or
//! release its slot: it only stops listening.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use super::WorkError;

/// The result of offloaded work, once it ends.
///
/// Dropping it orphans the work: the work runs on, keeps its slot until it
/// ends, and a failure is reported by the pool instead of the caller.
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
#[derive(Debug)]
#[must_use = "dropping the future orphans the work; await it for its result"]
pub struct WorkFuture<T, E> {
    rx: oneshot::Receiver<Result<T, WorkError<E>>>,
}

impl<T, E> WorkFuture<T, E> {
    pub(crate) fn new(rx: oneshot::Receiver<Result<T, WorkError<E>>>) -> Self {
        WorkFuture { rx }
    }
}

impl<T, E> Future for WorkFuture<T, E> {
    type Output = Result<T, WorkError<E>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            // The sender is dropped unsent only when shutdown dropped the
            // job before it started.
            .map(|sent| sent.unwrap_or(Err(WorkError::Cancelled)))
    }
}
