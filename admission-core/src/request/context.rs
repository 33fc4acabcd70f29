//! What pure work in the current task runs under: a request's lease, a
//! loop owner's reservation, or nothing.
//!
//! This module owns [`Context`] and its passage through the crate's
//! task-local scope, which stores it opaquely (the scope names nothing
//! above it). It must never decide an admission: it only says what the
//! current task holds.

use super::Lease;
use crate::pool::Pool;
use crate::scope::{self, Held, ScopePart};

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

impl Context {
    /// This context as the scope stores it.
    pub(crate) fn held(self) -> Option<Held> {
        match self {
            Context::Empty => None,
            Context::Lease(lease) => Some(lease.into_held()),
            Context::Reservation(pool) => Some(pool.into_held()),
        }
    }

    /// The context a scope keeps as `held`.
    fn from_held(held: &Held) -> Context {
        Lease::from_held(held)
            .map(Context::Lease)
            .or_else(|| Pool::from_held(held).map(Context::Reservation))
            .unwrap_or_default()
    }

    /// A scope part that sets this context over the caller it is polled
    /// for.
    pub(crate) fn part(self) -> ScopePart {
        ScopePart::Context(self.held())
    }
}

/// The current task's context, `Empty` outside any scope: a clone of
/// the one the scope holds (one count more on its `Arc`).
pub(crate) fn current() -> Context {
    scope::with_current(|held| held.map(Context::from_held).unwrap_or_default())
}
