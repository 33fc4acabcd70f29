//! Who is asking: the criticality and the deadline an admission carries
//! ([`Caller`], [`Criticality`]).
//!
//! The types live with the task-local scope that carries a caller through
//! a request (the crate's bottom module); this module is their public
//! path. It must never hold logic.

pub use crate::scope::{Caller, Criticality};
