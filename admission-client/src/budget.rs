//! The retry budget, with Linkerd's and Finagle's meaning: retries may be at
//! most a ratio of the requests made over a time to live, plus a minimum
//! per second, so that a failing server sees a bounded share of extra load.
//!
//! This module owns the window (deposits and withdrawals in slots of a tenth
//! of the time to live) and their arithmetic. It must never grant more than
//! the ratio allows: the ratio is held in millionths, rounded down, and
//! every comparison is in whole numbers, so a fractional ratio never rounds
//! up to an extra retry (the over-allocation of tower's `TpsBudget`,
//! tower-rs/tower#857). It never sleeps and never allocates after
//! construction.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::ConfigError;

/// Millionths: a ratio of 0.2 is held as 200 000.
const UNIT: u64 = 1_000_000;
/// The window keeps this many slots over one time to live.
const SLOTS: usize = 10;

/// A retry budget shared by every clone (and every request through a
/// [`RetryLayer`](crate::RetryLayer) built with it).
///
/// Each original request deposits `ratio` of a retry; each retry withdraws
/// one; deposits and withdrawals expire after the time to live; and a
/// reserve of `min_per_sec × ttl` retries is always there for low rates.
/// A retry is granted only when the deposits of the last `ttl` (seen in
/// slots of `ttl / 10`) plus the reserve cover it and every other retry of
/// that window.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_client::RetryBudget;
///
/// // One retry per ten requests, no minimum: 15 requests buy exactly one.
/// let budget = RetryBudget::new(0.1, 0, Duration::from_secs(10)).unwrap();
/// for _ in 0..15 {
///     budget.deposit();
/// }
/// assert!(budget.try_withdraw());
/// assert!(!budget.try_withdraw(), "1.5 retries round down to one");
///
/// assert!(RetryBudget::new(-0.1, 0, Duration::from_secs(10)).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct RetryBudget {
    window: Arc<Mutex<Window>>,
    /// The ratio in millionths of a retry per request.
    per_request: u64,
    /// The reserve in millionths of a retry.
    reserve: u64,
    slot: Duration,
    epoch: Instant,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    index: u64,
    deposits: u64,
    withdrawals: u64,
}

#[derive(Debug)]
struct Window {
    slots: [Slot; SLOTS],
}

impl RetryBudget {
    /// Linkerd's default: 20% retries, at least 10 per second, over 10 s.
    ///
    /// # Examples
    ///
    /// ```
    /// let budget = admission_client::RetryBudget::default();
    /// assert!(budget.try_withdraw(), "the minimum is there before any request");
    /// ```
    pub fn linkerd_default() -> RetryBudget {
        RetryBudget::new(0.2, 10, Duration::from_secs(10)).expect("a valid default")
    }

    /// A budget of `ratio` retries per request (0 to 1000, finite), at
    /// least `min_per_sec` retries per second, over `ttl` (1 s to 60 s, as
    /// Linkerd bounds it).
    ///
    /// # Errors
    ///
    /// [`ConfigError`] ([`ConfigError::BadRetryBudget`]) for a ratio or a time to live
    /// out of those bounds.
    pub fn new(ratio: f64, min_per_sec: u32, ttl: Duration) -> Result<RetryBudget, ConfigError> {
        if !(ratio.is_finite() && (0.0..=1000.0).contains(&ratio)) {
            return Err(ConfigError::BadRetryBudget {
                reason: "the ratio must be within 0 to 1000",
            });
        }
        if !(Duration::from_secs(1)..=Duration::from_secs(60)).contains(&ttl) {
            return Err(ConfigError::BadRetryBudget {
                reason: "the time to live must be within 1 s to 60 s",
            });
        }
        // Rounded down: a budget never grants a fraction it was not given.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "0 <= ratio <= 1000, so the product fits and is not negative"
        )]
        let per_request = (ratio * UNIT as f64).floor() as u64;
        let reserve = u64::from(min_per_sec) * u64::try_from(ttl.as_millis()).unwrap_or(0) * 1000;
        Ok(RetryBudget {
            window: Arc::new(Mutex::new(Window {
                slots: [Slot::default(); SLOTS],
            })),
            per_request,
            reserve,
            slot: ttl / u32::try_from(SLOTS).unwrap_or(10),
            epoch: Instant::now(),
        })
    }

    /// Records one original request (never a retry).
    pub fn deposit(&self) {
        self.deposit_at(Instant::now());
    }

    /// Takes one retry from the budget: `true` when it was granted.
    pub fn try_withdraw(&self) -> bool {
        self.try_withdraw_at(Instant::now())
    }

    pub(crate) fn deposit_at(&self, now: Instant) {
        let index = self.index(now);
        self.with_window(|window| window.slot(index).deposits += 1);
    }

    pub(crate) fn try_withdraw_at(&self, now: Instant) -> bool {
        let index = self.index(now);
        self.with_window(|window| {
            let (deposits, withdrawals) = window.totals(index);
            let covered = self.reserve + deposits * self.per_request;
            if covered >= (withdrawals + 1) * UNIT {
                window.slot(index).withdrawals += 1;
                true
            } else {
                false
            }
        })
    }

    fn index(&self, now: Instant) -> u64 {
        crate::throttle::slot_index(now, self.epoch, self.slot)
    }

    fn with_window<R>(&self, f: impl FnOnce(&mut Window) -> R) -> R {
        f(&mut crate::throttle::unpoisoned(&self.window))
    }
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget::linkerd_default()
    }
}

