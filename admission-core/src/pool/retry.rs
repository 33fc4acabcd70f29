//! The retry hint a refusal carries.
//!
//! This module owns [`RetryHint`] and the arithmetic that turns recent work
//! durations into whole seconds. It must never return less than 1 s or more
//! than the configured cap.

use std::time::Duration;

/// How a pool computes the `Retry-After` hint of its refusals.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_core::pool::{Pool, RetryHint};
///
/// let pool = Pool::builder("registry")
///     .capacity(2)
///     .retry_hint(RetryHint::Fixed(Duration::from_secs(5)))
///     .build()
///     .unwrap();
/// let _a = pool.try_admit().unwrap();
/// let _b = pool.try_admit().unwrap();
/// assert_eq!(pool.try_admit().unwrap_err().retry_after_secs(), 5);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryHint {
    /// Always the same hint, rounded up to whole seconds.
    Fixed(Duration),
    /// The pool's recent work duration, rounded up to whole seconds, at
    /// least 1 and at most `cap`.
    Observed {
        /// The largest hint ever sent.
        cap: Duration,
    },
}

impl Default for RetryHint {
    /// `Observed` with a cap of 30 s.
    fn default() -> Self {
        RetryHint::Observed {
            cap: Duration::from_secs(30),
        }
    }
}

impl RetryHint {
    /// Whether the configured value is at least one second.
    pub(crate) fn is_valid(self) -> bool {
        match self {
            RetryHint::Fixed(d) | RetryHint::Observed { cap: d } => d >= Duration::from_secs(1),
        }
    }

    /// The rule in whole seconds, computed once when the pool is built so
    /// that a refusal does no wide arithmetic.
    pub(crate) fn rule(self) -> Rule {
        match self {
            RetryHint::Fixed(d) => Rule::Fixed(ceil_secs(d.as_micros())),
            RetryHint::Observed { cap } => Rule::Observed {
                cap: ceil_secs(cap.as_micros()),
            },
        }
    }
}

/// A [`RetryHint`] in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    Fixed(u32),
    Observed { cap: u32 },
}

impl Rule {
    /// The hint in whole seconds for a pool whose recent work took
    /// `recent_micros` on average.
    #[inline]
    pub(crate) fn secs(self, recent_micros: u64) -> u32 {
        match self {
            Rule::Fixed(secs) => secs,
            Rule::Observed { cap } => ceil_secs(u128::from(recent_micros)).min(cap),
        }
    }
}

/// Microseconds rounded up to whole seconds, at least 1, saturating.
#[inline]
fn ceil_secs(micros: u128) -> u32 {
    // Through u64 when it fits, which is every realistic duration: a u128
    // division is a library call.
    let secs = match u64::try_from(micros) {
        Ok(micros) => u128::from(micros.div_ceil(1_000_000)),
        Err(_) => micros.div_ceil(1_000_000),
    };
    u32::try_from(secs.max(1)).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observed_hint_rounds_up_and_stays_within_one_and_cap() {
        let hint = RetryHint::Observed {
            cap: Duration::from_secs(10),
        }
        .rule();
        assert_eq!(hint.secs(0), 1, "no history still says 1 s");
        assert_eq!(hint.secs(1), 1);
        assert_eq!(hint.secs(1_000_000), 1);
        assert_eq!(hint.secs(1_000_001), 2, "rounds up");
        assert_eq!(hint.secs(u64::MAX), 10, "capped");
    }

    #[test]
    fn fixed_hint_rounds_up() {
        assert_eq!(
            RetryHint::Fixed(Duration::from_millis(1500)).rule().secs(0),
            2
        );
        assert_eq!(
            RetryHint::Fixed(Duration::from_secs(u64::MAX))
                .rule()
                .secs(0),
            u32::MAX
        );
    }
}
