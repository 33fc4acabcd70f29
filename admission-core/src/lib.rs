//! Admission control for blocking work in async services.
//!
//! Expensive blocking work (a metrics-registry walk, a pure state transition,
//! a connector call) runs on a small, bounded set of worker threads. This
//! crate decides who may start it, what a refused caller gets, keeps a slot
//! held until the work really ends even when the caller has gone, gives
//! background loops reserved slots that requests cannot take, and drains
//! every pool under one shutdown deadline without blocking the runtime.
//!
//! * [`Pool`]: N slots and N worker threads; [`Pool::try_admit`] fails fast,
//!   [`Pool::admit`] waits, [`Pool::run`] is the one entry point for registry
//!   work.
//! * [`Slot`]: one unit of capacity, moved into the work by
//!   [`Slot::offload`] and released when the work ends.
//! * [`Refusal`]: a typed refusal with a stable [`Code`] and a retry hint.
//! * [`RequestPools`] and [`Lease`]: request admission by [`Class`], and
//!   [`RequestPools::execute_pure`], the entry point for pure work.
//! * [`Reservation`] and [`LoopOwner`]: reserved slots for background loops;
//!   `#[reserved(slots = N)]` implements the trait.
//! * [`Shutdown`]: one deadline for loops and pools.
//! * [`Cause`] and [`log_failure`]: failures named by class and code only.
//!
//! # Examples
//!
//! ```
//! use admission_core::{Admission, Code, Pool, WorkError};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let registry = Pool::new("registry", 1).unwrap();
//! let (release, held) = std::sync::mpsc::channel::<()>();
//! let busy = registry.try_admit().unwrap().offload(move || held.recv().map(|()| "walked"));
//!
//! // The only worker is busy: an HTTP caller is refused at once.
//! let refused = registry.run(|| Ok::<_, std::fmt::Error>("walked"), Admission::FailFast).await;
//! assert!(matches!(refused, Err(WorkError::Refused(r)) if r.code() == Code::Saturated));
//!
//! release.send(()).unwrap();
//! assert_eq!(busy.await, Ok("walked"));
//! # }
//! ```
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod cause;
mod coalesce;
mod context;
mod error;
mod handler;
mod lease;
mod loom;
#[cfg(all(test, loom))]
mod loom_models;
#[cfg(feature = "prometheus")]
pub mod metrics;
mod pool;
mod problem;
mod refusal;
mod reserve;
mod respond;
mod shutdown;
mod work;

pub use crate::cause::{Cause, ErrorCode, log_failure};
pub use crate::coalesce::Coalescing;
pub use crate::context::{Scoped, current_lease};
pub use crate::error::{ConfigError, MAX_CAPACITY};
pub use crate::handler::{registry, registry_coalesced, registry_wait};
pub use crate::lease::{Class, Lease, RequestPools, RequestPoolsBuilder, UnknownClass};
pub use crate::pool::{Admission, DURATION_BUCKETS, Pool, PoolBuilder, PoolStats, RetryHint, Slot};
pub use crate::problem::{DEFAULT_REFUSAL_STATUS, Problem, WORK_FAILED, WORK_PANICKED};
pub use crate::refusal::{Code, PROBLEM_JSON, Refusal};
pub use crate::reserve::{LoopOwner, Reservation};
pub use crate::shutdown::{
    Cleanup, DEFAULT_DEADLINE, Outcome, PoolReport, Shutdown, ShutdownReport,
};
pub use crate::work::{RegistryWork, WorkError, WorkFuture};

#[cfg(feature = "macros")]
pub use admission_macros::*;

/// Re-exported for the handlers `#[reserved]` and the adapters generate.
pub use tokio_util::sync::CancellationToken;
