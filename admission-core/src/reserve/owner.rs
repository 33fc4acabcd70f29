//! The [`LoopOwner`] trait, implemented by hand or by `#[reserved]`.
//!
//! This module owns the trait only. It must never create reservations: the
//! implementor (or the macro) decides where the reservation lives.

use std::future::Future;

use super::Reservation;
use crate::pool::{HasPools, Pool};
use crate::request::Scoped;

/// A long-lived background owner (lifespan loop, consumer, dispatcher) with
/// its own reserved slots.
///
/// `#[reserved(slots = N)]` implements it with one reservation per type.
/// Implement it by hand when the size comes from configuration, e.g. a
/// dispatcher sized to the sum of its executors' capacities plus one.
///
/// # Examples
///
/// ```
/// use admission_core::{LoopOwner, Reservation};
///
/// struct NativeDispatcher { reservation: Reservation }
///
/// impl LoopOwner for NativeDispatcher {
///     fn reservation(&self) -> &Reservation { &self.reservation }
/// }
///
/// let capacities = [2, 3];
/// let dispatcher = NativeDispatcher {
///     reservation: Reservation::new("native", capacities.iter().sum::<usize>() + 1).unwrap(),
/// };
/// assert_eq!(dispatcher.reservation().pool().capacity(), 6);
/// ```
pub trait LoopOwner {
    /// The owner's reservation.
    fn reservation(&self) -> &Reservation;

    /// Runs `future` in the owner's execution scope; see
    /// [`Reservation::execution`].
    ///
    /// # Cancel safety
    ///
    /// As [`Reservation::execution`].
    fn execution<F: Future>(&self, future: F) -> Scoped<F> {
        self.reservation().execution(future)
    }
}

impl<O: LoopOwner + ?Sized> HasPools for O {
    fn each_pool(&self, each: &mut dyn FnMut(&Pool)) {
        each(self.reservation().pool());
    }
}
