//! Naming a failure by its class and code, never its message.
//!
//! This module owns [`Cause`], [`ErrorCode`] and [`log_failure`], for code
//! that logs its own failures (a loop's "scan failed") the way admission
//! logs its own. It must never render an error's `Display` text or any value
//! it carries: logs say what kind of failure it was, not what data it held.

use std::error::Error;
use std::fmt;

use crate::refusal::Refusal;

/// An error's class (its short type name, or a refusal's kind) and, where it
/// has one, its stable code.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_core::log::Cause;
///
/// let pool = Pool::new("recovery", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refusal = pool.try_admit().unwrap_err();
/// assert_eq!(Cause::of(&refusal).to_string(), "Saturated ADMISSION_SATURATED");
///
/// let io = std::io::Error::other("secret tenant id 42");
/// assert_eq!(Cause::of(&io).to_string(), "Error", "never the message");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause {
    class: &'static str,
    code: Option<&'static str>,
}

/// An error type with a stable code of its own, so that [`Cause::coded`]
/// can name it.
///
/// # Examples
///
/// ```
/// use admission_core::log::{Cause, ErrorCode};
///
/// #[derive(Debug)]
/// struct CatalogError;
/// impl std::fmt::Display for CatalogError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("catalog") }
/// }
/// impl std::error::Error for CatalogError {}
/// impl ErrorCode for CatalogError {
///     fn code(&self) -> &'static str { "WV-OPERATION-CAPACITY" }
/// }
///
/// assert_eq!(Cause::coded(&CatalogError).to_string(), "CatalogError WV-OPERATION-CAPACITY");
/// ```
pub trait ErrorCode {
    /// The stable code.
    fn code(&self) -> &'static str;
}

impl Cause {
    /// The cause of any error: a [`Refusal`] anywhere in its `source` chain
    /// names its kind and code; otherwise the class is the error's short type
    /// name and there is no code.
    pub fn of<E: Error + 'static>(err: &E) -> Cause {
        let mut next: Option<&(dyn Error + 'static)> = Some(err);
        while let Some(current) = next {
            if let Some(refusal) = current.downcast_ref::<Refusal>() {
                return Cause::from_refusal(refusal);
            }
            next = current.source();
        }
        Cause {
            class: short_type_name::<E>(),
            code: None,
        }
    }

    /// The cause of an error that carries its own code.
    pub fn coded<E: ErrorCode>(err: &E) -> Cause {
        Cause {
            class: short_type_name::<E>(),
            code: Some(err.code()),
        }
    }

    /// The cause of a refusal.
    pub fn from_refusal(refusal: &Refusal) -> Cause {
        Cause {
            class: refusal.code().log_class(),
            code: Some(refusal.code().as_str()),
        }
    }

    /// The class, e.g. `Saturated` or `Error`.
    pub fn log_class(&self) -> &'static str {
        self.class
    }

    /// The code, where the error has one.
    pub fn code(&self) -> Option<&'static str> {
        self.code
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            Some(code) => write!(f, "{} {code}", self.class),
            None => f.write_str(self.class),
        }
    }
}

/// Logs `"{operation} failed ({class} {code}){consequence}"` at WARN with
/// fields `class` and `code`, e.g. `Tenant recovery scan failed (Saturated
/// ADMISSION_SATURATED); traversal will continue`.
///
/// `operation` and `consequence` are static text, so no user value can reach
/// the log through them; the error contributes only its [`Cause`].
///
/// # Examples
///
/// ```
/// use admission_core::log::{log_failure, Cause};
///
/// let err = std::io::Error::other("do not log me");
/// let line = log_failure("Tenant recovery scan", Cause::of(&err), "; traversal will continue");
/// assert_eq!(line, "Tenant recovery scan failed (Error); traversal will continue");
/// ```
pub fn log_failure(operation: &'static str, cause: Cause, consequence: &'static str) -> String {
    let line = format!("{operation} failed ({cause}){consequence}");
    tracing::warn!(
        class = cause.class,
        code = cause.code.unwrap_or(""),
        "{line}"
    );
    line
}

/// The last path segment of a type's name, without generic arguments:
/// `std::io::error::Error` becomes `Error`.
pub(crate) fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that wraps a refusal, as a caller's own error type would.
    #[derive(Debug)]
    struct Wrapped(Refusal);

    impl fmt::Display for Wrapped {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("tenant 42 secret")
        }
    }

    impl Error for Wrapped {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&self.0)
        }
    }

    struct Coded;

    impl ErrorCode for Coded {
        fn code(&self) -> &'static str {
            "MY-CODE"
        }
    }

    #[test]
    fn a_cause_gives_its_class_and_code_and_never_the_message() {
        let refusal = Refusal::new(
            crate::refusal::intern("log-cause".to_owned()),
            crate::Code::WaitTimedOut,
            crate::Criticality::Default,
            1,
        );
        let wrapped = Cause::of(&Wrapped(refusal));
        assert_eq!(
            wrapped.log_class(),
            "WaitTimedOut",
            "the refusal in the chain names it"
        );
        assert_eq!(wrapped.code(), Some("ADMISSION_WAIT_TIMEOUT"));

        let io = Cause::of(&std::io::Error::other("tenant 42 secret"));
        assert_eq!((io.log_class(), io.code()), ("Error", None));

        let coded = Cause::coded(&Coded);
        assert_eq!(
            (coded.log_class(), coded.code()),
            ("Coded", Some("MY-CODE"))
        );
        let line = log_failure("Scan", coded, "; retrying");
        assert_eq!(line, "Scan failed (Coded MY-CODE); retrying");
    }

    #[test]
    fn short_type_name_strips_paths_and_generics() {
        assert_eq!(short_type_name::<std::io::Error>(), "Error");
        assert_eq!(short_type_name::<Vec<std::io::Error>>(), "Vec");
        assert_eq!(short_type_name::<u8>(), "u8");
    }
}
