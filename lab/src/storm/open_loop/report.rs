//! What an open-loop run saw, per criticality level.
//!
//! This module owns [`Report`] and [`Outcomes`]: counting each request's
//! end once, and the figures derived from the counts (goodput, availability,
//! percentiles). It never sends anything and never decides what counts as
//! an answer: the request module classifies, this module adds up.

use std::time::Duration;

use super::Criticality;
use super::mix::slot;

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum End {
    /// A `2xx` whose body ended within the client's timeout.
    Good(Duration),
    /// A `503` or `429` within the timeout.
    Refused(Duration),
    /// No whole answer within the timeout (the client closed the connection).
    TimedOut,
    /// Another status, or a connection or protocol failure.
    Error,
}

/// The requests of one criticality level (or of all of them).
///
/// Latencies run from each request's *intended* arrival instant (its place
/// in the Poisson schedule) to the end of its answer's body, so a
/// generator that fell behind shows up in them instead of hiding load.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// Arrivals drawn by the schedule.
    pub offered: u64,
    /// Arrivals not sent because [`max_outstanding`](super::OpenLoop::max_outstanding)
    /// requests were already waiting: the generator's own bound, counted,
    /// never silently skipped.
    pub dropped: u64,
    /// Latency of each `2xx` that ended within the timeout, sorted.
    pub good: Vec<Duration>,
    /// Latency of each `503` / `429` answer, sorted.
    pub refused: Vec<Duration>,
    /// Requests with no whole answer within the timeout.
    pub timed_out: u64,
    /// Other statuses and connection or protocol failures.
    pub errors: u64,
}

impl Outcomes {
    /// Requests actually sent: offered less dropped.
    pub fn sent(&self) -> u64 {
        self.offered - self.dropped
    }

    /// `2xx` answers within the timeout, per second of the arrival window.
    pub fn goodput(&self, window: Duration) -> f64 {
        per_second(self.good.len() as u64, window)
    }

    /// Offered arrivals per second of the arrival window.
    pub fn offered_rate(&self, window: Duration) -> f64 {
        per_second(self.offered, window)
    }

    /// The share of offered requests that got a `2xx` in time, in 0..=1
    /// (1 when none were offered).
    pub fn availability(&self) -> f64 {
        if self.offered == 0 {
            1.0
        } else {
            self.good.len() as f64 / self.offered as f64
        }
    }

    /// The share of offered requests refused (`503` / `429`), in 0..=1.
    pub fn refused_share(&self) -> f64 {
        if self.offered == 0 {
            0.0
        } else {
            self.refused.len() as f64 / self.offered as f64
        }
    }

    /// The nearest-rank `p`-th percentile of the good answers' latency.
    pub fn good_p(&self, p: f64) -> Option<Duration> {
        nearest_rank(&self.good, p)
    }

    /// The nearest-rank `p`-th percentile of the refusals' latency.
    pub fn refused_p(&self, p: f64) -> Option<Duration> {
        nearest_rank(&self.refused, p)
    }

    pub(super) fn count(&mut self, end: End) {
        match end {
            End::Good(latency) => self.good.push(latency),
            End::Refused(latency) => self.refused.push(latency),
            End::TimedOut => self.timed_out += 1,
            End::Error => self.errors += 1,
        }
    }

    /// Adds `other`'s requests to these (the tenants run adds up each
    /// tenant's run).
    pub fn merge(&mut self, other: &Outcomes) {
        self.offered += other.offered;
        self.dropped += other.dropped;
        self.good.extend_from_slice(&other.good);
        self.refused.extend_from_slice(&other.refused);
        self.timed_out += other.timed_out;
        self.errors += other.errors;
        self.sort();
    }

    fn sort(&mut self) {
        self.good.sort_unstable();
        self.refused.sort_unstable();
    }
}

/// What one open-loop run saw, split by criticality.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::storm::open_loop::{Criticality, Report};
///
/// let report = Report::default();
/// assert_eq!(report.total().offered, 0);
/// assert_eq!(report.level(Criticality::Critical).availability(), 1.0);
/// assert_eq!(report.total().goodput(Duration::from_secs(1)), 0.0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// How long arrivals were drawn for; goodput and rates are per second
    /// of this window.
    pub window: Duration,
    /// The client timeout each request had.
    pub timeout: Duration,
    /// The most any arrival was sent after its scheduled instant (timer
    /// granularity and a busy generator both show here).
    pub max_lag: Duration,
    levels: [Outcomes; 3],
}

impl Report {
    pub(super) fn new(window: Duration, timeout: Duration) -> Report {
        Report {
            window,
            timeout,
            ..Report::default()
        }
    }

    pub(super) fn level_mut(&mut self, level: Criticality) -> &mut Outcomes {
        &mut self.levels[slot(level)]
    }

    pub(super) fn finish(&mut self) {
        for level in &mut self.levels {
            level.sort();
        }
    }

    /// The requests that carried `level` (without a mix: all of them are
    /// `default`).
    pub fn level(&self, level: Criticality) -> &Outcomes {
        &self.levels[slot(level)]
    }

    /// The levels that had any arrivals, most critical first.
    pub fn levels(&self) -> impl Iterator<Item = (Criticality, &Outcomes)> {
        Criticality::ALL
            .into_iter()
            .map(|l| (l, self.level(l)))
            .filter(|(_, o)| o.offered > 0)
    }

    /// Every level added up.
    pub fn total(&self) -> Outcomes {
        let mut total = Outcomes::default();
        for level in &self.levels {
            total.merge(level);
        }
        total
    }
}

fn per_second(count: u64, window: Duration) -> f64 {
    if window.is_zero() {
        0.0
    } else {
        count as f64 / window.as_secs_f64()
    }
}

/// Nearest rank over already sorted samples.
fn nearest_rank(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, n) - 1])
}
