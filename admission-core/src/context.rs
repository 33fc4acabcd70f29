//! The task-local execution context: the request lease or loop reservation
//! the current task runs under.
//!
//! This module owns the task-local and the [`Scoped`] future that sets it.
//! It must never leak a context into a task it did not wrap: tokio tasks do
//! not inherit task-locals, and lifespan loops are started with an empty one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use tokio::task::futures::TaskLocalFuture;

use crate::lease::Lease;
use crate::reserve::Reservation;

/// What pure work in the current task runs under.
#[derive(Debug, Clone, Default)]
pub(crate) enum Context {
    /// Neither a lease nor a reservation: pure work takes a fresh lease.
    #[default]
    Empty,
    /// A request's lease, inherited by the work it does.
    Lease(Lease),
    /// A loop owner's reservation: each call takes one of its slots.
    Reservation(Reservation),
}

tokio::task_local! {
    static CONTEXT: Context;
}

/// The current task's context, `Empty` outside any scope.
pub(crate) fn current() -> Context {
    CONTEXT.try_with(Context::clone).unwrap_or_default()
}

/// The request lease the current task runs under, if any.
///
/// # Examples
///
/// ```
/// use admission_core::{current_lease, Class, RequestPools};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let requests = RequestPools::new(2, 4).unwrap();
/// assert!(current_lease().is_none());
/// let lease = requests.try_lease(Class::Control).unwrap();
/// let class = lease.scope(async { current_lease().map(|l| l.class()) }).await;
/// assert_eq!(class, Some(Class::Control));
/// # }
/// ```
pub fn current_lease() -> Option<Lease> {
    match current() {
        Context::Lease(lease) => Some(lease),
        _ => None,
    }
}

pin_project_lite::pin_project! {
    /// A future run under a request lease, a reservation, or an empty
    /// context; see [`Lease::scope`], [`Reservation::execution`] and
    /// [`Shutdown::spawn_lifespan`](crate::Shutdown::spawn_lifespan).
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct Scoped<F> {
        #[pin]
        inner: TaskLocalFuture<Context, F>,
    }
}

impl<F: Future> Scoped<F> {
    pub(crate) fn new(context: Context, future: F) -> Self {
        Scoped {
            inner: CONTEXT.scope(context, future),
        }
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}
