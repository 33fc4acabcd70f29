//! The demo registry and the full walk over it.
//!
//! This module owns the registry's contents, the walk (encode the whole
//! registry to exposition text, after the configured extra delay, and count
//! it) and the gauge that counts walks. The walk runs on whatever thread the
//! gate gives it; it must never run on a runtime thread.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Walks running right now, the most ever seen at once, walks queued and
/// not started (only the unbounded queue has any), and walks that ran.
///
/// The same numbers are exported as `exporter_walks_running`,
/// `exporter_walks_peak`, `exporter_walks_queued` and
/// `exporter_walks_started_total`. Clones share them.
#[derive(Debug, Clone, Default)]
pub struct WalkGauge {
    running: Gauge,
    peak: Gauge,
    pub(crate) queued: Gauge,
    started: Counter,
}

impl WalkGauge {
    /// Walks running right now.
    pub fn running(&self) -> u64 {
        u64::try_from(self.running.get()).unwrap_or(0)
    }

    /// The most walks ever seen running at once.
    pub fn peak(&self) -> u64 {
        u64::try_from(self.peak.get()).unwrap_or(0)
    }

    /// Walks waiting in a queue, not started.
    pub fn queued(&self) -> u64 {
        u64::try_from(self.queued.get()).unwrap_or(0)
    }

    /// Walks that started on a thread so far: the registry walks actually
    /// run, whoever was still waiting for them. Coalesced callers share a
    /// walk and add none.
    pub fn started(&self) -> u64 {
        self.started.get()
    }

    fn enter(&self) -> Walking<'_> {
        self.started.inc();
        let now = self.running.inc() + 1;
        self.peak.inner().fetch_max(now, Relaxed);
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
        self.gauge.running.dec();
    }
}

/// What one full walk found, as the status page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistryStats {
    /// Metric families (`# TYPE` lines).
    pub families: usize,
    /// Sample lines.
    pub series: usize,
    /// All lines, comments included.
    pub lines: usize,
    /// Bytes of exposition text.
    pub bytes: usize,
}

impl RegistryStats {
    /// Counts `text`, the exposition of one full walk.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_examples::exporter::RegistryStats;
    ///
    /// let text = "# TYPE a counter\na_total 1\na_total{x=\"1\"} 2\n# EOF\n";
    /// let stats = RegistryStats::of(text);
    /// assert_eq!((stats.families, stats.series, stats.lines), (1, 2, 4));
    /// ```
    pub fn of(text: &str) -> RegistryStats {
        let (mut families, mut series, mut lines) = (0, 0, 0);
        for line in text.lines() {
            lines += 1;
            if line.starts_with("# TYPE ") {
                families += 1;
            } else if !line.starts_with('#') && !line.is_empty() {
                series += 1;
            }
        }
        RegistryStats {
            families,
            series,
            lines,
            bytes: text.len(),
        }
    }
}

/// One full walk's output, shared by every caller of the walk: cloning it
/// clones a pointer to the text, never the text.
#[derive(Debug, Clone)]
pub(crate) struct Walked {
    /// The whole registry as exposition text, served as the `/metrics` body.
    pub(crate) text: Bytes,
    /// What the text holds, for the status page and the cardinality loop;
    /// counted once per walk on the walking thread, so no caller rescans
    /// the text on a runtime thread.
    pub(crate) stats: RegistryStats,
}

/// The registry and what a walk over it costs.
#[derive(Debug, Clone)]
pub(crate) struct Walker {
    registry: Arc<Registry>,
    delay: Duration,
    gauge: WalkGauge,
}

/// The demo families: `series` counters labelled `series="series-{i}"`.
pub(crate) fn demo_registry(series: usize, gauge: &WalkGauge, cardinality: &Gauge) -> Registry {
    let mut registry = Registry::default();
    let events = Family::<Vec<(String, String)>, Counter>::default();
    for i in 0..series {
        let labels = vec![("series".to_owned(), format!("series-{i}"))];
        events.get_or_create(&labels).inc_by(i as u64);
    }
    registry.register(
        "exporter_demo_events",
        "Demo series standing in for a large registry.",
        events,
    );
    registry.register(
        "exporter_walks_running",
        "Full registry walks running right now.",
        gauge.running.clone(),
    );
    registry.register(
        "exporter_walks_peak",
        "The most full registry walks ever seen running at once.",
        gauge.peak.clone(),
    );
    registry.register(
        "exporter_walks_queued",
        "Full registry walks queued and not started.",
        gauge.queued.clone(),
    );
    registry.register(
        "exporter_walks_started",
        "Full registry walks started on a thread (coalesced callers share one).",
        gauge.started.clone(),
    );
    registry.register(
        "exporter_cardinality_series",
        "Series counted by the last background cardinality walk.",
        cardinality.clone(),
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
    /// exposition text, and its statistics. Blocks the calling thread.
    pub(crate) fn walk(&self) -> Result<Walked, fmt::Error> {
        let _walking = self.gauge.enter();
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        let mut text = String::new();
        encode(&mut text, &self.registry)?;
        let stats = RegistryStats::of(&text);
        // `Bytes` takes the string's buffer over: no copy.
        Ok(Walked {
            text: Bytes::from(text),
            stats,
        })
    }
}
