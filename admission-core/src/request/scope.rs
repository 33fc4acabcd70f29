//! The task-local execution context: the request lease or loop reservation
//! the current task runs under, and the scopes that set it.
//!
//! This module owns the task-local, [`Scoped`], and the `scope` and
//! `current` functions of [`Lease`]. It must never leak a context into a
//! task it did not wrap: tokio tasks do not inherit task-locals, and lifespan
//! loops are started with an empty one.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use tokio::task::futures::TaskLocalFuture;

use super::Lease;
use crate::pool::Pool;

/// What pure work in the current task runs under.
#[derive(Debug, Clone, Default)]
pub(crate) enum Context {
    /// Neither a lease nor a reservation: pure work takes a fresh lease.
    #[default]
    Empty,
    /// A request's lease, inherited by the work it does.
    Lease(Lease),
    /// A loop owner's reservation (its pool): each call takes one of its
    /// slots.
    Reservation(Pool),
}

tokio::task_local! {
    static CONTEXT: Context;
}

/// Reads the current task's context, `Empty` outside any scope, without
/// cloning it.
pub(crate) fn with_current<R>(read: impl FnOnce(&Context) -> R) -> R {
    let mut read = Some(read);
    // `try_with` runs the closure only when the task-local is set.
    if let Ok(Some(out)) = CONTEXT.try_with(|context| read.take().map(|read| read(context))) {
        return out;
    }
    match read {
        Some(read) => read(&Context::Empty),
        None => unreachable!("a read that ran returned its output above"),
    }
}

/// The lease of `pool` the current task runs under, if any: a request that
/// already holds it takes no second slot of the same class.
pub(crate) fn inherited(pool: &Pool) -> Option<Lease> {
    with_current(|context| match context {
        Context::Lease(lease) if lease.pool().same_pool(pool) => Some(lease.clone()),
        _ => None,
    })
}

/// Runs `call` with `context` set for its synchronous duration: what it
/// builds (a service's `call`) sees the context as a scoped future would.
pub(crate) fn sync_scope<R>(context: Context, call: impl FnOnce() -> R) -> R {
    CONTEXT.sync_scope(context, call)
}

impl Lease {
    /// The request lease the current task runs under, if any.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, Lease, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(2, 4).unwrap();
    /// assert!(Lease::current().is_none());
    /// let lease = requests.try_lease(Class::Control).unwrap();
    /// let class = lease.scope(async { Lease::current().map(|l| l.class()) }).await;
    /// assert_eq!(class, Some(Class::Control));
    /// # }
    /// ```
    pub fn current() -> Option<Lease> {
        with_current(|context| match context {
            Context::Lease(lease) => Some(lease.clone()),
            _ => None,
        })
    }

    /// Runs `future` with this lease as the task's context, so that pure
    /// work inside it ([`RequestPools::execute_pure`](crate::RequestPools::execute_pure))
    /// runs under the lease and takes no second slot, and a second admission
    /// of the same class inside it ([`RequestPools::try_lease`](crate::RequestPools::try_lease),
    /// a nested layer, `#[admitted]`) shares this lease. The scope holds a
    /// share of the lease until the future is dropped.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future drops its share of the lease; pure work it
    /// started keeps its own share until that work ends.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let lease = requests.try_lease(Class::Work).unwrap();
    /// let out = lease
    ///     .scope(async {
    ///         requests.execute_pure(Class::Work, || Ok::<_, std::fmt::Error>(7)).await
    ///     })
    ///     .await;
    /// assert_eq!(out, Ok(7), "ran under the inherited lease although the class is full");
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> Scoped<F> {
        Scoped::new(Context::Lease(self), future)
    }

    /// Runs the synchronous `call` with this lease as the context (an inner
    /// service's `call`, which may admit in turn), for adapters.
    #[doc(hidden)]
    pub fn scope_sync<R>(&self, call: impl FnOnce() -> R) -> R {
        sync_scope(Context::Lease(self.clone()), call)
    }
}

pin_project_lite::pin_project! {
    /// A future run under a request lease, a reservation, or an empty
    /// context; see [`Lease::scope`],
    /// [`Reservation::execution`](crate::Reservation::execution) and
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
