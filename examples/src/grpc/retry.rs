//! A retry policy for tonic calls, as gRPC's retry design (gRFC A6) writes
//! one, because tonic's client has none (grpc/grpc-rust#1463): retry the
//! listed status codes up to a number of attempts, honour the server's
//! `grpc-retry-pushback-ms`, and otherwise back off exponentially with
//! jitter.
//!
//! This module owns [`RetryPolicy`] and what it reports ([`Retried`],
//! [`Attempt`]). It must never retry a call the server asked not to retry,
//! nor a status the policy does not list.

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::BuildHasher;
use std::time::Duration;

use admission_tonic::status::Pushback;
use tokio::time::Instant;
use tonic::{Code, Status};

/// The retry part of a gRPC service config (`retryPolicy`), applied around
/// one call.
///
/// After a failed attempt with a listed code it waits, then tries again:
/// exactly the server's pushback when the status carries one (and the
/// back-off starts over), no retry at all when the pushback says so, and
/// otherwise a random delay up to `initial_backoff × multiplierⁿ`, capped
/// at `max_backoff`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_examples::grpc::RetryPolicy;
/// use admission_tonic::status::RETRY_PUSHBACK_MS;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let policy = RetryPolicy { initial_backoff: Duration::from_millis(1), ..RetryPolicy::default() };
/// let mut refusals = 1;
/// let retried = policy
///     .call(|| {
///         let refuse = refusals > 0;
///         refusals -= 1;
///         async move {
///             if refuse {
///                 let mut status = tonic::Status::unavailable("ADMISSION_SATURATED");
///                 status.metadata_mut().insert(RETRY_PUSHBACK_MS, 20.into());
///                 Err(status)
///             } else {
///                 Ok("walked")
///             }
///         }
///     })
///     .await;
/// assert_eq!(retried.result.unwrap(), "walked");
/// assert_eq!(retried.attempts.len(), 2);
/// assert_eq!(retried.attempts[0].waited, Some(Duration::from_millis(20)), "the pushback, not the back-off");
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts at most, the first included (A6 caps this at 5).
    pub max_attempts: u32,
    /// The first back-off bound.
    pub initial_backoff: Duration,
    /// The largest back-off bound.
    pub max_backoff: Duration,
    /// How much the bound grows after each attempt.
    pub backoff_multiplier: f64,
    /// The codes worth another attempt.
    pub retryable: Vec<Code>,
}

impl Default for RetryPolicy {
    /// Four attempts, retrying `UNAVAILABLE`, back-off from 100 ms doubling
    /// up to 5 s.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            backoff_multiplier: 2.0,
            retryable: vec![Code::Unavailable],
        }
    }
}

/// One attempt of a call made under a [`RetryPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// When it was sent.
    pub sent: Instant,
    /// When its answer (or failure) arrived.
    pub ended: Instant,
    /// Its status code (`Ok` when it succeeded).
    pub code: Code,
    /// How long the policy waited after it before the next attempt, or
    /// `None` when there was none.
    pub waited: Option<Duration>,
}

/// What a call under a [`RetryPolicy`] ended with, and every attempt.
#[derive(Debug)]
pub struct Retried<T> {
    /// The last attempt's result.
    pub result: Result<T, Status>,
    /// Every attempt, in order.
    pub attempts: Vec<Attempt>,
}

impl RetryPolicy {
    /// Makes the call `attempt` makes, retrying it as the policy says.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future cancels the attempt under way (or
    /// the wait) and makes no other.
    pub async fn call<T, F, Fut>(&self, mut attempt: F) -> Retried<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Status>>,
    {
        let mut attempts = Vec::new();
        let mut bound = self.initial_backoff;
        loop {
            let sent = Instant::now();
            let result = attempt().await;
            let ended = Instant::now();
            let code = result.as_ref().map_or_else(Status::code, |_| Code::Ok);
            let last = attempts.len() + 1 >= self.max_attempts as usize;
            let wait = match &result {
                Err(status) if !last && self.retryable.contains(&status.code()) => {
                    match Pushback::from_status(status) {
                        Some(Pushback::RetryAfter(pushback)) => {
                            bound = self.initial_backoff;
                            Some(pushback)
                        }
                        Some(Pushback::DoNotRetry) => None,
                        None => {
                            let wait = jitter(bound);
                            bound = bound.mul_f64(self.backoff_multiplier).min(self.max_backoff);
                            Some(wait)
                        }
                    }
                }
                _ => None,
            };
            attempts.push(Attempt {
                sent,
                ended,
                code,
                waited: wait,
            });
            match wait {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Retried { result, attempts },
            }
        }
    }
}

/// A random duration in `[0, bound)`: A6's jitter, from the standard
/// library's per-instance random hash keys.
fn jitter(bound: Duration) -> Duration {
    let random = RandomState::new().hash_one(0u8);
    bound.mul_f64((random >> 11) as f64 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_tonic::status::RETRY_PUSHBACK_MS;

    fn refused(pushback: Option<&'static str>) -> Status {
        let mut status = Status::unavailable("ADMISSION_SATURATED");
        if let Some(value) = pushback {
            let value = value.parse().expect("an ASCII value");
            status.metadata_mut().insert(RETRY_PUSHBACK_MS, value);
        }
        status
    }

    fn quick() -> RetryPolicy {
        RetryPolicy {
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            ..RetryPolicy::default()
        }
    }

    #[tokio::test]
    async fn a_pushback_of_minus_one_stops_the_retries() {
        let retried = quick()
            .call(|| async { Err::<(), _>(refused(Some("-1"))) })
            .await;
        assert_eq!(retried.attempts.len(), 1, "the server asked not to retry");
    }

    #[tokio::test]
    async fn unlisted_codes_are_not_retried_and_attempts_are_bounded() {
        let retried = quick()
            .call(|| async { Err::<(), _>(Status::internal("ADMISSION_WORK_PANICKED")) })
            .await;
        assert_eq!(retried.attempts.len(), 1);

        let retried = quick().call(|| async { Err::<(), _>(refused(None)) }).await;
        assert_eq!(
            retried.attempts.len(),
            4,
            "max_attempts, the first included"
        );
        assert!(
            retried.attempts[..3]
                .iter()
                .all(|a| a.waited.unwrap() < Duration::from_millis(2))
        );
        assert_eq!(retried.attempts[3].waited, None);
    }

    #[test]
    fn jitter_stays_below_its_bound() {
        for _ in 0..1000 {
            assert!(jitter(Duration::from_millis(10)) < Duration::from_millis(10));
        }
    }
}
