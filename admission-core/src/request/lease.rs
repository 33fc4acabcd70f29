//! The request lease guard.
//!
//! This module owns [`Lease`]: one slot of a request class, shared by the
//! request and every piece of pure work it starts. It must never release the
//! slot while the request or any of its work still holds a share.

use std::sync::Arc;

use tokio::time::Instant;

use super::Class;
use super::adaptive::Controller;
use crate::pool::{Pool, Slot};

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
    class: Class,
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
    /// An adaptive class's controller, and when the lease was admitted:
    /// the lease's end is one of its samples.
    timed: Option<(Arc<Controller>, Instant)>,
}

impl Drop for Share {
    fn drop(&mut self) {
        self.slot.detach_shared();
        if let Some((controller, at)) = self.timed.take() {
            controller.ended(at);
        }
    }
}

impl Lease {
    pub(crate) fn new(slot: Slot, class: Class, adaptive: Option<&Arc<Controller>>) -> Self {
        let timed = adaptive.map(|controller| (Arc::clone(controller), controller.admitted()));
        Lease {
            share: Arc::new(Share {
                slot: Arc::new(slot),
                timed,
            }),
            class,
            inherited: false,
        }
    }

    /// This lease as a request that already holds it gets it again.
    pub(crate) fn inherited(&self) -> Self {
        Lease {
            inherited: true,
            ..self.clone()
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
        self.class
    }

    /// The pool the lease's slot belongs to.
    pub(crate) fn pool(&self) -> &Pool {
        self.share.slot.pool()
    }

    /// A share of the lease's slot, for work that must hold it until it ends.
    pub(crate) fn share(&self) -> Arc<Slot> {
        Arc::clone(&self.share.slot)
    }
}