impl Window {
    /// The slot for `index`, emptied if it last held an expired one.
    fn slot(&mut self, index: u64) -> &mut Slot {
        let slot = &mut self.slots[usize::try_from(index % SLOTS as u64).unwrap_or(0)];
        if slot.index != index {
            *slot = Slot {
                index,
                ..Slot::default()
            };
        }
        slot
    }

    /// Deposits and withdrawals of the `SLOTS` slots ending at `index`.
    fn totals(&self, index: u64) -> (u64, u64) {
        self.slots
            .iter()
            .filter(|slot| slot.index + (SLOTS as u64) > index && slot.index <= index)
            .fold((0, 0), |(d, w), slot| {
                (d + slot.deposits, w + slot.withdrawals)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fractional_ratios_are_exact_where_floats_round_up() {
        // tower#857: 0.1 over 10 requests must be one retry, never two.
        for (ratio, requests, expected) in [(0.1, 10, 1), (0.1, 19, 1), (0.3, 10, 3), (0.7, 3, 2)] {
            let budget = RetryBudget::new(ratio, 0, Duration::from_secs(10)).unwrap();
            for _ in 0..requests {
                budget.deposit();
            }
            let granted = (0..100).filter(|_| budget.try_withdraw()).count();
            assert_eq!(granted, expected, "{ratio} x {requests}");
        }
    }

    #[test]
    fn deposits_expire_after_the_time_to_live() {
        let budget = RetryBudget::new(1.0, 0, Duration::from_secs(1)).unwrap();
        let start = Instant::now();
        budget.deposit_at(start);
        assert!(
            !budget.try_withdraw_at(start + Duration::from_millis(1100)),
            "expired"
        );
        budget.deposit_at(start + Duration::from_millis(1100));
        assert!(budget.try_withdraw_at(start + Duration::from_millis(1150)));
    }

    #[test]
    fn bad_configurations_are_refused_at_construction() {
        for (ratio, ttl) in [
            (f64::NAN, 10),
            (-0.5, 10),
            (1000.5, 10),
            (f64::INFINITY, 10),
            (0.2, 0),
            (0.2, 61),
        ] {
            let err = RetryBudget::new(ratio, 1, Duration::from_secs(ttl)).unwrap_err();
            assert!(
                matches!(err, crate::ConfigError::BadRetryBudget { .. }),
                "{err}"
            );
        }
    }

    proptest! {
        /// Over the window of every granted retry (the time to live ending
        /// at it), retries never exceed ratio x requests plus the minimum x
        /// ttl, computed here exactly in rationals.
        #[test]
        fn never_more_than_ratio_plus_minimum_over_any_window(
            per_mille in 0u64..=3000,
            min_per_sec in 0u32..3,
            ttl_s in 1u64..4,
            events in proptest::collection::vec((0u64..400, any::<bool>()), 1..400),
        ) {
            #[expect(clippy::cast_precision_loss, reason = "small test values")]
            let ratio = per_mille as f64 / 1000.0;
            let ttl = Duration::from_secs(ttl_s);
            let budget = RetryBudget::new(ratio, min_per_sec, ttl).unwrap();
            let start = budget.epoch;
            let mut t = Duration::ZERO;
            // (time, is_retry) of every deposit and granted retry.
            let mut log: Vec<(Duration, bool)> = Vec::new();
            for (gap_ms, retry) in events {
                t += Duration::from_millis(gap_ms);
                if retry {
                    if budget.try_withdraw_at(start + t) {
                        log.push((t, true));
                        // The window of ttl ending now, slot-aligned as the
                        // window sees it (never longer than ttl).
                        let slot = ttl / 10;
                        let first = (t.as_nanos() / slot.as_nanos()).saturating_sub(9);
                        let from = slot * u32::try_from(first).unwrap();
                        let in_window = |&&(at, _): &&(Duration, bool)| at >= from && at <= t;
                        let requests = log.iter().filter(in_window).filter(|e| !e.1).count() as u64;
                        let retries = log.iter().filter(in_window).filter(|e| e.1).count() as u64;
                        // retries <= per_mille/1000 * requests + min * ttl, in thousandths.
                        let allowed = per_mille * requests + u64::from(min_per_sec) * ttl_s * 1000;
                        prop_assert!(retries * 1000 <= allowed,
                            "{retries} retries for {requests} requests at {ratio} + {min_per_sec}/s over {ttl_s}s");
                        prop_assert!(t - from <= ttl);
                    }
                } else {
                    budget.deposit_at(start + t);
                    log.push((t, false));
                }
            }
        }
    }
}
