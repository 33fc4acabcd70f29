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
        use std::fmt::Write as _;
        // Written by hand (keys in the order serde_json would sort them):
        // this runs for every refused request, and every value but the
        // pool's name is a static, JSON-safe string.
        let mut body = String::with_capacity(256 + 2 * self.pool.len());
        let code = self.code.as_str();
        body.push_str("{\"code\":\"");
        body.push_str(code);
        body.push_str("\",\"detail\":");
        push_json_string(
            &mut body,
            &format!(
                "pool `{}` refused the request; retry in {} s",
                self.pool, self.retry_after_secs
            ),
        );
        body.push_str(",\"pool\":");
        push_json_string(&mut body, self.pool);
        let _ = write!(
            body,
            ",\"retry_after\":{},\"status\":{},\"title\":\"{}\",\"type\":\"urn:admission:{code}\"}}",
            self.retry_after_secs,
            self.status,
            self.code.title(),
        );
        body
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

/// Appends `value` as a JSON string: as is when nothing needs escaping (the
/// usual pool name), through `serde_json` otherwise.
fn push_json_string(out: &mut String, value: &str) {
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(value);
        out.push('"');
    } else {
        out.push_str(&serde_json::Value::from(value).to_string());
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_problem_body_is_valid_json_with_every_field() {
        for name in ["registry", "we\"ird\\name\n"] {
            let refusal = Refusal::new(intern(name.to_owned()), Code::Saturated, 3, 429);
            let body: serde_json::Value = serde_json::from_str(&refusal.problem_json()).unwrap();
            assert_eq!(body["pool"], name);
            assert_eq!(body["code"], "ADMISSION_SATURATED");
            assert_eq!(body["retry_after"], 3);
            assert_eq!(body["status"], 429);
            assert_eq!(body["title"], "Capacity exhausted");
            assert_eq!(body["type"], "urn:admission:ADMISSION_SATURATED");
            assert!(body["detail"].as_str().unwrap().contains("retry in 3 s"));
            assert_eq!(body.as_object().unwrap().len(), 7);
        }
    }
}
