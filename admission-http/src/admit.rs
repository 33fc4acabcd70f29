//! The admission decision every adapter makes for a request, made in one
//! place.
//!
//! This module owns [`RequestAdmission`]: the app's request pools, whether
//! a request whose class is full waits in the class pool's queue or is
//! refused at once, the [`Trust`] the app has in its peers' headers, and
//! the counters of malformed headers and of claims nobody trusts (a
//! `critical` read as `default`, a flow header set aside). The tower
//! middleware of this crate and the actix-web
//! middleware both call it, so they cannot disagree on who is admitted. It
//! must never build an answer (the protocol's encoder does) and never
//! create pools.

use std::num::NonZeroU8;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use admission_core::{Admission, Caller, Class, Lease, Refusal, RequestPools};

use crate::headers::{RequestCaller, Trust};

/// How requests are admitted: from which pools, failing fast or waiting in
/// the class pool's bounded queue, trusting whose headers.
///
/// Clones share their pools and counters. An adapter's layer or middleware
/// holds one; an app configures it through that layer's builder methods
/// (`queue()`, `trust_peers()`), which exist under the same names on every
/// adapter.
///
/// # Examples
///
/// ```
/// use admission_core::{Class, Criticality, RequestPools};
/// use admission_http::RequestAdmission;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let admission = RequestAdmission::new(RequestPools::new(1, 1).unwrap());
/// let caller = admission.caller([("x-admission-criticality", &b"critical"[..])]);
/// assert_eq!(caller.criticality(), Criticality::Default, "nobody is trusted by default");
/// assert_eq!(admission.lowered_claims(), 1);
///
/// let lease = admission.lease(Class::Work, caller).await.unwrap();
/// assert!(admission.lease(Class::Work, caller).await.is_err(), "fails fast: the class is full");
/// # drop(lease);
/// # }
/// ```
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct RequestAdmission {
    pools: RequestPools,
    queue: bool,
    reader: Reader,
    /// The slots each request takes (`None`: one).
    cost: Option<NonZeroU8>,
}

/// Reads callers from headers under a trust policy, and counts what it
/// set aside; clones count together.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reader {
    trust: Trust,
    counts: Arc<Counts>,
}

/// What every clone counts.
#[derive(Debug, Default)]
struct Counts {
    malformed: AtomicU64,
    lowered: AtomicU64,
}

impl Reader {
    pub(crate) fn trust_peers(self) -> Reader {
        Reader {
            trust: Trust::Peers,
            ..self
        }
    }

    pub(crate) fn trust(&self) -> Trust {
        self.trust
    }

    /// The caller `headers` describe; a malformed header and a lowered
    /// claim are counted.
    pub(crate) fn caller<'a>(
        &self,
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> Caller {
        self.caller_for(headers, std::convert::identity)
    }

    /// The caller `headers` describe, its flow the app's (`app_flow`)
    /// unless a trusted peer named one; counted as [`caller`](Self::caller).
    pub(crate) fn caller_for<'a>(
        &self,
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        app_flow: impl FnOnce(Caller) -> Caller,
    ) -> Caller {
        let read = RequestCaller::from_headers(headers, self.trust, app_flow);
        if read.malformed {
            self.counts.malformed.fetch_add(1, Ordering::Relaxed);
        }
        if read.lowered {
            self.counts.lowered.fetch_add(1, Ordering::Relaxed);
        }
        read.caller
    }

    pub(crate) fn malformed_headers(&self) -> u64 {
        self.counts.malformed.load(Ordering::Relaxed)
    }

    pub(crate) fn lowered_claims(&self) -> u64 {
        self.counts.lowered.load(Ordering::Relaxed)
    }
}

impl RequestAdmission {
    /// Fail-fast admission from `pools`, trusting nobody's headers.
    pub fn new(pools: RequestPools) -> RequestAdmission {
        RequestAdmission {
            pools,
            queue: false,
            reader: Reader::default(),
            cost: None,
        }
    }

    /// The same admission, but a request whose class is full waits in the
    /// class pool's bounded queue ([`Admission::Queue`]) instead of being
    /// refused at once. Counters stay shared.
    #[must_use]
    pub fn queue(self) -> RequestAdmission {
        RequestAdmission {
            queue: true,
            ..self
        }
    }

    /// The same admission, honouring the criticality and budget headers as
    /// sent ([`Trust::Peers`]). Counters stay shared.
    #[must_use]
    pub fn trust_peers(self) -> RequestAdmission {
        RequestAdmission {
            reader: self.reader.trust_peers(),
            ..self
        }
    }

    /// The same admission, each request taking `cost` slots of its class
    /// (a full-registry walk beside point reads of one), once the classes
    /// it may lease (`classes`) were checked to hold it. Counters stay
    /// shared.
    ///
    /// # Errors
    ///
    /// [`ConfigError::CostAboveCapacity`](admission_core::ConfigError::CostAboveCapacity)
    /// when one of `classes` has fewer slots than `cost`.
    pub fn costing(
        self,
        cost: NonZeroU8,
        classes: &[Class],
    ) -> Result<RequestAdmission, admission_core::ConfigError> {
        for &class in classes {
            self.pools.check_cost(class, cost)?;
        }
        Ok(RequestAdmission {
            cost: (cost.get() > 1).then_some(cost),
            ..self
        })
    }

