//! The task-local execution scope: who the current task runs for (its
//! [`Caller`]) and what pure work in it runs under (a request lease, a loop
//! reservation, or nothing), in one task-local.
//!
//! This module owns that task-local, [`Scoped`], and the `scope` and
//! `current` functions of [`Lease`] and [`Caller`]. It must never leak a
//! scope into a task it did not wrap: tokio tasks do not inherit
//! task-locals, and lifespan loops are started with an empty one (no lease
//! and the default caller).
//!
//! A scope that sets one half (a [`Caller::scope`], a [`Lease::scope`], a
//! reservation's execution) keeps the other half of the scope it is polled
//! in, so scopes nest in any order; [`Lease::scope_for`] sets both halves
//! at once, the form adapters use on every request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use tokio::task::futures::TaskLocalFuture;

use super::Lease;
use crate::caller::Caller;
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

/// Both halves of a task's scope; the default is a lifespan loop's: the
/// default caller, no lease.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    caller: Caller,
    context: Context,
}

/// One half of a scope, set over whatever scope it is polled in.
#[derive(Debug, Clone)]
pub(crate) enum Half {
    Caller(Caller),
    Context(Context),
}

impl Half {
    /// This half over `outer`'s other half.
    fn over(&self, outer: Option<&Scope>) -> Scope {
        match self {
            Half::Caller(caller) => Scope {
                caller: *caller,
                context: outer.map(|o| o.context.clone()).unwrap_or_default(),
            },
            Half::Context(context) => Scope {
                caller: outer.map(|o| o.caller).unwrap_or_default(),
                context: context.clone(),
            },
        }
    }

    /// The whole scope this half makes where it is set now.
    fn current(&self) -> Scope {
        match SCOPE.try_with(|outer| self.over(Some(outer))) {
            Ok(scope) => scope,
            Err(_) => self.over(None),
        }
    }
}

tokio::task_local! {
    static SCOPE: Scope;
}

/// Reads the current task's context, `Empty` outside any scope, without
/// cloning it.
pub(crate) fn with_current<R>(read: impl FnOnce(&Context) -> R) -> R {
    let mut read = Some(read);
    // `try_with` runs the closure only when the task-local is set.
    if let Ok(Some(out)) = SCOPE.try_with(|scope| read.take().map(|read| read(&scope.context))) {
        return out;
    }
    match read {
        Some(read) => read(&Context::Empty),
        None => unreachable!("a read that ran returned its output above"),
    }
}

/// The caller the current task runs for: the default outside any scope.
pub(crate) fn current_caller() -> Caller {
    SCOPE.try_with(|scope| scope.caller).unwrap_or_default()
}

/// The lease of `pool` the current task runs under, if any: a request that
/// already holds it takes no second slot of the same class.
pub(crate) fn inherited(pool: &Pool) -> Option<Lease> {
    with_current(|context| match context {
        Context::Lease(lease) if lease.pool().same_pool(pool) => Some(lease.inherited()),
        _ => None,
    })
}

/// Runs `call` with `half` set over the current scope for its synchronous
/// duration: what it builds (a service's `call`) sees the scope as a
/// scoped future would.
pub(crate) fn sync_scope_half<R>(half: &Half, call: impl FnOnce() -> R) -> R {
    SCOPE.sync_scope(half.current(), call)
}

