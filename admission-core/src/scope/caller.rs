//! Who is asking: the criticality and the deadline an admission is made
//! for, and the ways to run work for a caller.
//!
//! This module owns [`Criticality`] and [`Caller`] (public at
//! `admission_core::caller`), values an admission is made for, and
//! [`Caller::scope`] / [`Caller::current`], which carry the caller through
//! a request in the scope's task-local, so that every admission inside it
//! (a lease, `Pool::run`, a coalesced walk) is made on the request's
//! behalf without being passed down by hand. It must never decide an
//! admission (the pool does), never read a request (adapters do, under
//! their trust policy) and never hold a user value: a caller is a level
//! and an instant, nothing a client wrote.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use super::task::{self, ScopePart, Scoped};

/// How much a caller's work matters when the pool is short of slots.
///
/// A pool admits [`Sheddable`](Self::Sheddable) work only while fewer than
/// its sheddable share of slots are in use (half by default), and
/// [`Default`](Self::Default) and [`Critical`](Self::Critical) work up to
/// their own shares (the whole pool by default; see
/// [`PoolBuilder::share`](crate::pool::PoolBuilder::share)). Waiting callers
/// are served critical first, then default, then sheddable.
///
/// # Examples
///
/// ```
/// use admission_core::Criticality;
///
/// assert_eq!(Criticality::parse("sheddable"), Some(Criticality::Sheddable));
/// assert_eq!(Criticality::parse("CRITICAL"), Some(Criticality::Critical));
/// // Unknown values are not an error: callers treat them as the default.
/// assert_eq!(Criticality::parse("urgent!!").unwrap_or_default(), Criticality::Default);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Criticality {
    /// Work the product cannot do without (a checkout, a health answer the
    /// balancer acts on): served first, may use every slot.
    Critical,
    /// Ordinary work; what a caller that says nothing is.
    #[default]
    Default,
    /// Work that can be dropped first under overload (prefetch, batch
    /// scrapes, retries of best-effort calls).
    Sheddable,
}

impl Criticality {
    /// Every level, most critical first (the order waiters are served in).
    pub const ALL: [Criticality; 3] = [
        Criticality::Critical,
        Criticality::Default,
        Criticality::Sheddable,
    ];

    /// The stable lowercase name: `critical`, `default`, `sheddable` (the
    /// header value, the problem body's field, the metrics label).
    pub const fn as_str(self) -> &'static str {
        match self {
            Criticality::Critical => "critical",
            Criticality::Default => "default",
            Criticality::Sheddable => "sheddable",
        }
    }

    /// Reads a level from its name, ASCII case-insensitively; anything else
    /// is `None` (callers treat it as [`Criticality::Default`], never as an
    /// error).
    pub fn parse(value: &str) -> Option<Criticality> {
        Criticality::ALL
            .into_iter()
            .find(|level| value.eq_ignore_ascii_case(level.as_str()))
    }

    /// The level's position in [`Criticality::ALL`].
    pub(crate) const fn index(self) -> usize {
        match self {
            Criticality::Critical => 0,
            Criticality::Default => 1,
            Criticality::Sheddable => 2,
        }
    }
}

impl fmt::Display for Criticality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who an admission is made for: a [`Criticality`] and, if the client said
/// how long it will wait, a deadline.
///
/// Adapters build one per request from its headers and run the request
/// under it ([`Caller::scope`]); every admission inside (the request's
/// lease, [`Pool::run`](crate::Pool::run), [`Coalescing::run`](crate::Coalescing::run))
/// reads it with [`Caller::current`]. Outside any scope the caller is
/// default criticality with no deadline.
///
/// With a deadline, a pool refuses at once with `ADMISSION_BUDGET_TOO_SHORT`
/// when the time left is shorter than the expected wait plus the pool's
/// typical work time (the median of its recent work), since admitting the
/// call would only make an orphan; and no wait for a slot outlasts the
/// deadline.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::{Admission, Caller, Code, Criticality, Pool, WorkError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 2).unwrap();
/// let _held = pool.try_admit().unwrap(); // one of two slots in use
///
/// // Sheddable work may use half the pool: refused, and the refusal says so.
/// let shed = Caller::new(Criticality::Sheddable)
///     .scope(pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast))
///     .await;
/// match shed {
///     Err(WorkError::Refused(refusal)) => {
///         assert_eq!(refusal.code(), Code::Saturated);
///         assert_eq!(refusal.criticality(), Criticality::Sheddable);
///     }
///     other => panic!("expected a refusal, got {other:?}"),
/// }
///
/// // Default work still gets the second slot.
/// let ran = Caller::new(Criticality::Default)
///     .with_budget(Duration::from_secs(5))
///     .scope(pool.run(|| Ok::<_, std::fmt::Error>(7), Admission::FailFast))
///     .await;
/// assert_eq!(ran, Ok(7));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caller {
    criticality: Criticality,
    deadline: Option<Instant>,
    /// The deadline came from a peer the app does not trust: it may refuse
    /// at once or shorten a wait, never lengthen one.
    asserted: bool,
}

