//! The typed refusal every fail-fast or bounded admission returns.
//!
//! This module owns [`Refusal`] and its stable [`Code`]s. It must never
//! carry a user value (only the pool's configured name, the code and the
//! retry hint) and never know about HTTP: how a refusal is answered is
//! [`http`](crate::http)'s and the adapters' business.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use crate::caller::Criticality;

/// A stable, documented reason for a refusal.
///
/// The string forms (`ADMISSION_…`) are part of the public contract: logs,
/// dashboards and clients may match on them.
///
/// # Examples
///
/// ```
/// use admission_core::Code;
///
/// assert_eq!(Code::Saturated.as_str(), "ADMISSION_SATURATED");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// `ADMISSION_SATURATED`: every slot of the pool is in use and the caller
    /// asked to fail fast.
    Saturated,
    /// `ADMISSION_LEASE_UNAVAILABLE`: pure work outside any request lease
    /// needed a fresh lease and its class had none free.
    LeaseUnavailable,
    /// `ADMISSION_RESERVATION_EXHAUSTED`: every slot of a loop owner's
    /// reservation is held (by running or orphaned calls).
    ReservationExhausted,
    /// `ADMISSION_WAIT_TIMEOUT`: a bounded wait for a slot ran out.
    WaitTimedOut,
    /// `ADMISSION_SHUTTING_DOWN`: the pool has been closed by shutdown.
    ShuttingDown,
    /// `ADMISSION_REENTRANT`: a task that holds every slot of a pool asked
    /// to wait for another, a wait that could never end.
    ///
    /// A programming error in the caller, not overload: the only code for
    /// which [`is_overload`](Self::is_overload) is `false`. The pool counts
    /// it in [`PoolStats::reentrant`](crate::stats::PoolStats::reentrant),
    /// not in `refused`, and logs it at `ERROR` once per call site; the
    /// adapters answer it as a server error (HTTP 500, gRPC
    /// `FAILED_PRECONDITION`), never with a `Retry-After`.
    Reentrant,
    /// `ADMISSION_BUDGET_TOO_SHORT`: the caller's deadline leaves less time
    /// than the expected wait plus the pool's typical work; admitting it
    /// would only make an orphan.
    BudgetTooShort,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 7] = [
        Code::Saturated,
        Code::LeaseUnavailable,
        Code::ReservationExhausted,
        Code::WaitTimedOut,
        Code::ShuttingDown,
        Code::Reentrant,
        Code::BudgetTooShort,
    ];

    /// Whether this code says the service is overloaded (or closing) and
    /// the caller may retry later, as every code but
    /// [`Reentrant`](Self::Reentrant) does; `false` for a programming error,
    /// which a retry would only repeat.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Code;
    ///
    /// assert!(Code::Saturated.is_overload());
    /// assert!(Code::ShuttingDown.is_overload());
    /// assert!(!Code::Reentrant.is_overload());
    /// ```
    pub const fn is_overload(self) -> bool {
        match self {
            Code::Saturated
            | Code::LeaseUnavailable
            | Code::ReservationExhausted
            | Code::WaitTimedOut
            | Code::ShuttingDown
            | Code::BudgetTooShort => true,
            Code::Reentrant => false,
        }
    }

    /// The stable string form.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Saturated => "ADMISSION_SATURATED",
            Code::LeaseUnavailable => "ADMISSION_LEASE_UNAVAILABLE",
            Code::ReservationExhausted => "ADMISSION_RESERVATION_EXHAUSTED",
            Code::WaitTimedOut => "ADMISSION_WAIT_TIMEOUT",
            Code::ShuttingDown => "ADMISSION_SHUTTING_DOWN",
            Code::Reentrant => "ADMISSION_REENTRANT",
            Code::BudgetTooShort => "ADMISSION_BUDGET_TOO_SHORT",
        }
    }

    /// The short class name used in logs, e.g. `Saturated`.
    pub const fn class(self) -> &'static str {
        match self {
            Code::Saturated => "Saturated",
            Code::LeaseUnavailable => "LeaseUnavailable",
            Code::ReservationExhausted => "ReservationExhausted",
            Code::WaitTimedOut => "WaitTimedOut",
            Code::ShuttingDown => "ShuttingDown",
            Code::Reentrant => "Reentrant",
            Code::BudgetTooShort => "BudgetTooShort",
        }
    }

    /// The problem title sent in refusal bodies.
    pub const fn title(self) -> &'static str {
        match self {
            Code::Saturated => "Capacity exhausted",
            Code::LeaseUnavailable => "No request lease available",
            Code::ReservationExhausted => "Reservation exhausted",
            Code::WaitTimedOut => "Timed out waiting for capacity",
            Code::ShuttingDown => "Shutting down",
            Code::Reentrant => "Waiting on a slot the caller holds",
            Code::BudgetTooShort => "Not enough time left for the work",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Work was not admitted: which pool, why, and when to try again.
///
/// A refusal is cheap to build (no allocation, no reference count: the pool
/// name is interned) and
/// carries no user value, so it is safe to log and to send to clients.
///
/// # Examples
///
/// ```
/// use admission_core::{Code, Pool};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refusal = pool.try_admit().unwrap_err();
/// assert_eq!(refusal.code(), Code::Saturated);
/// assert_eq!(refusal.pool(), "registry");
/// assert!(refusal.retry_after_secs() >= 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pool: &'static str,
    code: Code,
    criticality: Criticality,
    retry_after_secs: u32,
}

impl Refusal {
    pub(crate) fn new(
        pool: &'static str,
        code: Code,
        criticality: Criticality,
        retry_after_secs: u32,
    ) -> Self {
        Self {
            pool,
            code,
            criticality,
            retry_after_secs: retry_after_secs.max(1),
        }
    }

    /// The criticality of the caller that was refused.
    pub fn criticality(&self) -> Criticality {
        self.criticality
    }

    /// The name of the pool (or reservation, or request class) that refused.
    pub fn pool(&self) -> &'static str {
        self.pool
    }

    /// The stable code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// Whether the refusal is for overload (or shutdown), so the caller
    /// may retry later: [`Code::is_overload`] of its code. `false` for
    /// [`Code::Reentrant`], a programming error.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// assert!(pool.try_admit().unwrap_err().is_overload());
    /// ```
    pub fn is_overload(&self) -> bool {
        self.code.is_overload()
    }

    /// The retry hint in whole seconds, at least 1.
    pub fn retry_after_secs(&self) -> u32 {
        self.retry_after_secs
    }

    /// The retry hint as a [`Duration`].
    pub fn retry_after(&self) -> Duration {
        Duration::from_secs(u64::from(self.retry_after_secs))
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pool `{}` refused work ({}); retry in {} s",
            self.pool, self.code, self.retry_after_secs
        )
    }
}

impl std::error::Error for Refusal {}

/// Interns a pool name: one leaked copy per distinct name for the life of
/// the process, so a refusal carries its pool's name with no allocation and
/// no reference count. Pool names are a small, fixed set of configured
/// strings; creating pools with ever new names would grow this set.
pub(crate) fn intern(name: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&interned) = names.get(name.as_str()) {
        return interned;
    }
    let interned: &'static str = Box::leak(name.into_boxed_str());
    names.insert(interned);
    interned
}
