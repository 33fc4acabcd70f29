//! Configuration errors: what is wrong with a pool, a reservation or a
//! shutdown setting, reported where the object is built.
//!
//! This module owns [`ConfigError`]. It must never be returned from a request
//! path: every check it names runs at construction.

use std::fmt;

/// The largest number of slots (and worker threads) one pool may have.
pub const MAX_CAPACITY: usize = 4096;

/// A configuration value out of range, reported when the object is built.
///
/// # Examples
///
/// ```
/// use admission_core::{ConfigError, Pool};
///
/// let err = Pool::new("registry", 0).unwrap_err();
/// assert_eq!(err, ConfigError::ZeroCapacity { pool: "registry".into() });
/// assert_eq!(err.to_string(), "pool `registry` has capacity 0: give it at least 1 slot");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A pool or reservation was given no slots.
    ZeroCapacity {
        /// The pool's name.
        pool: String,
    },
    /// A pool or reservation was given more slots than [`MAX_CAPACITY`].
    CapacityTooLarge {
        /// The pool's name.
        pool: String,
        /// The capacity asked for.
        capacity: usize,
    },
    /// A pool was given an empty name.
    EmptyName,
    /// A retry hint (fixed value or cap) below one millisecond.
    RetryHintTooSmall {
        /// The pool's name.
        pool: String,
    },
    /// A shutdown deadline of zero length.
    ZeroDeadline,
    /// A coalescing staleness bound of zero.
    ZeroStaleness {
        /// The pool's name.
        pool: String,
    },
    /// A reservation was given no slots.
    ZeroSlots {
        /// The reservation's name.
        reservation: String,
    },
    /// A reservation was given more slots than [`MAX_CAPACITY`].
    TooManySlots {
        /// The reservation's name.
        reservation: String,
        /// The slots asked for.
        slots: usize,
    },
    /// Process-wide request pools were already installed (or created by a
    /// first use of `RequestPools::global`).
    GlobalAlreadySet,
    /// A criticality's share is 0, above a more critical level's, or the
    /// critical share is not 100.
    ShareOutOfRange {
        /// The pool's name.
        pool: String,
        /// The level whose share is wrong.
        criticality: crate::Criticality,
        /// The share asked for, in percent.
        percent: u8,
    },
    /// A queue policy with no room (bound 0), a zero target, or a target
    /// longer than its interval.
    BadQueue {
        /// The pool's name.
        pool: String,
    },
    /// An adaptive limit with a floor of 0, a floor above its ceiling, a
    /// ceiling above [`MAX_CAPACITY`], an initial limit outside them, or a
    /// zero window or timeout.
    BadAdaptiveLimit {
        /// The pool's name.
        pool: String,
    },
    /// A live limit of 0, or above the pool's capacity
    /// ([`Pool::set_limit`](crate::Pool::set_limit)).
    LimitOutOfRange {
        /// The pool's name.
        pool: String,
        /// The limit asked for.
        limit: usize,
        /// The pool's capacity.
        capacity: usize,
    },
    /// A live limit asked of an adaptive class, whose controller moves its
    /// limit itself.
    AdaptiveLimit {
        /// The pool's name.
        pool: String,
    },
    /// A setting that must be above zero was given as zero: a progress
    /// bound (which would end every body whose reader is not already
    /// waiting) or a connection limit of the HTTP adapters.
    ZeroSetting {
        /// The setting at fault, as its builder method is named.
        setting: &'static str,
    },
    /// A trace asked to keep more entries than it may.
    TooManyEntries {
        /// The entries asked for.
        entries: usize,
        /// The most allowed.
        max: usize,
    },
    /// A pool asked to record into a second trace.
    AlreadyTraced {
        /// The pool's name.
        pool: String,
    },
    /// A cost declared for a pool's or a class's admissions
    /// ([`Caller::with_cost`](crate::Caller::with_cost)) above the capacity
    /// it was built with: each such admission would take the whole pool
    /// ([`Pool::check_cost`](crate::Pool::check_cost),
    /// [`RequestPools::check_cost`](crate::RequestPools::check_cost)).
    CostAboveCapacity {
        /// The pool's name.
        pool: String,
        /// The cost declared.
        cost: u8,
        /// The pool's capacity.
        capacity: usize,
    },
    /// A client's retry budget out of bounds (`admission-client`).
    BadRetryBudget {
        /// What is out of bounds.
        reason: &'static str,
    },
    /// A client's adaptive throttle out of bounds (`admission-client`).
    BadThrottle {
        /// What is out of bounds.
        reason: &'static str,
    },
    /// A client's retry policy out of bounds (`admission-client`).
    BadRetryPolicy {
        /// What is out of bounds.
        reason: &'static str,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCapacity { pool } => {
                write!(f, "pool `{pool}` has capacity 0: give it at least 1 slot")
            }
            Self::CapacityTooLarge { pool, capacity } => write!(
                f,
                "pool `{pool}` has capacity {capacity}: at most {MAX_CAPACITY} slots are allowed"
            ),
            Self::EmptyName => f.write_str("pool name is empty: name every pool"),
            Self::RetryHintTooSmall { pool } => write!(
                f,
                "pool `{pool}` has a retry hint below 1 ms: give it at least 1 ms"
            ),
            Self::ZeroDeadline => {
                f.write_str("shutdown deadline is zero: give the drain some time, e.g. 5 s")
            }
            Self::ZeroStaleness { pool } => write!(
                f,
                "coalescing on pool `{pool}` has a staleness bound of 0: nothing could join; \
                 leave coalescing off or give a bound such as 1 s"
            ),
            Self::ZeroSlots { reservation } => write!(
                f,
                "reservation `{reservation}` has 0 slots: size it as the owner's concurrent \
                 calls plus one spare"
            ),
            Self::TooManySlots { reservation, slots } => write!(
                f,
                "reservation `{reservation}` has {slots} slots: at most {MAX_CAPACITY} are allowed"
            ),
            Self::GlobalAlreadySet => f.write_str(
                "global request pools are already set: call `install_global` once, at startup, \
                 before the first request",
            ),
            Self::ShareOutOfRange {
                pool,
                criticality,
                percent,
            } => write!(
                f,
                "pool `{pool}` gives {criticality} work {percent}% of its slots: give each level \
                 1 to 100%, no more than a more critical level, and critical 100%"
            ),
            Self::BadQueue { pool } => write!(
                f,
                "pool `{pool}` has a queue policy with bound 0, a zero target, or a target longer \
                 than its interval"
            ),
            Self::BadAdaptiveLimit { pool } => write!(
                f,
                "pool `{pool}` has an adaptive limit with floor 0, floor above ceiling, ceiling \
                 above {MAX_CAPACITY}, an initial limit outside them, or a zero window or timeout"
            ),
            Self::LimitOutOfRange {
                pool,
                limit,
                capacity,
            } => write!(
                f,
                "pool `{pool}` cannot take a limit of {limit}: give it 1 to its capacity, {capacity}"
            ),
            Self::AdaptiveLimit { pool } => write!(
                f,
                "pool `{pool}` is an adaptive class: its controller moves its limit between the \
                 floor and the ceiling it was built with"
            ),
            Self::ZeroSetting { setting } => write!(f, "`{setting}` must be above zero"),
            Self::TooManyEntries { entries, max } => {
                write!(f, "a trace of {entries} entries: at most {max} are allowed")
            }
            Self::BadRetryBudget { reason } => write!(f, "retry budget: {reason}"),
            Self::BadThrottle { reason } => write!(f, "adaptive throttle: {reason}"),
            Self::BadRetryPolicy { reason } => write!(f, "retry policy: {reason}"),
            Self::AlreadyTraced { pool } => write!(
                f,
                "pool `{pool}` already records into a trace: a pool records into one for its life"
            ),
            Self::CostAboveCapacity {
                pool,
                cost,
                capacity,
            } => write!(
                f,
                "a cost of {cost} is above pool `{pool}`'s capacity, {capacity}: \
                 declare at most {capacity} or build the pool larger"
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// The same error, worded for a reservation built on a pool.
    pub(crate) fn for_reservation(self) -> ConfigError {
        match self {
            ConfigError::ZeroCapacity { pool } => ConfigError::ZeroSlots { reservation: pool },
            ConfigError::CapacityTooLarge { pool, capacity } => ConfigError::TooManySlots {
                reservation: pool,
                slots: capacity,
            },
            other => other,
        }
    }
}
