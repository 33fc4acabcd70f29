//! The request lease guard.
//!
//! This module owns [`Lease`]: one slot of a request class, shared by the
//! request and every piece of pure work it starts, and the ways to run a
//! request under it (its scope, through [`crate::scope`]). It must never
//! release the slot while the request or any of its work still holds a
//! share.

use std::future::Future;
use std::sync::Arc;

use tokio::time::Instant;

use super::Class;
use super::adaptive::Controller;
use super::context::{self, Context};
use crate::caller::Caller;
use crate::pool::job::HeldCapacity;
use crate::pool::{Pool, Slot};
use crate::scope::{self, Held, Scope, Scoped};

/// One slot of a request class, held for a whole response.
///
/// Clones share the same slot: it returns to its class's pool when the last
/// share is dropped, so pure work that outlives a cancelled request keeps the
/// slot until it ends.
///
/// # Examples
///
/// ```
/// use admission_core::{Class, RequestPools};
///
/// let requests = RequestPools::new(2, 4).unwrap();
/// let lease = requests.try_lease(Class::Work).unwrap();
/// let share = lease.clone();
/// drop(lease);
/// assert_eq!(requests.pool(Class::Work).stats().in_use, 1, "a share still holds the slot");
/// drop(share);
/// assert_eq!(requests.pool(Class::Work).stats().in_use, 0);
/// ```
#[must_use = "a lease is released as soon as it is dropped"]
#[clippy::has_significant_drop]
#[derive(Debug, Clone)]
pub struct Lease {
    share: Arc<Share>,
    /// Shared from the request's own scope rather than taken.
    inherited: bool,
}

/// The request's side of the lease: every `Lease` clone. Work that inherits
/// the lease holds the slot itself, not a `Share`, so that when the request
/// lets go while its work runs, the slot no longer counts as the request
/// task's (a wait of that task is not refused as reentrant: the work will
/// end).
#[derive(Debug)]
struct Share {
    slot: Arc<Slot>,
    /// The lease this one tops up, if any: a request already held `parent`
    /// when a route that costs more asked for the same pool (a costly route
    /// under a router-wide layer), so `slot` holds only the difference and
    /// this share keeps the parent's slots too, until it is dropped.
    parent: Option<Arc<Share>>,
    class: Class,
    /// When the lease was admitted, when its hold is timed. A timed hold
    /// (admission to release) is a sample of the class pool's work times,
    /// as a pool's finished work is: the class's hints, budget decisions
    /// and queue times come from how long its leases are held. The pool
    /// times a sample of its holds; an adaptive class's controller times
    /// every one, and the pool takes those too.
    admitted: Option<Instant>,
    adaptive: Option<Arc<Controller>>,
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Some(admitted) = self.admitted {
            self.slot.pool().work_times().held(admitted);
            if let Some(controller) = &self.adaptive {
                controller.ended(admitted);
            }
        }
        self.slot.detach();
    }
}

impl Lease {
    pub(crate) fn new(slot: Slot, class: Class, adaptive: Option<&Arc<Controller>>) -> Self {
        if let Some(controller) = adaptive {
            controller.admitted();
        }
        let timed = adaptive.is_some() || slot.pool().work_times().samples_hold();
        Lease {
            share: Arc::new(Share {
                admitted: timed.then(Instant::now),
                slot: Arc::new(slot),
                parent: None,
                class,
                adaptive: adaptive.map(Arc::clone),
            }),
            inherited: false,
        }
    }

    /// Whether the request already held this lease when it asked for it
    /// (an outer layer or handler scope took it; this one shares it), so
    /// that whoever took it first decides when the response lets it go.
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
    /// assert!(!lease.is_inherited());
    /// let again = lease.scope(async { requests.try_lease(Class::Work).unwrap() }).await;
    /// assert!(again.is_inherited(), "the same slot, not a second one");
    /// assert_eq!(requests.pool(Class::Work).stats().in_use, 1);
    /// # }
    /// ```
    pub fn is_inherited(&self) -> bool {
        self.inherited
    }

