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
//! their trust policy) and never hold a user value: a caller is a level,
//! an instant and a flow's keyed hash, nothing a client wrote.

use std::fmt;
use std::future::Future;
use std::hash::{BuildHasher, Hash, RandomState};
use std::num::{NonZeroU8, NonZeroU32};
use std::sync::OnceLock;
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

/// `Caller::flags`: a deadline, a flow or a cost: admission looks.
const CARE: u8 = 1;
/// `Caller::flags`: the deadline is one a client asserted.
const ASSERTED: u8 = 2;

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
    /// [`CARE`] when it has a deadline, a flow or a cost above one: one
    /// byte the gate tests, so a caller with none is admitted by the path
    /// it took before they existed; and [`ASSERTED`] when the deadline came
    /// from a peer the app does not trust (it may refuse at once or shorten
    /// a wait, never lengthen one). `ASSERTED` never comes without `CARE`.
    flags: u8,
    /// The flow's weight in its share (0 is read as 1); beside `flags`,
    /// in the padding the deadline leaves, so a caller stays 24 bytes.
    weight: u8,
    /// How many slots an admission for it takes, less one (so the default,
    /// 0, is one slot and no value means none).
    extra: u8,
    /// Who the admission is for inside its pool: a keyed hash of the app's
    /// flow key, never the key (see `pool::flows`).
    flow: Option<NonZeroU32>,
}

impl Caller {
    /// A caller of this criticality with no deadline.
    pub const fn new(criticality: Criticality) -> Caller {
        Caller {
            criticality,
            deadline: None,
            flags: 0,
            weight: 0,
            extra: 0,
            flow: None,
        }
    }

