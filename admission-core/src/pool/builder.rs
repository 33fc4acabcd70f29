//! Construction of pools with every setting checked up front.
//!
//! This module owns [`PoolBuilder`]. It must never let a pool exist with a
//! setting out of range: every check runs in [`PoolBuilder::build`].

use super::gate::Kind;
use super::{Pool, RetryHint};
use crate::error::ConfigError;

/// Builds a [`Pool`]; every setting is checked in [`build`](Self::build).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::ConfigError;
/// use admission_core::pool::{Pool, RetryHint};
///
/// let pool = Pool::builder("registry")
///     .capacity(2)
///     .retry_hint(RetryHint::Observed { cap: Duration::from_secs(10) })
///     .build()
///     .unwrap();
/// assert_eq!(pool.capacity(), 2);
///
/// let err = Pool::builder("registry")
///     .capacity(2)
///     .retry_hint(RetryHint::Fixed(Duration::from_millis(10)))
///     .build()
///     .unwrap_err();
/// assert!(matches!(err, ConfigError::RetryHintTooSmall { .. }));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct PoolBuilder {
    name: String,
    capacity: usize,
    retry: RetryHint,
}

impl PoolBuilder {
    pub(crate) fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            capacity: 1,
            retry: RetryHint::default(),
        }
    }

    /// The number of slots and worker threads (default 1).
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// How refusals compute `Retry-After` (default: observed, capped at 30 s).
    pub fn retry_hint(mut self, retry: RetryHint) -> Self {
        self.retry = retry;
        self
    }

    /// Builds the pool and starts its worker threads.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] for an empty name, a capacity of 0 or above
    /// [`MAX_CAPACITY`](crate::pool::MAX_CAPACITY), or a retry hint below
    /// 1 s.
    pub fn build(self) -> Result<Pool, ConfigError> {
        Pool::from_parts(self.name, self.capacity, self.retry, Kind::Pool)
    }

    /// Builds the pool behind a loop owner's reservation.
    pub(crate) fn build_reservation(self) -> Result<Pool, ConfigError> {
        Pool::from_parts(self.name, self.capacity, self.retry, Kind::Reservation)
    }
}