    /// The request pools leases are taken from.
    pub fn pools(&self) -> &RequestPools {
        &self.pools
    }

    /// Whether a request whose class is full waits in the queue.
    pub fn queues(&self) -> bool {
        self.queue
    }

    /// Whose headers are trusted.
    pub fn trust(&self) -> Trust {
        self.reader.trust()
    }

    /// The caller a request's headers describe under this admission's
    /// trust; a malformed header and a lowered claim are counted.
    pub fn caller<'a>(&self, headers: impl IntoIterator<Item = (&'a str, &'a [u8])>) -> Caller {
        self.costed(self.reader.caller(headers))
    }

    /// [`caller`](Self::caller), with the flow the app names for the
    /// request: `app_flow` gives the caller read from the headers its flow
    /// (`Caller::with_flow`, and its weight), unless the app trusts its
    /// peers and the request names a well-formed `x-admission-flow`, which
    /// then wins and `app_flow` is not called. Under the default policy the
    /// header is set aside and counted in
    /// [`lowered_claims`](Self::lowered_claims); a malformed or repeated
    /// one is ignored and counted in
    /// [`malformed_headers`](Self::malformed_headers). Every adapter reads
    /// a request's flow through here, so none can disagree on whose word
    /// counts.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::{Caller, RequestPools};
    /// use admission_http::RequestAdmission;
    ///
    /// let invented = [("x-admission-flow", &b"someone-else"[..])];
    /// let tenant = |caller: Caller| caller.with_flow("acme");
    ///
    /// let outsiders = RequestAdmission::new(RequestPools::new(1, 1).unwrap());
    /// assert_eq!(outsiders.caller_for(invented, tenant), Caller::default().with_flow("acme"));
    /// assert_eq!(outsiders.lowered_claims(), 1, "the header was set aside, and counted");
    ///
    /// let peers = RequestAdmission::new(RequestPools::new(1, 1).unwrap()).trust_peers();
    /// assert_eq!(peers.caller_for(invented, tenant), Caller::default().with_flow("someone-else"));
    /// ```
    pub fn caller_for<'a>(
        &self,
        headers: impl IntoIterator<Item = (&'a str, &'a [u8])>,
        app_flow: impl FnOnce(Caller) -> Caller,
    ) -> Caller {
        self.costed(self.reader.caller_for(headers, app_flow))
    }

    /// `caller` with the route's cost, if it has one.
    fn costed(&self, caller: Caller) -> Caller {
        match self.cost {
            Some(cost) => caller.with_cost(cost),
            None => caller,
        }
    }

    /// A lease of `class` for `caller`, at once or refused at once,
    /// whatever the wait mode: the fail-fast path.
    ///
    /// # Errors
    ///
    /// The pool's [`Refusal`], logged at `DEBUG` with its pool, code and
    /// criticality.
    pub fn try_lease(&self, class: Class, caller: Caller) -> Result<Lease, Refusal> {
        self.pools
            .try_lease_for(class, caller)
            .inspect_err(log_refusal)
    }

    /// A lease of `class` for `caller`: at once, or after a bounded wait in
    /// the class pool's queue when this admission [`queues`](Self::queues).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a request dropped while it waits takes no slot and
    /// leaves no place in the queue.
    ///
    /// # Errors
    ///
    /// The pool's [`Refusal`], logged as in [`try_lease`](Self::try_lease).
    pub async fn lease(&self, class: Class, caller: Caller) -> Result<Lease, Refusal> {
        if !self.queue {
            return self.try_lease(class, caller);
        }
        caller
            .scope(self.pools.lease_with(class, Admission::Queue))
            .await
            .inspect_err(log_refusal)
    }

    /// How many requests came with a malformed or repeated budget header
    /// (`x-admission-budget-ms`, `x-envoy-expected-rq-timeout-ms`,
    /// `grpc-timeout`) or flow header (`x-admission-flow`); each was served
    /// as if it had none.
    pub fn malformed_headers(&self) -> u64 {
        self.reader.malformed_headers()
    }

    /// How many requests claimed `x-admission-criticality: critical` and
    /// were served as `default`, or named their own `x-admission-flow` and
    /// were not heard, since nobody's headers are trusted (always 0 under
    /// [`Trust::Peers`]); a request that did both counts once.
    pub fn lowered_claims(&self) -> u64 {
        self.reader.lowered_claims()
    }
}

fn log_refusal(refusal: &Refusal) {
    tracing::debug!(
        pool = refusal.pool(),
        code = refusal.code().as_str(),
        criticality = refusal.criticality().as_str(),
        "request refused"
    );
}
