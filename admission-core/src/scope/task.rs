//! The task-local execution scope: who the current task runs for (its
//! [`Caller`]) and what pure work in it runs under (a request lease, a loop
//! reservation, or nothing), in one task-local.
//!
//! This module owns that task-local, the [`Scoped`] future that sets it,
//! and the reads of it. It names nothing above it: what pure work runs
//! under is stored as an opaque [`Held`] value that the request module
//! makes and reads back. It must never leak a scope into a task it did
//! not wrap: tokio tasks do not inherit task-locals, and lifespan loops
//! are started with an empty one (no lease and the default caller).
//!
//! A scope that sets one part (a caller, a lease, a reservation's
//! execution) keeps the other part of the scope it is polled in, so scopes
//! nest in any order; `Lease::scope_for` sets both at once, the form
//! adapters use on every request.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context as TaskContext, Poll};

use tokio::task::futures::TaskLocalFuture;

use super::Caller;

/// What pure work in the current task runs under, as this module stores
/// it: a value of the request module's `Context` (a lease or a
/// reservation's pool), opaque here so that this module names nothing
/// above it; `None` is neither.
pub(crate) type Held = Arc<dyn Any + Send + Sync>;

/// Both parts of a task's scope; the default is a lifespan loop's: the
/// default caller, no lease.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    pub(crate) caller: Caller,
    pub(crate) context: Option<Held>,
}

/// One part of a scope, set over whatever scope it is polled in.
#[derive(Debug, Clone)]
pub(crate) enum ScopePart {
    Caller(Caller),
    Context(Option<Held>),
}

impl ScopePart {
    /// This part over `outer`'s other part.
    fn over(&self, outer: Option<&Scope>) -> Scope {
        match self {
            ScopePart::Caller(caller) => Scope {
                caller: *caller,
                context: outer.map(|o| o.context.clone()).unwrap_or_default(),
            },
            ScopePart::Context(context) => Scope {
                caller: outer.map(|o| o.caller).unwrap_or_default(),
                context: context.clone(),
            },
        }
    }

    /// The whole scope this part makes where it is set now.
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

/// Reads the current task's context, `None` outside any scope or in one
/// without a context, without cloning it.
pub(crate) fn with_current<R>(read: impl FnOnce(Option<&Held>) -> R) -> R {
    let mut read = Some(read);
    // `try_with` runs the closure only when the task-local is set.
    if let Ok(Some(out)) =
        SCOPE.try_with(|scope| read.take().map(|read| read(scope.context.as_ref())))
    {
        return out;
    }
    match read {
        Some(read) => read(None),
        None => unreachable!("a read that ran returned its output above"),
    }
}

/// The caller the current task runs for: the default outside any scope.
pub(crate) fn current_caller() -> Caller {
    SCOPE.try_with(|scope| scope.caller).unwrap_or_default()
}

/// Runs `call` with `part` set over the current scope for its synchronous
/// duration: what it builds (a service's `call`) sees the scope as a
/// scoped future would.
pub(crate) fn sync_scope_part<R>(part: &ScopePart, call: impl FnOnce() -> R) -> R {
    SCOPE.sync_scope(part.current(), call)
}

/// Runs `call` in exactly `scope` (both halves) for its synchronous
/// duration.
pub(crate) fn sync_scope<R>(scope: Scope, call: impl FnOnce() -> R) -> R {
    SCOPE.sync_scope(scope, call)
}

pin_project_lite::pin_project! {
    /// A future run in a scope: for a [`Caller`], under a request lease, a
    /// reservation, or an empty scope; see [`Caller::scope`],
    /// [`Lease::scope`](crate::Lease::scope), [`Lease::scope_for`](crate::Lease::scope_for),
    /// [`Reservation::execution`](crate::Reservation::execution) and
    /// [`Shutdown::spawn_lifespan`](crate::Shutdown::spawn_lifespan).
    #[must_use = "futures do nothing unless polled"]
    #[derive(Debug)]
    #[doc(hidden)]
    pub struct Scoped<F> {
        #[pin]
        kind: Kind<F>,
    }
}

pin_project_lite::pin_project! {
    #[project = KindProj]
    #[derive(Debug)]
    enum Kind<F> {
        // Both parts, fixed: tokio's task-local future, which swaps the
        // scope in and out on each poll.
        Whole {
            #[pin]
            inner: TaskLocalFuture<Scope, F>,
        },
        // One part, set over the scope of each poll.
        Part {
            part: ScopePart,
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

    pub(crate) fn part(part: ScopePart, future: F) -> Self {
        Scoped {
            kind: Kind::Part {
                part,
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
            KindProj::Part { part, inner } => SCOPE.sync_scope(part.current(), || inner.poll(cx)),
        }
    }
}
