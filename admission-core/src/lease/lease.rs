//! The request lease guard.
//!
//! This module owns [`Lease`]: one slot of a request class, shared by the
//! request and every piece of pure work it starts. It must never release the
//! slot while the request or any of its work still holds a share.

use std::future::Future;
use std::sync::Arc;

use super::Class;
use crate::context::{Context, Scoped};
use crate::pool::Slot;
use crate::work::{self, RegistryWork, WorkFuture};

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
    pub fn class(&self) -> Class {
        self.class
    }

    /// Runs `future` with this lease as the task's context, so that pure work
    /// inside it ([`RequestPools::execute_pure`](super::RequestPools::execute_pure))
    /// runs under the lease and takes no second slot. The scope holds a share
    /// of the lease until the future is dropped.
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

    /// Runs `work` on the lease's class threads with a share of the lease
    /// moved into it.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future does not cancel the work; its share of
    /// the lease is held until the work ends.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Class, RequestPools};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let requests = RequestPools::new(1, 1).unwrap();
    /// let lease = requests.try_lease(Class::Control).unwrap();
    /// assert_eq!(lease.offload(|| Ok::<_, std::fmt::Error>(1)).await, Ok(1));
    /// # }
    /// ```
    pub fn offload<W: RegistryWork>(&self, work: W) -> WorkFuture<W::Output, W::Error> {
        work::offload_holding(
            Arc::clone(&self.slot.pool),
            work::Hold::Lease(self.clone()),
            work,
        )
    }
}
