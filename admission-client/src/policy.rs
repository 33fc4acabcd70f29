//! What the layer retries, how long it waits, and what it carries.
//!
//! This module owns [`RetryPolicy`], its defaults and its checks. It must
//! never accept a policy that retries without bound.

use std::time::Duration;

use crate::budget::RetryBudget;
use crate::error::ConfigError;
use crate::hints::UNAVAILABLE;
use crate::throttle::AdaptiveThrottle;

/// The retry policy of a [`RetryLayer`](crate::RetryLayer).
///
/// Defaults: 3 attempts (the first included); a Linkerd budget (20%, 10/s,
/// 10 s); an adaptive throttle with K = 2 over 1 s; back-off from 25 ms,
/// doubling, jittered in its upper half, at most 1 s; the server's hint in
/// place of the back-off (never earlier; up to 5% later for a hint in
/// whole seconds, up to 1 ms for a millisecond one); idempotent methods and gRPC `UNAVAILABLE`
/// retried; bodies kept up to 64 KiB; no deadline of its own (the caller's
/// is carried); an attempt needs at least 1 ms; a hint longer than 10 s
/// is not waited for (the refusal is the answer).
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_client::{RetryBudget, RetryPolicy};
///
/// let policy = RetryPolicy::default()
///     .max_attempts(4)
///     .timeout(Duration::from_millis(500))
///     .budget(Some(RetryBudget::new(0.1, 5, Duration::from_secs(10)).unwrap()));
/// assert!(policy.check().is_ok());
/// assert!(RetryPolicy::default().max_attempts(0).check().is_err());
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub(crate) max_attempts: u32,
    pub(crate) base_backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) budget: Option<RetryBudget>,
    pub(crate) throttle: Option<AdaptiveThrottle>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) min_attempt: Duration,
    pub(crate) any_method: bool,
    pub(crate) grpc_codes: Vec<u16>,
    pub(crate) replay_limit: usize,
    pub(crate) max_hint: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_backoff: Duration::from_millis(25),
            max_backoff: Duration::from_secs(1),
            budget: Some(RetryBudget::linkerd_default()),
            throttle: Some(
                AdaptiveThrottle::new(2.0, Duration::from_secs(1)).expect("a valid default"),
            ),
            timeout: None,
            min_attempt: Duration::from_millis(1),
            any_method: false,
            grpc_codes: vec![UNAVAILABLE],
            replay_limit: 64 * 1024,
            max_hint: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// Attempts at most, the first included (1 to 10; 1 never retries).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }

    /// The back-off when the server gave no hint: the n-th retry waits a
    /// random time in `[b/2, b)` where `b = min(max, base × 2ⁿ)`.
    #[must_use]
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base_backoff = base;
        self.max_backoff = max;
        self
    }

    /// The retry budget shared by every call (`None`: attempts only bound
    /// retries, which a retry storm needs no more than).
    #[must_use]
    pub fn budget(mut self, budget: Option<RetryBudget>) -> Self {
        self.budget = budget;
        self
    }

    /// The adaptive throttle (`None`: every call is sent). It judges a
    /// call's first attempt; retries are the budget's to bound.
    #[must_use]
    pub fn throttle(mut self, throttle: Option<AdaptiveThrottle>) -> Self {
        self.throttle = throttle;
        self
    }

    /// The deadline of a call whose caller set none (no `admission`
    /// [`Caller`](admission_core::Caller) with one, as a request extension
    /// or the caller scope, and no budget header).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The least time an attempt needs: none starts with less left.
    #[must_use]
    pub fn min_attempt(mut self, min: Duration) -> Self {
        self.min_attempt = min;
        self
    }

    /// Retries non-idempotent HTTP methods too (`POST`, `PATCH`): only for
    /// a service known to make them safe to repeat. A single request can
    /// say so instead with the [`RetryAnyway`](crate::RetryAnyway)
    /// extension.
    #[must_use]
    pub fn retry_any_method(mut self, yes: bool) -> Self {
        self.any_method = yes;
        self
    }

    /// The gRPC status codes worth another attempt (default `UNAVAILABLE`,
    /// 14). `DEADLINE_EXCEEDED` (4) is never retried, listed or not.
    #[must_use]
    pub fn grpc_codes(mut self, codes: &[u16]) -> Self {
        self.grpc_codes = codes.to_vec();
        self
    }

    /// The largest request body kept for a retry; a larger one fails the
    /// call before anything is sent (`CLIENT_BODY_TOO_LARGE`).
    #[must_use]
    pub fn replay_limit(mut self, bytes: usize) -> Self {
        self.replay_limit = bytes;
        self
    }

    /// The longest server hint the layer waits for; a longer one ends the
    /// call with the refusal, so that no server can park a caller that has
    /// no deadline of its own.
    #[must_use]
    pub fn max_hint(mut self, max: Duration) -> Self {
        self.max_hint = max;
        self
    }

    /// Checks the policy ([`RetryLayer::new`](crate::RetryLayer::new) does).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] ([`ConfigError::BadRetryPolicy`]) for attempts outside 1 to 10,
    /// a zero base back-off or a maximum below it, a zero timeout or a
    /// gRPC code above 16.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !(1..=10).contains(&self.max_attempts) {
            return Err(ConfigError::BadRetryPolicy {
                reason: "attempts must be within 1 to 10",
            });
        }
        if self.base_backoff.is_zero() || self.max_backoff < self.base_backoff {
            return Err(ConfigError::BadRetryPolicy {
                reason: "the back-off must be positive, its maximum no less than its base",
            });
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err(ConfigError::BadRetryPolicy {
                reason: "the timeout must be positive",
            });
        }
        if self.grpc_codes.iter().any(|&c| c > 16) {
            return Err(ConfigError::BadRetryPolicy {
                reason: "gRPC codes are 0 to 16",
            });
        }
        Ok(())
    }
}