    /// The same caller for the flow `key` (a tenant, an API key, a user:
    /// whatever the app says the request is for). While a pool is
    /// contended, each active flow is held to its fair share of the pool,
    /// and a flow at its share is refused with `ADMISSION_FLOW_SHARE`
    /// while another flow that asked is under its own; a flow alone gets
    /// the whole pool. Callers without a flow are admitted as before, by
    /// the pool's capacity alone.
    ///
    /// # Fair shares
    ///
    /// Every entry point that admits for a caller (a lease, `Pool::run`,
    /// `try_admit` and the waits, pure work's fresh lease) applies this
    /// rule to a caller with a flow, in the pool (the request class) it
    /// asks, whose current limit is L:
    ///
    /// * **Active flows** are the flows that hold a slot of the pool now,
    ///   or *ask*: were refused by it (or joined its line) within their
    ///   asking window, twice the refusal's `Retry-After` (at least 2 s),
    ///   and have not been admitted since. The caller's own flow counts.
    /// * A flow's **share** is L × its weight / the sum of the active
    ///   flows' weights ([`with_weight`](Self::with_weight)); a flow is
    ///   *under* its share while it holds fewer slots than that.
    /// * A flow under its share is admitted whenever a slot is free (the
    ///   pool's usual rule: its capacity, the criticality shares).
    /// * A flow at or over its share is admitted to a free slot only when
    ///   no other active flow that asks is under its own share: the class
    ///   lends what nobody who asked is short of (one flow alone gets the
    ///   whole pool). Otherwise it is refused with `ADMISSION_FLOW_SHARE`,
    ///   the slot left for the flow that is short.
    /// * A refusal for a full pool names `ADMISSION_FLOW_SHARE` when the
    ///   flow holds at least its share and another flow is active,
    ///   `ADMISSION_SATURATED` (or the pool's own code) otherwise; either
    ///   way the refused flow asks from then on, so a tenant refused while
    ///   another held every slot gets the next slot its share allows.
    /// * In shadow mode ([`Pool::set_shadow`](crate::Pool::set_shadow)) a
    ///   would-be `ADMISSION_FLOW_SHARE` is counted in
    ///   `would_refuse_by_code` and served.
    /// * A caller that waits (`Admission::Wait`) is refused as above before
    ///   it joins the line, and asks while it waits. A queued caller
    ///   ([`Admission::Queue`](crate::Admission::Queue)) is refused so only
    ///   when its flow is the *flood*: it holds more for its weight than
    ///   every other flow and presses hardest. A flow's *pressure* is how
    ///   often it asked the pool lately, per unit of weight: every arrival
    ///   counts, admitted or not, and the count halves every quarter
    ///   second, so a tenant whose few requests overlap presses hundreds of
    ///   times less than a flood. Otherwise the queued caller waits and the
    ///   line settles between them.
    /// * A slot that comes back goes to the waiters in fair order:
    ///   criticality first, patient waiters before the queue, and within
    ///   them, among waiters with a flow, the one whose flow would hold
    ///   least for its weight once served (what it holds plus the waiter's
    ///   cost), then the one whose flow has fewest waiting, then the first
    ///   in line (in a standing queue, the one whose flow pressed less when
    ///   it joined, then the newest); so a tenant with one request waiting
    ///   is served before a tenant with a hundred. Waiters without a flow
    ///   keep the line's order (oldest first, newest first once the queue
    ///   stands). A waiter is not held back, once in line, for a flow that
    ///   asked by failing fast: that is decided when it joins.
    /// * A queued waiter whose flow is not the flood (under its share, or
    ///   pressing less than another active flow) waits one release longer
    ///   than the queue's own wait, is never shed when the flood makes the
    ///   queue stand, and at a full queue takes the place of the waiter
    ///   that joined pressing hardest, if that one pressed harder (it is
    ///   refused `ADMISSION_FLOW_SHARE`).
    /// * Shares count cost ([`with_cost`](Self::with_cost)): a flow
    ///   holding one admission of cost 4 holds 4 of its share.
    ///
    /// Flows are kept in a fixed table of 256 buckets per pool (under
    /// 7 KiB, made the first time a caller with a flow asks the pool, plus
    /// two bytes per slot), whatever keys callers send. A flow takes a
    /// bucket of its own among 8 its keyed hash names, and shares one with
    /// another flow (the two are then one flow, with one share) only when
    /// all 8 are taken by other active flows: with n active flows, odds of
    /// C(n, 8) / C(256, 8), below 10^-9 for 16 flows, 1.1·10^-5 for 64,
    /// 0.3% for 128. A bucket is freed once its flow is no longer active.
    /// Each replica enforces
    /// shares of its own capacity.
    ///
    /// The key is hashed at once (with a key chosen at random per process)
    /// and only the hash is kept: a caller stays a small `Copy` value and
    /// never holds what a client wrote. Take keys from what the app knows
    /// (an authenticated tenant); a key a client may choose freely lets it
    /// hold one share per key it invents, so adapters read one from a
    /// header only when the app trusts its peers.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, Class, Code, RequestPools};
    ///
    /// let requests = RequestPools::new(2, 4).unwrap();
    /// let flood = Caller::default().with_flow("batch-job");
    /// let light = Caller::default().with_flow("alice");
    /// let one = requests.try_lease_for(Class::Work, flood).unwrap();
    /// let two = requests.try_lease_for(Class::Work, flood).expect("alone, a flow gets the whole class");
    ///
    /// // alice asks while the flood holds everything: refused, and active now.
    /// let refused = requests.try_lease_for(Class::Work, light).unwrap_err();
    /// assert_eq!(refused.code(), Code::Saturated);
    /// drop(two);
    /// // The free slot is alice's share: the flood, at its share, is refused.
    /// let over = requests.try_lease_for(Class::Work, flood).unwrap_err();
    /// assert_eq!(over.code(), Code::FlowShare);
    /// assert!(requests.try_lease_for(Class::Work, light).is_ok());
    /// # drop(one);
    /// ```
    #[must_use]
    pub fn with_flow(self, key: impl Hash) -> Caller {
        static SEED: OnceLock<RandomState> = OnceLock::new();
        let hash = SEED.get_or_init(RandomState::new).hash_one(key);
        #[expect(
            clippy::cast_possible_truncation,
            reason = "the hash, folded to 32 bits"
        )]
        let folded = (hash ^ (hash >> 32)) as u32;
        Caller {
            flow: Some(NonZeroU32::new(folded).unwrap_or(NonZeroU32::MIN)),
            flags: self.flags | CARE,
            ..self
        }
    }

    /// The same caller with its flow counting `weight` times in shares
    /// (1 by default; 0 is taken as 1): a flow of weight 2 beside one of
    /// weight 1 is held to two thirds of a contended pool. Flows that
    /// share a bucket of the pool's table share the weight last asked with.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Caller;
    ///
    /// let paying = Caller::default().with_flow("acme").with_weight(2);
    /// assert_eq!(paying.weight(), 2);
    /// assert_eq!(Caller::default().weight(), 1);
    /// ```
    #[must_use]
    pub const fn with_weight(self, weight: u8) -> Caller {
        Caller { weight, ..self }
    }

    /// The same caller with its admissions taking `slots` of a pool's
    /// slots at once instead of one (a full-registry walk that occupies
    /// what four point reads would): every entry point that admits for a
    /// caller (a lease, [`RequestPools::try_lease_for`](crate::RequestPools::try_lease_for),
    /// [`Pool::run`](crate::Pool::run), `try_admit`, `admit` and the
    /// waits, pure work's fresh lease) takes all of them or none, holds
    /// them until the slot, lease or work ends (or the waiter is dropped)
    /// and gives them all back together. A cost of 0 cannot be written:
    /// every admission holds something.
    ///
    /// * **Fair shares count cost.** A flow holding one cost-4 lease holds
    ///   4 of its share; a flow is under its share for an admission of
    ///   cost `c` while it holds at most its share less `c`, rounded up
    ///   (with `c` = 1: while it holds less than its share).
    /// * **A waiter is served whole.** A queued or waiting caller of cost
    ///   `c` is served when `c` slots are free under its level's limit;
    ///   while it is the next to be served (criticality first, then the
    ///   line's order, then fair order between flows) the slots that come
    ///   back are set aside for it, so callers of cost 1 that arrive after
    ///   it do not starve it, and callers in line never overtake it.
    /// * **Live limits.** A cost above the pool's current limit
    ///   ([`Pool::set_limit`](crate::Pool::set_limit)), or above its
    ///   level's share of it, but within its capacity is refused as
    ///   saturated by a fail-fast caller, and waits (within its bound, as
    ///   any waiter) until the limit is raised; nothing is set aside for
    ///   it meanwhile.
    /// * **Above the capacity.** A cost above the capacity the pool was
    ///   built with is clamped to that capacity: the admission takes the
    ///   whole pool. Such work can only run alone, and that is the most a
    ///   cost can ask; refusing it would be an answer a retry repeats
    ///   forever, and waiting for it could never end. A declared cost is
    ///   checked where it is declared instead:
    ///   [`RequestPools::check_cost`](crate::RequestPools::check_cost)
    ///   (which the HTTP adapters call for a route's cost) and
    ///   [`Pool::check_cost`](crate::Pool::check_cost) report it as a
    ///   [`ConfigError::CostAboveCapacity`](crate::ConfigError::CostAboveCapacity)
    ///   when the app is built.
    ///
    /// A caller of cost 1 with neither a deadline nor a flow is admitted
    /// by the pool's fast path; any other cost takes the path deadlines
    /// and flows take.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::num::NonZeroU8;
    /// use admission_core::{Caller, Class, RequestPools};
    ///
    /// let requests = RequestPools::new(2, 4).unwrap();
    /// let walk = Caller::default().with_cost(NonZeroU8::new(4).unwrap());
    /// assert_eq!(walk.cost(), 4);
    /// let lease = requests.try_lease_for(Class::Control, walk).unwrap();
    /// assert_eq!(requests.pool(Class::Control).stats().in_use, 4, "all four slots");
    /// assert!(requests.try_lease_for(Class::Control, Caller::default()).is_err());
    /// drop(lease);
    /// assert_eq!(requests.pool(Class::Control).stats().in_use, 0, "all four back");
    /// ```
    #[must_use]
    pub const fn with_cost(self, slots: NonZeroU8) -> Caller {
        let extra = slots.get() - 1;
        Caller {
            extra,
            flags: if extra > 0 {
                self.flags | CARE
            } else {
                self.flags
            },
            ..self
        }
    }

    /// How many slots an admission for this caller takes (1 unless
    /// [`with_cost`](Self::with_cost) said more).
    pub const fn cost(&self) -> u16 {
        self.extra as u16 + 1
    }

    /// The weight of the caller's flow in shares (at least 1).
    pub const fn weight(&self) -> u8 {
        if self.weight == 0 { 1 } else { self.weight }
    }

    /// Whether the caller carries a flow ([`with_flow`](Self::with_flow)).
    pub const fn has_flow(&self) -> bool {
        self.flow.is_some()
    }

    /// Whether the caller has a deadline or a flow: admission takes the
    /// path that looks at them.
    #[inline]
    pub(crate) const fn takes_care(&self) -> bool {
        self.flags != 0
    }

    /// The flow's keyed hash, for the pool's flow table.
    #[inline]
    pub(crate) const fn flow(&self) -> Option<NonZeroU32> {
        self.flow
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
                flags: (self.flags & !ASSERTED) | CARE | if asserted { ASSERTED } else { 0 },
                ..self
            },
        }
    }

    /// Whether the deadline is one a client asserted and the app does not
    /// trust ([`with_asserted_deadline`](Self::with_asserted_deadline)): it
    /// never lengthens a queued wait.
    pub const fn deadline_is_asserted(&self) -> bool {
        self.flags & ASSERTED != 0 && self.deadline.is_some()
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
