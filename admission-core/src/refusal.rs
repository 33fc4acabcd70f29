//! The typed refusal every fail-fast or bounded admission returns.
//!
//! This module owns [`Refusal`] and its stable [`Code`]s. It must never
//! carry a user value (only the pool's configured name, the code and the
//! retry hint) and never know about HTTP: how a refusal is answered is
//! `admission-http`'s and the adapters' business.

use std::collections::HashMap;
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
    /// not in `refused`, and logs it at `ERROR` once per call site. It is
    /// meant to be answered as a server error (HTTP 500, gRPC
    /// `INTERNAL`, as admission-http answers it), not as overload with a `Retry-After`.
    Reentrant,
    /// `ADMISSION_BUDGET_TOO_SHORT`: the caller's deadline leaves less time
    /// than the expected wait plus the pool's typical work; admitting it
    /// would only make an orphan.
    BudgetTooShort,
    /// `ADMISSION_FLOW_SHARE`: the caller's flow ([`Caller::with_flow`](crate::Caller::with_flow))
    /// holds at least its fair share of a contended pool, and the slot is
    /// left for a flow under its share (or none is free). Overload of the
    /// caller's own making: another flow of the same pool may be admitted.
    FlowShare,
}

impl Code {
    /// Every code, in declaration order.
    pub const ALL: [Code; 8] = [
        Code::Saturated,
        Code::LeaseUnavailable,
        Code::ReservationExhausted,
        Code::WaitTimedOut,
        Code::ShuttingDown,
        Code::Reentrant,
        Code::BudgetTooShort,
        Code::FlowShare,
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
            | Code::BudgetTooShort
            | Code::FlowShare => true,
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
            Code::FlowShare => "ADMISSION_FLOW_SHARE",
        }
    }

    /// The short class name used in logs, e.g. `Saturated` (not a request
    /// [`Class`](crate::Class): a name for the `class` field of a log event).
    pub const fn log_class(self) -> &'static str {
        match self {
            Code::Saturated => "Saturated",
            Code::LeaseUnavailable => "LeaseUnavailable",
            Code::ReservationExhausted => "ReservationExhausted",
            Code::WaitTimedOut => "WaitTimedOut",
            Code::ShuttingDown => "ShuttingDown",
            Code::Reentrant => "Reentrant",
            Code::BudgetTooShort => "BudgetTooShort",
            Code::FlowShare => "FlowShare",
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
/// name is interned, and the refusal is one word: with a slot, two,
/// returned in registers) and
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
    pool: PoolName,
    code: Code,
    criticality: Criticality,
    retry_after_ms: u32,
}

impl Refusal {
    /// A refusal from the pool named `pool` (interned by [`intern`]); the
    /// pools themselves build theirs with [`for_pool`](Self::for_pool).
    #[cfg_attr(not(test), expect(dead_code, reason = "the pools use for_pool"))]
    pub(crate) fn new(
        pool: &'static str,
        code: Code,
        criticality: Criticality,
        retry_after_secs: u32,
    ) -> Self {
        Self::for_pool(
            intern_name(pool.to_owned()),
            code,
            criticality,
            retry_after_secs.saturating_mul(1000),
        )
    }

    /// A refusal from the pool whose interned name is `pool`, with a hint
    /// in milliseconds.
    #[inline]
    pub(crate) fn for_pool(
        pool: PoolName,
        code: Code,
        criticality: Criticality,
        retry_after_ms: u32,
    ) -> Self {
        Self {
            pool,
            code,
            criticality,
            retry_after_ms: retry_after_ms.max(1),
        }
    }

    /// The criticality of the caller that was refused.
    pub fn criticality(&self) -> Criticality {
        self.criticality
    }

    /// The name of the pool (or reservation, or request class) that refused.
    pub fn pool(&self) -> &'static str {
        self.pool.as_str()
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

    /// The retry hint in whole seconds, at least 1
    /// ([`retry_after_millis`](Self::retry_after_millis) rounded up).
    pub fn retry_after_secs(&self) -> u32 {
        Self::whole_secs(self.retry_after_ms)
    }

    /// A hint of `millis` milliseconds in whole seconds: rounded up, at
    /// least 1 (the engine's own figures; the wire rounds in
    /// `admission-http`).
    #[inline]
    #[must_use]
    pub(crate) const fn whole_secs(millis: u32) -> u32 {
        let secs = millis.div_ceil(1000);
        if secs == 0 { 1 } else { secs }
    }

    /// The retry hint as a [`Duration`] of whole seconds.
    pub fn retry_after(&self) -> Duration {
        Duration::from_secs(u64::from(self.retry_after_secs()))
    }

    /// The retry hint in milliseconds, at least 1: the pool's expected
    /// time until a slot frees, before it is rounded up to the seconds of
    /// `Retry-After`. A pool whose work takes 20 ms says about 20 here and
    /// 1 in `Retry-After`; a pool that has seen no work yet says 1000. The
    /// HTTP adapters send it as `x-admission-retry-after-ms`, the gRPC one
    /// as `grpc-retry-pushback-ms`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    ///
    /// let pool = Pool::new("registry", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let refusal = pool.try_admit().unwrap_err();
    /// assert_eq!(refusal.retry_after_millis(), 1000, "no work seen yet: 1 s");
    /// assert_eq!(refusal.retry_after_secs(), 1);
    /// ```
    pub fn retry_after_millis(&self) -> u32 {
        self.retry_after_ms
    }

