//! What awaiting offloaded work can end in, besides its output.
//!
//! This module owns [`WorkError`]. Its `Display` never prints the work's own
//! error message: only what kind of end it was.

use std::fmt;

use crate::refusal::Refusal;

/// Why offloaded work produced no output.
///
/// # Examples
///
/// ```
/// use admission_core::{Admission, Pool, WorkError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let pool = Pool::new("registry", 1).unwrap();
/// let result = pool.run(|| -> Result<(), std::fmt::Error> { panic!("boom") }, Admission::FailFast).await;
/// assert_eq!(result, Err(WorkError::Panicked));
/// assert_eq!(pool.stats().in_use, 0, "a panic releases the slot");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkError<E> {
    /// The work was not admitted.
    Refused(Refusal),
    /// The work ran and returned its own error.
    Failed(E),
    /// The work panicked; the worker thread survived and the slot is back.
    Panicked,
    /// Shutdown dropped the work before it started.
    Cancelled,
}

impl<E> WorkError<E> {
    /// The refusal, if the work was not admitted.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            WorkError::Refused(r) => Some(r),
            _ => None,
        }
    }

    /// The class named in logs: the refusal's code class, the short type
    /// name of the work's error, `panic` or `cancelled`.
    pub fn log_class(&self) -> &'static str {
        match self {
            WorkError::Refused(r) => r.code().log_class(),
            WorkError::Failed(_) => crate::log::short_type_name::<E>(),
            WorkError::Panicked => "panic",
            WorkError::Cancelled => "cancelled",
        }
    }

    /// Maps the work's own error.
    pub fn map_err<F, E2>(self, f: F) -> WorkError<E2>
    where
        F: FnOnce(E) -> E2,
    {
        match self {
            WorkError::Refused(r) => WorkError::Refused(r),
            WorkError::Failed(e) => WorkError::Failed(f(e)),
            WorkError::Panicked => WorkError::Panicked,
            WorkError::Cancelled => WorkError::Cancelled,
        }
    }
}

impl<E> From<Refusal> for WorkError<E> {
    fn from(refusal: Refusal) -> Self {
        WorkError::Refused(refusal)
    }
}

impl<E> fmt::Display for WorkError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkError::Refused(r) => fmt::Display::fmt(r, f),
            WorkError::Failed(_) => write!(f, "work failed ({})", self.log_class()),
            WorkError::Panicked => f.write_str("work panicked"),
            WorkError::Cancelled => f.write_str("work cancelled by shutdown before it started"),
        }
    }
}

impl<E> std::error::Error for WorkError<E>
where
    E: std::error::Error + 'static,
{
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WorkError::Refused(r) => Some(r),
            WorkError::Failed(e) => Some(e),
            _ => None,
        }
    }
}
