//! The admission middleware: a [`Transform`](actix_web::dev::Transform) and
//! the service it builds.
//!
//! This module declares and re-exports; each file owns one piece.

mod classify;
mod service;
mod transform;

pub(crate) use self::classify::Classify;
pub use self::service::AdmissionMiddleware;
pub use self::transform::AdmissionControl;
