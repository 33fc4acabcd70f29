//! Request admission: classes, the lease a request holds for its whole
//! response and the pools behind the classes; a lease's scope (the crate's
//! task-local scope) lets pure work and nested admissions inherit it.
//!
//! The root re-exports [`RequestPools`], [`Class`] and [`Lease`]; this module
//! holds the rest.

mod adaptive;
mod class;
pub(crate) mod context;
mod lease;
mod pools;

pub use self::adaptive::AdaptiveLimit;
pub use self::class::Class;
pub use self::lease::Lease;
pub use self::pools::{RequestPools, RequestPoolsBuilder};
pub use crate::scope::Scoped;
