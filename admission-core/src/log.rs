//! Naming a failure by its class and code, never its message.
//!
//! This module owns [`log_failure`], for code that logs its own failures (a
//! loop's "scan failed") the way admission logs its own. It must never
//! render an error's `Display` text or any value it carries: logs say what
//! kind of failure it was, not what data it held.

use std::error::Error;
use std::fmt;

use crate::refusal::Refusal;

/// An error's class (its short type name, or a refusal's kind) and, where a
/// refusal is in its `source` chain, that refusal's stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cause {
    class: &'static str,
    code: Option<&'static str>,
}

impl Cause {
    fn of<E: Error + 'static>(err: &E) -> Cause {
        let mut next: Option<&(dyn Error + 'static)> = Some(err);
        while let Some(current) = next {
            if let Some(refusal) = current.downcast_ref::<Refusal>() {
                return Cause {
                    class: refusal.code().log_class(),
                    code: Some(refusal.code().as_str()),
                };
            }
            next = current.source();
        }
        Cause {
            class: short_type_name::<E>(),
            code: None,
        }
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
/// fields `class` and `code`, and returns the line, e.g. `Tenant recovery
/// scan failed (Saturated ADMISSION_SATURATED); traversal will continue`.
///
/// A [`Refusal`] anywhere in the error's `source` chain names its kind and
/// code; any other error gives only its short type name as the class, and
/// an empty code. `operation` and `consequence` are static text, so no user
/// value can reach the log through them, and the error's message never does.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_core::log::log_failure;
///
/// let pool = Pool::new("recovery", 1).unwrap();
/// let _held = pool.try_admit().unwrap();
/// let refusal = pool.try_admit().unwrap_err();
/// let line = log_failure("Tenant recovery scan", &refusal, "; traversal will continue");
/// assert_eq!(
///     line,
///     "Tenant recovery scan failed (Saturated ADMISSION_SATURATED); traversal will continue"
/// );
///
/// let io = std::io::Error::other("secret tenant id 42");
/// assert_eq!(log_failure("Scan", &io, ""), "Scan failed (Error)", "never the message");
/// ```
pub fn log_failure<E: Error + 'static>(
    operation: &'static str,
    err: &E,
    consequence: &'static str,
) -> String {
    let cause = Cause::of(err);
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

    #[test]
    fn a_failure_gives_its_class_and_code_and_never_the_message() {
        let refusal = Refusal::new(
            crate::refusal::intern("log-cause".to_owned()),
            crate::Code::WaitTimedOut,
            crate::Criticality::Default,
            1,
        );
        let line = log_failure("Scan", &Wrapped(refusal), "; retrying");
        assert_eq!(
            line, "Scan failed (WaitTimedOut ADMISSION_WAIT_TIMEOUT); retrying",
            "the refusal in the chain names it"
        );

        let line = log_failure("Scan", &std::io::Error::other("tenant 42 secret"), "");
        assert_eq!(line, "Scan failed (Error)");
    }

    #[test]
    fn short_type_name_strips_paths_and_generics() {
        assert_eq!(short_type_name::<std::io::Error>(), "Error");
        assert_eq!(short_type_name::<Vec<std::io::Error>>(), "Vec");
        assert_eq!(short_type_name::<u8>(), "u8");
    }
}
