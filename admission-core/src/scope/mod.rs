//! The task-local scope, the bottom of the crate: who the current task
//! runs for ([`Caller`], [`Criticality`]) and what its pure work runs
//! under, read by `pool`, `request` and `reserve` and naming none of
//! them.
//!
//! This module only declares and re-exports.

mod caller;
mod task;

pub use self::caller::{Caller, Criticality};
pub use self::task::Scoped;
pub(crate) use self::task::{Held, Scope, ScopePart, sync_scope, sync_scope_part, with_current};
