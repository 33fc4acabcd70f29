//! Blocking work and the bounded worker threads that run it.
//!
//! This module declares and re-exports; each file owns one piece.

mod error;
mod future;
mod offload;
mod registry_work;
mod workers;

pub use self::error::WorkError;
pub use self::future::WorkFuture;
pub(crate) use self::offload::{Hold, offload, offload_holding, offload_to};
pub use self::registry_work::RegistryWork;
pub(crate) use self::workers::{Job, Workers};
