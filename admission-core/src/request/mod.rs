//! Request admission: classes, the lease a request holds for its whole
//! response, the pools behind the classes and the task-local scope that
//! lets pure work and nested admissions inherit a lease.
//!
//! The root re-exports [`RequestPools`], [`Class`] and [`Lease`]; this module
//! holds the rest.

mod adaptive;
mod class;
mod lease;
mod pools;
pub(crate) mod scope;

pub use self::adaptive::AdaptiveLimit;
pub use self::class::{Class, UnknownClass};
pub use self::lease::Lease;
pub use self::pools::{RequestPools, RequestPoolsBuilder};
pub use self::scope::Scoped;
