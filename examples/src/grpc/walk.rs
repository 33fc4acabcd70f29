//! The demo registry and the full walk over it.
//!
//! This module owns the registry's contents, the walk (encode the whole
//! registry to exposition text, after the configured extra delay) and
//! [`WalkGauge`], which counts walks. The walk runs on whatever thread the
//! gate gives it; it must never run on a runtime thread.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Walks running right now, the most ever seen at once, and walks that
/// ran. Clones share them.
///
/// # Examples
///
/// ```
/// use admission_examples::grpc::WalkGauge;
///
/// let gauge = WalkGauge::default();
/// assert_eq!((gauge.running(), gauge.peak(), gauge.started()), (0, 0, 0));
/// ```
#[derive(Debug, Clone, Default)]
pub struct WalkGauge(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    running: AtomicU64,
    peak: AtomicU64,
    started: AtomicU64,
}

impl WalkGauge {
    /// Walks running right now.
    pub fn running(&self) -> u64 {
        self.0.running.load(Relaxed)
    }

    /// The most walks ever seen running at once.
    pub fn peak(&self) -> u64 {
        self.0.peak.load(Relaxed)
    }

    /// Walks that started on a thread so far, whoever still waited for them.
    pub fn started(&self) -> u64 {
        self.0.started.load(Relaxed)
    }

    fn enter(&self) -> Walking<'_> {
        self.0.started.fetch_add(1, Relaxed);
        let now = self.0.running.fetch_add(1, Relaxed) + 1;
        self.0.peak.fetch_max(now, Relaxed);
        Walking { gauge: self }
    }
}

/// Counts one walk as running until dropped (also on a panic).
#[must_use = "the walk counts as running only while this lives"]
#[clippy::has_significant_drop]
struct Walking<'a> {
    gauge: &'a WalkGauge,
}

impl Drop for Walking<'_> {
    fn drop(&mut self) {
        self.gauge.0.running.fetch_sub(1, Relaxed);
    }
}

/// One full walk's output.
#[derive(Debug, Clone)]
pub(crate) struct Walked {
    /// The whole registry as exposition text.
    pub(crate) text: String,
    /// Its sample lines.
    pub(crate) series: u64,
}

/// The registry and what a walk over it costs.
#[derive(Debug, Clone)]
pub(crate) struct Walker {
    registry: Arc<Registry>,
    delay: Duration,
    gauge: WalkGauge,
}

/// The demo family: `series` counters labelled `series="series-{i}"`.
pub(crate) fn demo_registry(series: usize) -> Registry {
    let mut registry = Registry::default();
    let events = Family::<Vec<(String, String)>, Counter>::default();
    for i in 0..series {
        let labels = vec![("series".to_owned(), format!("series-{i}"))];
        events.get_or_create(&labels).inc_by(i as u64);
    }
    registry.register(
        "grpc_exporter_demo_events",
        "Demo series standing in for a large registry.",
        events,
    );
    registry
}

impl Walker {
    pub(crate) fn new(registry: Registry, delay: Duration, gauge: WalkGauge) -> Walker {
        Walker {
            registry: Arc::new(registry),
            delay,
            gauge,
        }
    }

    /// One full walk: the extra delay, then the whole registry as
    /// exposition text. Blocks the calling thread.
    pub(crate) fn walk(&self) -> Result<Walked, fmt::Error> {
        let _walking = self.gauge.enter();
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        let series = text
            .lines()
            .filter(|line| !line.starts_with('#') && !line.is_empty())
            .count() as u64;
        Ok(Walked { text, series })
    }
}
