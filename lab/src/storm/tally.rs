//! What a phase's scrapers saw, and the percentiles over it.
//!
//! This module owns [`Tally`]. Admitted and refused answers are timed
//! separately and never mixed; there is no coordinated-omission correction.

use std::time::Duration;

/// The answers one or more scrapers got.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Latency of each `200`, from sending to the end of the body.
    pub ok: Vec<Duration>,
    /// Latency of each `503`, likewise.
    pub refused: Vec<Duration>,
    /// Requests the scraper stopped waiting for (its give-up time, or the
    /// end of the phase).
    pub gave_up: u64,
    /// Connection failures and answers other than `200` and `503`.
    pub errors: u64,
}

impl Tally {
    /// Every request counted.
    pub fn requests(&self) -> u64 {
        self.ok.len() as u64 + self.refused.len() as u64 + self.gave_up + self.errors
    }

    /// Adds `other` into this tally.
    pub fn merge(&mut self, other: Tally) {
        self.ok.extend(other.ok);
        self.refused.extend(other.refused);
        self.gave_up += other.gave_up;
        self.errors += other.errors;
    }
}

/// The nearest-rank `p`-th percentile (`p` in 0..=100) of `samples`, or
/// `None` when there are none. Sorts `samples`.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::storm::percentile;
///
/// let mut samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
/// assert_eq!(percentile(&mut samples, 50.0), Some(Duration::from_millis(50)));
/// assert_eq!(percentile(&mut samples, 99.0), Some(Duration::from_millis(99)));
/// assert_eq!(percentile(&mut [], 50.0), None);
/// ```
pub fn percentile(samples: &mut [Duration], p: f64) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let n = samples.len();
    // Nearest rank: the smallest sample with at least p% at or below it.
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(samples[rank.clamp(1, n) - 1])
}