impl Caller {
    /// A caller of this criticality with no deadline.
    pub const fn new(criticality: Criticality) -> Caller {
        Caller {
            criticality,
            deadline: None,
            asserted: false,
        }
    }

    /// The same caller with a deadline `budget` from now (the time the
    /// client said it will wait). A budget too long to be a point in time
    /// sets no deadline.
    #[must_use]
    pub fn with_budget(self, budget: Duration) -> Caller {
        match Instant::now().checked_add(budget) {
            Some(deadline) => self.with_deadline(deadline),
            None => self,
        }
    }

    /// The same caller with this deadline; the earlier one wins when it
    /// already had one (a nested call cannot lengthen its client's wait).
    #[must_use]
    pub fn with_deadline(self, deadline: Instant) -> Caller {
        self.deadline_from(deadline, false)
    }

    /// The same caller with a deadline a client asserted and the app does
    /// not trust (adapters read one from request headers this way unless
    /// the app trusts its peers): it refuses at once a call that could not
    /// be answered in time and may shorten a wait for a slot, but never
    /// lengthens a queued wait past the queue's own limit. The earlier
    /// deadline wins, as with [`with_deadline`](Self::with_deadline).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::Caller;
    /// use tokio::time::Instant;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let asked = Caller::default().with_asserted_deadline(Instant::now() + Duration::from_secs(60));
    /// assert!(asked.deadline_is_asserted());
    /// assert!(!Caller::default().with_budget(Duration::from_secs(60)).deadline_is_asserted());
    /// # }
    /// ```
    #[must_use]
    pub fn with_asserted_deadline(self, deadline: Instant) -> Caller {
        self.deadline_from(deadline, true)
    }

    /// The earlier of the deadlines, with the trust of the one that wins.
    fn deadline_from(self, deadline: Instant, asserted: bool) -> Caller {
        match self.deadline {
            Some(earlier) if earlier <= deadline => self,
            _ => Caller {
                deadline: Some(deadline),
                asserted,
                ..self
            },
        }
    }

    /// Whether the deadline is one a client asserted and the app does not
    /// trust ([`with_asserted_deadline`](Self::with_asserted_deadline)): it
    /// never lengthens a queued wait.
    pub const fn deadline_is_asserted(&self) -> bool {
        self.asserted && self.deadline.is_some()
    }

    /// The same caller at another criticality, its deadline kept.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use admission_core::{Caller, Criticality};
    ///
    /// let caller = Caller::default().with_budget(Duration::from_secs(1));
    /// let critical = caller.with_criticality(Criticality::Critical);
    /// assert_eq!(critical.criticality(), Criticality::Critical);
    /// assert_eq!(critical.deadline(), caller.deadline());
    /// ```
    #[must_use]
    pub const fn with_criticality(self, criticality: Criticality) -> Caller {
        Caller {
            criticality,
            ..self
        }
    }

    /// The caller's criticality.
    pub const fn criticality(&self) -> Criticality {
        self.criticality
    }

    /// The caller's deadline, if it has one.
    pub const fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The time left before the deadline (zero once it passed), if the
    /// caller has one.
    pub fn remaining(&self) -> Option<Duration> {
        self.deadline
            .map(|deadline| deadline.saturating_duration_since(Instant::now()))
    }

    /// The caller the current task runs for: the innermost scope's
    /// ([`Caller::scope`], [`Lease::scope_for`](crate::Lease::scope_for)), or default criticality
    /// with no deadline outside any.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Criticality};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// assert_eq!(Caller::current().criticality(), Criticality::Default);
    /// let inside = Caller::new(Criticality::Critical)
    ///     .scope(async { Caller::current().criticality() })
    ///     .await;
    /// assert_eq!(inside, Criticality::Critical);
    /// # }
    /// ```
    pub fn current() -> Caller {
        task::current_caller()
    }

    /// Runs `future` for this caller: every admission inside it is made at
    /// this criticality and within this deadline. The lease or reservation
    /// is the one of the scope the future is polled in.
    ///
    /// # Cancel safety
    ///
    /// The returned future is as cancel-safe as `future`; dropping it drops
    /// `future`, and the caller with it.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Criticality};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let level = Caller::new(Criticality::Sheddable)
    ///     .scope(async { Caller::current().criticality() })
    ///     .await;
    /// assert_eq!(level, Criticality::Sheddable);
    /// # }
    /// ```
    pub fn scope<F: Future>(self, future: F) -> Scoped<F> {
        Scoped::part(ScopePart::Caller(self), future)
    }

    /// Runs the synchronous `call` for this caller (an inner service's
    /// `call`, which may admit in turn), for adapters.
    #[doc(hidden)]
    pub fn scope_sync<R>(self, call: impl FnOnce() -> R) -> R {
        task::sync_scope_part(&ScopePart::Caller(self), call)
    }
}
