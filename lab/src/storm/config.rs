//! The storm's settings.
//!
//! This module owns [`StormConfig`] and [`Phase`]; the defaults here are the
//! binary's defaults and keep a whole run within 60 s.

use std::fmt;
use std::time::Duration;

use super::Target;

/// How the scrapers behave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Every scraper waits for its answer (until the phase ends).
    Patient,
    /// Every scraper gives up this long after sending and closes its
    /// connection, as a scraper with a short timeout does.
    GiveUp(Duration),
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Patient => f.write_str("patient"),
            Phase::GiveUp(after) => write!(f, "give up {}ms", after.as_millis()),
        }
    }
}

/// The storm's settings; [`StormConfig::default`] gives the binary's
/// defaults.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admission_lab::storm::StormConfig;
///
/// let config = StormConfig::default();
/// assert_eq!(config.clients, 64);
/// assert_eq!(config.coalesce, Some(Duration::from_secs(1)));
/// // 4 modes x 2 phases, well within a minute.
/// assert!(config.duration * 8 < Duration::from_secs(40));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StormConfig {
    /// Concurrent scrapers, one connection each (`--clients`, default 64).
    pub clients: usize,
    /// How long each phase of each gate lasts (`--duration-ms`, default 4000).
    pub duration: Duration,
    /// Extra time inside every walk (`--walk-delay-ms`, default 20).
    pub walk_delay: Duration,
    /// Series in the exporter's registry (`--series`, default 10000).
    pub series: usize,
    /// Worker threads behind every gate (`--workers`, default 2).
    pub workers: usize,
    /// When a scraper of the second phase gives up (`--give-up-ms`, default 5).
    pub give_up: Duration,
    /// How long a refused scraper waits before its next request
    /// (`--refused-pause-ms`, default 10), so that refusals do not turn the
    /// storm into a busy loop.
    pub refused_pause: Duration,
    /// At most this many requests per scraper per phase
    /// (`--max-requests`, default 10000).
    pub max_requests: u64,
    /// The staleness bound of the `admission+coalesce` mode, which runs
    /// beside plain admission (`--coalesce-ms`, default 1000; `0` leaves
    /// that mode out). Scrapes join a running walk only if it started no
    /// longer ago than this; a walk costs tens of milliseconds here, so one
    /// second never turns a join away and bounds staleness well below a
    /// scrape interval.
    pub coalesce: Option<Duration>,
    /// Storm this server instead (`--url`): the patient phase only.
    pub url: Option<Target>,
    /// Storm the gRPC exporter instead (`--grpc`): admission against
    /// tonic's own limit and load shedding, both phases, with tonic
    /// clients calling `Walk`. Coalescing and `--url` do not apply.
    pub grpc: bool,
}

impl Default for StormConfig {
    fn default() -> Self {
        StormConfig {
            clients: 64,
            duration: Duration::from_secs(4),
            walk_delay: Duration::from_millis(20),
            series: 10_000,
            workers: 2,
            give_up: Duration::from_millis(5),
            refused_pause: Duration::from_millis(10),
            max_requests: 10_000,
            coalesce: Some(Duration::from_secs(1)),
            url: None,
            grpc: false,
        }
    }
}