    /// The class this lease was taken from.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// assert_eq!(requests.try_lease(Class::Work).unwrap().class(), Class::Work);
    /// ```
    pub fn class(&self) -> Class {
        self.share.class
    }

    /// The lease as the task-local scope keeps it: its share, the `Arc`
    /// this clone already has, moved (entering a scope allocates nothing
    /// and changes no count).
    pub(crate) fn into_held(self) -> Held {
        self.share as Held
    }

    /// The lease a scope keeps as `held`, if it is one: a share of the
    /// request's lease, so [`is_inherited`](Self::is_inherited).
    pub(crate) fn from_held(held: &Held) -> Option<Lease> {
        Arc::clone(held)
            .downcast::<Share>()
            .ok()
            .map(|share| Lease {
                share,
                inherited: true,
            })
    }

    /// The pool the lease's slot belongs to.
    pub(crate) fn pool(&self) -> &Pool {
        self.share.slot.pool()
    }

    /// This lease's share and the shares it tops up, its own first.
    fn shares(&self) -> impl Iterator<Item = &Share> {
        std::iter::successors(Some(&*self.share), |share| share.parent.as_deref())
    }

    /// Shares of every slot the lease holds, for work that must hold them
    /// until it ends.
    pub(crate) fn share(&self) -> HeldCapacity {
        if self.share.parent.is_none() {
            return HeldCapacity::Shared(Arc::clone(&self.share.slot));
        }
        HeldCapacity::SharedSeveral(self.shares().map(|share| Arc::clone(&share.slot)).collect())
    }

    /// How many of its pool's slots the lease holds, top-ups included.
    fn cost(&self) -> u32 {
        self.shares().map(|share| share.slot.cost()).sum()
    }

    /// What `caller` must still take of the lease's pool to hold its cost
    /// under this lease: `None` when the lease holds at least that many
    /// slots (shared as it is), otherwise a caller for the difference.
    pub(crate) fn short_of(&self, caller: &Caller) -> Option<Caller> {
        let wanted = self.pool().cost_of(caller);
        let held = self.cost();
        let missing = u8::try_from(wanted.checked_sub(held)?).ok()?;
        Some(caller.with_cost(std::num::NonZeroU8::new(missing)?))
    }

    /// This lease with `slot` (of the same pool) on top: the lease a
    /// costlier route holds, released as its own when its response ends,
    /// while this one stays with whoever took it.
    pub(crate) fn topped_up(self, slot: Slot) -> Lease {
        debug_assert!(slot.pool().same_pool(self.pool()));
        Lease {
            share: Arc::new(Share {
                slot: Arc::new(slot),
                class: self.share.class,
                parent: Some(self.share),
                admitted: None,
                adaptive: None,
            }),
            inherited: false,
        }
    }

    /// The lease of `pool` the current task runs under, if any, as a
    /// request that already holds it gets it again: it takes no second
    /// slot of the same class.
    pub(crate) fn held_in(pool: &Pool) -> Option<Lease> {
        match context::current() {
            Context::Lease(lease) if lease.pool().same_pool(pool) => Some(lease),
            _ => None,
        }
    }

    /// The request lease the current task runs under, if any: a share of
    /// it, so [`is_inherited`](Self::is_inherited).
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
        match context::current() {
            Context::Lease(lease) => Some(lease),
            _ => None,
        }
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
        Scoped::part(Context::Lease(self).part(), future)
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
                context: Context::Lease(self).held(),
            },
            future,
        )
    }

    /// Runs the synchronous `call` with this lease as the context (an inner
    /// service's `call`, which may admit in turn), for adapters.
    #[doc(hidden)]
    pub fn scope_sync<R>(&self, call: impl FnOnce() -> R) -> R {
        scope::sync_scope_part(&Context::Lease(self.clone()).part(), call)
    }

    /// Runs the synchronous `call` under this lease and for `caller`, in one
    /// scope (an inner service's `call`), for adapters.
    #[doc(hidden)]
    pub fn scope_sync_for<R>(&self, caller: Caller, call: impl FnOnce() -> R) -> R {
        scope::sync_scope(
            Scope {
                caller,
                context: Context::Lease(self.clone()).held(),
            },
            call,
        )
    }
}
