//! The background loop owners of incident 3, each with reserved slots.
//!
//! This module owns the owner types and their sizes. It must never share a
//! reservation between owners nor size one without its spare: every
//! reservation is the owner's concurrent calls plus one.

use admission_core::{ConfigError, LoopOwner, Reservation, reserved};

use super::NativeCapacities;

/// Concurrent consumer turns the broker consumer may run, at most: the
/// incident's `max_clients - 1` with `max_clients <= 8`.
pub const BROKER_MAX_TURNS: usize = 7;

/// Consumer turns run concurrently in each broker cycle.
pub const BROKER_TURNS_PER_CYCLE: usize = 4;

/// The broker consumer's reservation: its most concurrent turns plus one
/// spare.
pub const BROKER_SLOTS: usize = BROKER_MAX_TURNS + 1;

const _: () = assert!(
    BROKER_TURNS_PER_CYCLE <= BROKER_MAX_TURNS,
    "a broker cycle runs no more turns than the reservation leaves room for"
);

/// The tenant recovery loop: expired and retry quanta (work transitions)
/// and timed-out deadlines (control transitions), one call at a time, so two
/// slots: one for the call, one spare.
///
/// # Examples
///
/// ```
/// use admission_core::LoopOwner;
/// use admission_examples::workflow::RecoveryLoop;
///
/// assert_eq!(RecoveryLoop.reservation().name(), "recovery");
/// assert_eq!(RecoveryLoop.reservation().pool().capacity(), 2);
/// ```
#[reserved(slots = 2, name = "recovery")]
#[derive(Debug, Clone, Copy, Default)]
pub struct RecoveryLoop;

/// The provider and email receipt loop: one settlement at a time, so two
/// slots.
#[reserved(slots = 2, name = "provider")]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProviderLoop;

/// The broker consumer: up to [`BROKER_MAX_TURNS`] concurrent turns, each
/// delivering one record, so [`BROKER_SLOTS`] slots.
#[reserved(slots = BROKER_SLOTS, name = "broker")]
#[derive(Debug, Clone, Copy, Default)]
pub struct BrokerConsumer;

/// The native connector dispatcher, sized from configuration: the sum of its
/// executors' capacities plus one spare, so the operator's configured
/// capacity is the ceiling rather than the request pools'.
///
/// # Examples
///
/// ```
/// use admission_core::LoopOwner;
/// use admission_examples::workflow::NativeDispatcher;
///
/// let dispatcher = NativeDispatcher::new("2,3".parse().unwrap()).unwrap();
/// assert_eq!(dispatcher.reservation().name(), "native");
/// assert_eq!(dispatcher.reservation().pool().capacity(), 2 + 3 + 1);
/// ```
#[derive(Debug, Clone)]
pub struct NativeDispatcher {
    reservation: Reservation,
    capacities: NativeCapacities,
}

impl NativeDispatcher {
    /// A dispatcher for executors of these capacities.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when the capacities add up to more than
    /// [`MAX_CAPACITY`](admission_core::pool::MAX_CAPACITY) (minus the spare), or
    /// the worker threads cannot be started.
    pub fn new(capacities: NativeCapacities) -> Result<NativeDispatcher, ConfigError> {
        let slots = capacities.total().saturating_add(1);
        Ok(NativeDispatcher {
            reservation: Reservation::new("native", slots)?,
            capacities,
        })
    }

    /// The executors' capacities.
    pub fn capacities(&self) -> &NativeCapacities {
        &self.capacities
    }
}

impl LoopOwner for NativeDispatcher {
    fn reservation(&self) -> &Reservation {
        &self.reservation
    }
}