    /// The same refusal with another millisecond hint (at least 1).
    pub(crate) fn with_retry_after_millis(self, millis: u32) -> Refusal {
        Refusal {
            retry_after_ms: millis.max(1),
            ..self
        }
    }
}

impl Refusal {
    /// The refusal in `error` or anywhere down its
    /// [`source`](std::error::Error::source) chain: the one call that
    /// answers "was this refused?" for an app's own error, however many of
    /// its enums wrap the refusal (a [`WorkError`](crate::WorkError) gives
    /// its refusal as its source).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::error::Error;
    /// use std::fmt;
    /// use admission_core::{Pool, Refusal};
    ///
    /// #[derive(Debug)]
    /// struct Crypto(Refusal);
    /// impl fmt::Display for Crypto {
    ///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    ///         f.write_str("key derivation failed")
    ///     }
    /// }
    /// impl Error for Crypto {
    ///     fn source(&self) -> Option<&(dyn Error + 'static)> {
    ///         Some(&self.0)
    ///     }
    /// }
    ///
    /// let pool = Pool::new("argon2", 1).unwrap();
    /// let _held = pool.try_admit().unwrap();
    /// let err = Crypto(pool.try_admit().unwrap_err());
    /// assert_eq!(Refusal::find(&err).unwrap().pool(), "argon2");
    /// assert!(Refusal::find(&fmt::Error).is_none());
    /// ```
    pub fn find<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refusal> {
        std::iter::successors(Some(error), |error| error.source())
            .find_map(|error| error.downcast_ref::<Refusal>())
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pool `{}` refused work ({})",
            self.pool.as_str(),
            self.code
        )?;
        if self.is_overload() {
            write!(f, "; retry in {} s", self.retry_after_secs())
        } else {
            // A programming error: a retry would only repeat it.
            f.write_str("; a bug in the caller, not overload")
        }
    }
}

impl std::error::Error for Refusal {}

/// An interned pool name: its number in the process's table of names, so
/// that a [`Refusal`] fits one word (and `Result<Slot, Refusal>` two,
/// returned in registers).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PoolName(u16);

/// The table's chunks: chunk `k` holds names `2^k - 1 .. 2^(k+1) - 1`, so
/// the table grows without ever moving a name, and a lookup takes no lock.
const CHUNKS: usize = 16;

/// The most distinct pool names a process may have.
const MAX_NAMES: usize = (1 << CHUNKS) - 1;

type Chunk = Box<[OnceLock<&'static str>]>;

static TABLE: [OnceLock<Chunk>; CHUNKS] = [const { OnceLock::new() }; CHUNKS];

/// Chunk and offset of name number `n`.
fn place(n: u16) -> (usize, usize) {
    let n = usize::from(n) + 1;
    let chunk = (usize::BITS - 1 - n.leading_zeros()) as usize;
    (chunk, n - (1 << chunk))
}

impl PoolName {
    pub(crate) fn as_str(self) -> &'static str {
        let (chunk, at) = place(self.0);
        TABLE[chunk]
            .get()
            .and_then(|names| names[at].get())
            .copied()
            .unwrap_or("")
    }
}

/// As the name itself.
impl fmt::Debug for PoolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Interns a pool name: one leaked copy per distinct name for the life of
/// the process, so a refusal carries its pool's name with no allocation and
/// no reference count. Pool names are a small, fixed set of configured
/// strings; creating pools with ever new names would grow this set.
#[cfg_attr(not(test), expect(dead_code, reason = "the pools use intern_name"))]
pub(crate) fn intern(name: String) -> &'static str {
    intern_name(name).as_str()
}

/// [`intern`], as the handle a refusal carries.
///
/// # Panics
///
/// When the process already has 65 535 distinct pool names: names are
/// interned for the life of the process, so a process that makes pools
/// with ever new names is leaking them.
pub(crate) fn intern_name(name: String) -> PoolName {
    static NAMES: OnceLock<Mutex<HashMap<&'static str, PoolName>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&interned) = names.get(name.as_str()) {
        return interned;
    }
    let number = u16::try_from(names.len())
        .ok()
        .filter(|&n| usize::from(n) < MAX_NAMES)
        .expect("at most 65 535 distinct pool names in a process");
    let interned: &'static str = Box::leak(name.into_boxed_str());
    let (chunk, at) = place(number);
    let chunk = TABLE[chunk].get_or_init(|| (0..1 << chunk).map(|_| OnceLock::new()).collect());
    // Set once, under the lock, before the number is handed out.
    let _first = chunk[at].set(interned);
    let handle = PoolName(number);
    names.insert(interned, handle);
    handle
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal is one word (so a slot-or-refusal is two, see the slot's
    /// tests); names read back as interned, the same name to the same
    /// handle, across the table's chunks.
    #[test]
    fn a_refusal_is_one_word_and_names_read_back() {
        assert_eq!(size_of::<Refusal>(), 8);
        let names: Vec<String> = (0..40).map(|i| format!("interned-{i}")).collect();
        let handles: Vec<PoolName> = names.iter().map(|n| intern_name(n.clone())).collect();
        for (name, handle) in names.iter().zip(&handles) {
            assert_eq!(handle.as_str(), name);
            assert_eq!(intern_name(name.clone()), *handle, "interned once");
        }
        assert_eq!(place(0), (0, 0));
        assert_eq!(place(1), (1, 0));
        assert_eq!(place(2), (1, 1));
        assert_eq!(place(3), (2, 0));
        assert_eq!(place(u16::MAX - 1), (15, (1 << 15) - 1));
    }
}
