//! The request lease guard.
//!
//! This module owns [`Lease`]: one slot of a request class, shared by the
//! request and every piece of pure work it starts. It must never release the
//! slot while the request or any of its work still holds a share.

use std::sync::Arc;

use super::Class;
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
    slot: Arc<Slot>,
    class: Class,
}

impl Lease {
    pub(crate) fn new(slot: Slot, class: Class) -> Self {
        Lease {
            slot: Arc::new(slot),
            class,
        }
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
        self.slot.pool()
    }

    /// A share of the lease's slot, for work that must hold it until it ends.
    pub(crate) fn share(&self) -> Arc<Slot> {
        Arc::clone(&self.slot)
    }
}
