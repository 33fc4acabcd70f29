//! The one construction error of this crate's settings.
//!
//! This module owns [`ZeroSetting`]: a progress bound or a connection
//! limit given as zero, named by its setting. It must never be returned
//! from a request path: every setting is checked where it is built.

use std::fmt;

/// A setting that must be above zero was given as zero: a
/// [`ProgressTimeout`](crate::body::ProgressTimeout) (which would end every
/// body whose reader is not already waiting), or a connection limit.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_http::body::ProgressTimeout;
///
/// let err = ProgressTimeout::new(Duration::ZERO).unwrap_err();
/// assert_eq!(err.setting(), "progress_timeout");
/// assert_eq!(err.to_string(), "`progress_timeout` must be above zero");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZeroSetting(&'static str);

impl ZeroSetting {
    pub(crate) const fn new(setting: &'static str) -> ZeroSetting {
        ZeroSetting(setting)
    }

    /// The setting at fault, as its builder method is named.
    #[must_use]
    pub fn setting(&self) -> &'static str {
        self.0
    }
}

impl fmt::Display for ZeroSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` must be above zero", self.0)
    }
}

impl std::error::Error for ZeroSetting {}
