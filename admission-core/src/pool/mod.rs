//! Pools of slots: the gate that decides who may start work, and the slot
//! guard that holds capacity until the work ends.
//!
//! This module declares and re-exports; each file owns one piece.

mod builder;
mod core;
mod retry;
mod slot;
mod stats;

pub use self::builder::PoolBuilder;
pub use self::core::{Admission, Pool};
pub(crate) use self::core::{Kind, PoolInner};
pub use self::retry::RetryHint;
pub(crate) use self::retry::Rule;
pub use self::slot::Slot;
pub(crate) use self::stats::Counters;
pub use self::stats::{DURATION_BUCKETS, PoolStats};
