//! Pools of slots and the worker threads behind them: the gate that decides
//! who may start work, the slot that holds capacity until the work ends, the
//! job that carries work and slot to a thread, and the counters.
//!
//! The root re-exports what most code needs ([`Pool`], [`Admission`],
//! [`RegistryWork`], [`WorkError`]); this module holds the rest: the
//! low-level [`Slot`], the [`WorkFuture`] it offloads to, the builder, the
//! retry hint (computed from the pool's work times), and [`HasPools`],
//! which lets shutdown and metrics take anything that owns pools.
//!
//! Each file owns one piece with private state; other modules of the crate
//! reach a pool only through `Pool`'s methods.

mod builder;
pub(crate) mod estimate;
mod flows;
mod future;
mod gate;
mod holders;
pub(crate) mod job;
pub(crate) mod permits;
mod slot;
pub(crate) mod stats;
mod work;
mod work_error;
mod workers;

pub use self::builder::PoolBuilder;
pub use self::estimate::RetryHint;
pub use self::future::WorkFuture;
pub use self::gate::{Admission, Pool, REENTRANT_GRACE};
pub use self::permits::QueuePolicy;
pub use self::slot::Slot;
pub(crate) use self::stats::PoolStats;
pub use self::work::RegistryWork;
pub use self::work_error::WorkError;
pub use crate::error::MAX_CAPACITY;

/// Anything that owns pools: a [`Pool`], the request pools, a reservation
/// or a loop owner. [`Shutdown::register`](crate::Shutdown::register) and
/// the metrics collector take any of them, so there is one way to hand
/// pools over, whatever holds them.
///
/// # Examples
///
/// ```
/// use admission_core::pool::HasPools;
/// use admission_core::{Pool, RequestPools};
///
/// fn names(owner: &impl HasPools) -> Vec<String> {
///     let mut names = Vec::new();
///     owner.each_pool(&mut |pool| names.push(pool.name().to_owned()));
///     names
/// }
///
/// assert_eq!(names(&Pool::new("registry", 1).unwrap()), ["registry"]);
/// assert_eq!(names(&RequestPools::new(2, 4).unwrap()), ["work", "control"]);
/// ```
pub trait HasPools {
    /// Calls `each` once for every pool it owns.
    fn each_pool(&self, each: &mut dyn FnMut(&Pool));
}

impl HasPools for Pool {
    fn each_pool(&self, each: &mut dyn FnMut(&Pool)) {
        each(self);
    }
}
