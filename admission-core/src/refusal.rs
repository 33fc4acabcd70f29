//! The typed refusal every fail-fast or bounded admission returns.
//!
//! This module owns [`Refusal`] and its stable [`Code`]s, and the one
//! rendering of a refusal as an RFC 9457 problem body that both web adapters
//! send. It must never carry a user value: only the pool's configured name,
//! the code and the retry hint.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

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
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 5] = [
        Code::Saturated,
        Code::LeaseUnavailable,
        Code::ReservationExhausted,
        Code::WaitTimedOut,
        Code::ShuttingDown,
    ];

    /// The stable string form.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::Saturated => "ADMISSION_SATURATED",
            Code::LeaseUnavailable => "ADMISSION_LEASE_UNAVAILABLE",
            Code::ReservationExhausted => "ADMISSION_RESERVATION_EXHAUSTED",
            Code::WaitTimedOut => "ADMISSION_WAIT_TIMEOUT",
            Code::ShuttingDown => "ADMISSION_SHUTTING_DOWN",
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
    retry_after_secs: u32,
    status: u16,
}

impl Refusal {
    pub(crate) fn new(pool: &'static str, code: Code, retry_after_secs: u32, status: u16) -> Self {
        Self {
            pool,
            code,
            retry_after_secs: retry_after_secs.max(1),
            status,
        }
    }

    /// The HTTP status adapters answer with: `503` unless the pool was built
    /// with [`PoolBuilder::refusal_status`](crate::PoolBuilder::refusal_status).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// The name of the pool (or reservation, or request class) that refused.
    pub fn pool(&self) -> &'static str {
        self.pool
    }

    /// The stable code.
    pub fn code(&self) -> Code {
        self.code
    }

    /// The retry hint in whole seconds, at least 1.
    pub fn retry_after_secs(&self) -> u32 {
        self.retry_after_secs
    }

    /// The retry hint as a [`Duration`].
    pub fn retry_after(&self) -> Duration {
        Duration::from_secs(u64::from(self.retry_after_secs))
    }

    /// The RFC 9457 `application/problem+json` body both adapters send.
    ///
    /// It names the code, the pool and the retry hint, and nothing else.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let body = pool.try_admit().unwrap_err().problem_json();
    /// assert!(body.contains(r#""code":"ADMISSION_SATURATED""#));
    /// assert!(body.contains(r#""pool":"registry""#));
    /// ```
    pub fn problem_json(&self) -> String {
        let status = self.status;
        serde_json::json!({
            "type": format!("urn:admission:{}", self.code.as_str()),
            "title": self.code.title(),
            "status": status,
            "detail": format!(
                "pool `{}` refused the request; retry in {} s",
                self.pool, self.retry_after_secs
            ),
            "code": self.code.as_str(),
            "pool": self.pool,
            "retry_after": self.retry_after_secs,
        })
        .to_string()
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

/// The media type of [`Refusal::problem_json`].
pub const PROBLEM_JSON: &str = "application/problem+json";
