//! Request leases: admission an HTTP request holds for its whole response,
//! by class, and the entry point for pure work.
//!
//! This module declares and re-exports; each file owns one piece.

mod class;
#[allow(clippy::module_inception)]
mod lease;
mod pools;

pub use self::class::{Class, UnknownClass};
pub use self::lease::Lease;
pub use self::pools::{RequestPools, RequestPoolsBuilder};
