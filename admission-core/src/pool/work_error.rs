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

/// Every `WorkError` is an error, whatever the work's own error type
/// (`WorkError<()>` included), so it can be the `#[source]` of an app's own
/// error enum. Its [`source`](std::error::Error::source) is the
/// [`Refusal`] of a refused work, so [`Refusal::find`] finds it however
/// deep the app wrapped it; the work's own error is not a source (a report
/// walking the chain would print its message, a user value): it is the
/// [`Failed`](WorkError::Failed) variant's, to match on.
///
/// # Examples
///
/// ```
/// use std::error::Error;
/// use admission_core::{Pool, Refusal, WorkError};
///
/// let pool = Pool::new("registry", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refused: WorkError<()> = pool.try_admit().unwrap_err().into();
/// let as_error: &(dyn Error + 'static) = &refused;
/// assert_eq!(Refusal::find(as_error).unwrap().pool(), "registry");
/// ```
impl<E: fmt::Debug + 'static> std::error::Error for WorkError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.refusal().map(|refusal| refusal as _)
    }
}
