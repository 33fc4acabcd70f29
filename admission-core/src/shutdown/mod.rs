//! Bounded shutdown: one deadline for lifespan loops and every pool.
//!
//! The root re-exports [`Shutdown`]; this module holds its report types
//! and [`Readiness`], the ready state shutdown withdraws.

mod coordinator;
pub(crate) mod drain;
mod readiness;
mod report;

pub use self::coordinator::{DEFAULT_DEADLINE, Shutdown};
pub use self::readiness::Readiness;
#[cfg(loom)]
pub(crate) use self::report::Outcome;
pub use self::report::{PoolReport, ShutdownReport};
/// The token [`Shutdown::stop_token`] returns and lifespan loops are given.
pub use tokio_util::sync::CancellationToken;
