//! The slot guard: ownership of one unit of a pool's capacity.
//!
//! This module owns [`Slot`]. A slot returns to its pool exactly once, when
//! the guard is dropped; it must never be released by anything else.

use super::job::{HeldCapacity, Job};
use super::permits::SlotId;
use super::{Pool, RegistryWork, WorkFuture};

/// One admitted unit of a pool's capacity.
///
/// Dropping the slot returns it to the pool. Move it into the work with
/// [`offload`](Self::offload) so that it is released when the work ends
/// (returns, errors or panics), not when the caller stops waiting.
///
/// This is the low-level form: most callers want [`Pool::run`], which admits
/// and offloads in one call.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let slot = pool.try_admit().unwrap();
/// let walk = slot.offload(|| Ok::<_, std::fmt::Error>(42));
/// assert_eq!(walk.await.unwrap(), 42);
/// assert_eq!(pool.stats().in_use, 0, "the slot came back when the work ended");
/// # }
/// ```
#[must_use = "a slot is released as soon as it is dropped"]
#[clippy::has_significant_drop]
#[derive(Debug)]
pub struct Slot {
    pool: Pool,
    /// Which of the pool's slots this is: its entry in the holder table,
    /// and its number on the free list once it returns.
    id: SlotId,
}

impl Slot {
    #[inline]
    pub(crate) fn new(pool: Pool, id: SlotId) -> Self {
        Slot { pool, id }
    }

    /// The name of the pool this slot belongs to.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// assert_eq!(pool.try_admit().unwrap().pool_name(), "registry");
    /// ```
    pub fn pool_name(&self) -> &str {
        self.pool.name()
    }

    /// The pool this slot belongs to.
    pub(crate) fn pool(&self) -> &Pool {
        &self.pool
    }

    /// How many of the pool's slots this admission holds (its caller's
    /// cost, clamped to the capacity).
    pub(crate) fn cost(&self) -> u32 {
        self.id.cost()
    }

    /// No task holds this slot any more: it moved into work, or it is
    /// shared with running work whose last task-side holder let go.
    pub(crate) fn detach(&self) {
        self.pool.forget_holder(self.id);
    }

    /// Runs `work` on one of the pool's worker threads, with this slot moved
    /// into it, and returns a future for its result.
    ///
    /// The work starts at once, whether or not the future is polled.
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future does **not** cancel the work: it runs to
    /// its end and its slot stays held until then. An orphan that fails is
    /// reported once, with a `tracing` event (fields `pool` and `class`) and
    /// the pool's `orphan_failures` counter.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let (tx, rx) = std::sync::mpsc::channel::<()>();
    /// let walk = pool.try_admit().unwrap().offload(move || rx.recv().map(|()| "done"));
    /// drop(walk); // the caller went away
    /// assert!(pool.try_admit().is_err(), "the orphan still holds its slot");
    /// tx.send(()).unwrap();
    /// # while pool.stats().in_use != 0 { tokio::task::yield_now().await; }
    /// assert_eq!(pool.stats().orphaned, 1);
    /// # }
    /// ```
    pub fn offload<W: RegistryWork>(self, work: W) -> WorkFuture<W::Output, W::Error> {
        let pool = self.pool.clone();
        Job::new(pool, HeldCapacity::Slot(self), work).spawn()
    }
}

impl Drop for Slot {
    #[inline]
    fn drop(&mut self) {
        self.pool.release(self.id);
    }
}

#[cfg(test)]
mod tests {
    /// A slot or a refusal is two words: an admission's result comes back
    /// in registers, never through memory the caller must read back.
    #[test]
    fn an_admissions_result_is_two_words() {
        assert_eq!(size_of::<Result<super::Slot, crate::Refusal>>(), 16);
    }
}
