//! The errors of this crate, each with a stable code.
//!
//! This module owns [`Error`] (a call) and names the construction error,
//! [`ConfigError`] (the core's).
//! It must never carry a request's or a response's own text.

use std::fmt;

/// A retry configuration out of bounds, refused when it is built: the
/// family's one construction error, [`admission_core::ConfigError`], with
/// a variant each for the budget, the throttle and the policy.
///
/// # Examples
///
/// ```
/// use admission_client::ConfigError;
///
/// let err = admission_client::RetryBudget::new(2000.0, 0, std::time::Duration::from_secs(10)).unwrap_err();
/// assert!(matches!(err, ConfigError::BadRetryBudget { .. }));
/// ```
pub use admission_core::ConfigError;

/// Why a call through the [`RetryLayer`](crate::RetryLayer) has no
/// response. A refusal the layer did not retry is no error: it is the
/// response, as the server sent it.
///
/// # Examples
///
/// ```
/// use admission_client::Error;
///
/// let err: Error<std::io::Error> = Error::Throttled;
/// assert_eq!(err.code(), "CLIENT_THROTTLED");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error<E> {
    /// The inner client failed (and was not, or no longer, retried).
    Inner(E),
    /// The adaptive throttle rejected the call locally: the server has
    /// been refusing most of what this client sent.
    Throttled,
    /// The call's deadline left no time for an attempt, or ran out during
    /// one (the attempt was cancelled).
    DeadlineExceeded,
    /// The request body was larger than the replay limit and could not be
    /// kept for a retry; nothing was sent.
    BodyTooLarge,
    /// The request body failed while it was read for replay; nothing was
    /// sent.
    Body(Box<dyn std::error::Error + Send + Sync>),
}

impl<E> Error<E> {
    /// The stable code: `CLIENT_INNER`, `CLIENT_THROTTLED`,
    /// `CLIENT_DEADLINE_EXCEEDED`, `CLIENT_BODY_TOO_LARGE` or `CLIENT_BODY`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Inner(_) => "CLIENT_INNER",
            Error::Throttled => "CLIENT_THROTTLED",
            Error::DeadlineExceeded => "CLIENT_DEADLINE_EXCEEDED",
            Error::BodyTooLarge => "CLIENT_BODY_TOO_LARGE",
            Error::Body(_) => "CLIENT_BODY",
        }
    }
}

impl<E: fmt::Display> fmt::Display for Error<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Inner(err) => write!(f, "CLIENT_INNER: {err}"),
            Error::Throttled => {
                f.write_str("CLIENT_THROTTLED: rejected locally, the server refuses most calls")
            }
            Error::DeadlineExceeded => {
                f.write_str("CLIENT_DEADLINE_EXCEEDED: no time left for an attempt")
            }
            Error::BodyTooLarge => {
                f.write_str("CLIENT_BODY_TOO_LARGE: the body exceeds the replay limit")
            }
            Error::Body(_) => f.write_str("CLIENT_BODY: the request body failed"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for Error<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Inner(err) => Some(err),
            Error::Body(err) => Some(&**err),
            _ => None,
        }
    }
}