/// Runs `call` in exactly `scope` (both halves) for its synchronous
/// duration.
pub(crate) fn sync_scope<R>(scope: Scope, call: impl FnOnce() -> R) -> R {
    SCOPE.sync_scope(scope, call)
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
    /// a nested layer, `#[admitted]`) shares this lease. The caller is the
    /// one of the scope the future is polled in. The scope holds a share of
    /// the lease until the future is dropped.
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
        Scoped::half(Half::Context(Context::Lease(self)), future)
    }

    /// Runs `future` under this lease and for `caller`, both in one scope:
    /// what an adapter does for every admitted request (the lease it took,
    /// the caller its headers describe), and the same as
    /// `caller.scope(lease.scope(future))` with one task-local instead of
    /// two.
    ///
    /// # Cancel safety
    ///
    /// As [`scope`](Self::scope)'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Class, Criticality, Lease, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let lease = requests.try_lease(Class::Work).unwrap();
    /// let (level, class) = lease
    ///     .scope_for(Caller::new(Criticality::Sheddable), async {
    ///         (Caller::current().criticality(), Lease::current().map(|l| l.class()))
    ///     })
    ///     .await;
    /// assert_eq!((level, class), (Criticality::Sheddable, Some(Class::Work)));
    /// # }
    /// ```
    pub fn scope_for<F: Future>(self, caller: Caller, future: F) -> Scoped<F> {
        Scoped::whole(
            Scope {
                caller,
                context: Context::Lease(self),
            },
            future,
        )
    }

    /// Runs the synchronous `call` with this lease as the context (an inner
    /// service's `call`, which may admit in turn), for adapters.
    #[doc(hidden)]
    pub fn scope_sync<R>(&self, call: impl FnOnce() -> R) -> R {
        sync_scope_half(&Half::Context(Context::Lease(self.clone())), call)
    }

    /// Runs the synchronous `call` under this lease and for `caller`, in one
    /// scope (an inner service's `call`), for adapters.
    #[doc(hidden)]
    pub fn scope_sync_for<R>(&self, caller: Caller, call: impl FnOnce() -> R) -> R {
        sync_scope(
            Scope {
                caller,
                context: Context::Lease(self.clone()),
            },
            call,
        )
    }
}

impl Caller {
    /// The caller the current task runs for: the innermost scope's
    /// ([`Caller::scope`], [`Lease::scope_for`]), or default criticality
    /// with no deadline outside any.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Criticality};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(Caller::current().criticality(), Criticality::Default);
    /// let inside = Caller::new(Criticality::Critical)
    ///     .scope(async { Caller::current().criticality() })
    ///     .await;
    /// assert_eq!(inside, Criticality::Critical);
    /// # }
    /// ```
    pub fn current() -> Caller {
        current_caller()
    }

    /// Runs `future` for this caller: every admission inside it is made at
    /// this criticality and within this deadline. The lease or reservation
    /// is the one of the scope the future is polled in.
    ///
    /// # Cancel safety
    ///
    /// The returned future is as cancel-safe as `future`; dropping it drops
    /// `future`, and the caller with it.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Criticality};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let level = Caller::new(Criticality::Sheddable)
    ///     .scope(async { Caller::current().criticality() })
    ///     .await;
    /// assert_eq!(level, Criticality::Sheddable);
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> Scoped<F> {
        Scoped::half(Half::Caller(self), future)
    }

    /// Runs the synchronous `call` for this caller (an inner service's
    /// `call`, which may admit in turn), for adapters.
    #[doc(hidden)]
    pub fn scope_sync<R>(self, call: impl FnOnce() -> R) -> R {
        sync_scope_half(&Half::Caller(self), call)
    }
}

pin_project_lite::pin_project! {
    /// A future run in a scope: for a [`Caller`], under a request lease, a
    /// reservation, or an empty scope; see [`Caller::scope`],
    /// [`Lease::scope`], [`Lease::scope_for`],
    /// [`Reservation::execution`](crate::Reservation::execution) and
    /// [`Shutdown::spawn_lifespan`](crate::Shutdown::spawn_lifespan).
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    pub struct Scoped<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        // Both halves, fixed: tokio's task-local future, which swaps the
        // scope in and out on each poll.
        Whole {
            #[pin]
            inner: TaskLocalFuture<Scope, F>,
        },
        // One half, set over the scope of each poll.
        Half {
            half: Half,
            #[pin]
            inner: F,
        },
    }
}

impl<F: Future> Scoped<F> {
    pub(crate) fn whole(scope: Scope, future: F) -> Self {
        Scoped {
            kind: Kind::Whole {
                inner: SCOPE.scope(scope, future),
            },
        }
    }

    pub(crate) fn half(half: Half, future: F) -> Self {
        Scoped {
            kind: Kind::Half {
                half,
                inner: future,
            },
        }
    }
}

impl<F: Future> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        match self.project().kind.project() {
            KindProj::Whole { inner } => inner.poll(cx),
            KindProj::Half { half, inner } => SCOPE.sync_scope(half.current(), || inner.poll(cx)),
        }
    }
}
