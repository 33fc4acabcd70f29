//! Bounded shutdown: one deadline for lifespan loops and every pool.
//!
//! This module declares and re-exports; each file owns one piece.

mod coordinator;
pub(crate) mod drain;
mod report;

pub use self::coordinator::{DEFAULT_DEADLINE, Shutdown};
pub use self::report::{Cleanup, Outcome, PoolReport, ShutdownReport};
