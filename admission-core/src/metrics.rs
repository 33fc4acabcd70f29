//! Admission metrics for a `prometheus-client` registry (feature
//! `prometheus`).
//!
//! This module owns the list of metric families ([`METRICS`]), the single
//! source the metrics reference (`docs/METRICS.md`) is generated from, each
//! with the function that reads its value from a pool's snapshot, and a
//! collector that reads snapshots at scrape time. It must never update a
//! counter itself: the pools own their counts, this only renders them,
//! labelled `pool` (and the refusal counter also `criticality`).

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use crate::Criticality;
use crate::pool::{HasPools, Pool};
use crate::stats::{DURATION_BUCKETS, PoolStats};

/// The kind of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down.
    Gauge,
    /// A monotonic count; exposed with a `_total` suffix.
    Counter,
    /// A histogram; exposed as `_bucket`, `_sum` and `_count`.
    Histogram,
}

/// One metric family admission exports.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Metric {
    /// The name as registered (the exposed name adds the unit and `_total`).
    pub name: &'static str,
    /// The family's kind.
    pub kind: Kind,
    /// The unit, if any (appended to the exposed name).
    pub unit: Option<&'static str>,
    /// The help text.
    pub help: &'static str,
    /// The labels on every series.
    pub labels: &'static [&'static str],
    /// Reads a gauge's or counter's value from a snapshot; `None` for the
    /// histogram, which is read from the snapshot's buckets.
    read: Option<fn(&PoolStats) -> u64>,
    /// For a counter split by criticality: its value per level, in the
    /// order of [`Criticality::ALL`]; `read` then gives their sum.
    by_criticality: Option<fn(&PoolStats) -> [u64; 3]>,
}

impl Metric {
    /// The name as it appears in the exposition, e.g.
    /// `admission_admitted_total` or `admission_work_duration_seconds`.
    pub fn exposed_name(&self) -> String {
        let mut name = self.name.to_owned();
        if let Some(unit) = self.unit {
            name.push('_');
            name.push_str(unit);
        }
        if self.kind == Kind::Counter {
            name.push_str("_total");
        }
        name
    }

    /// The series names a scrape shows for this family.
    pub fn series_names(&self) -> Vec<String> {
        let base = self.exposed_name();
        match self.kind {
            Kind::Histogram => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|suffix| format!("{base}{suffix}"))
                .collect(),
            Kind::Gauge | Kind::Counter => vec![base],
        }
    }
}

const POOL: &[&str] = &["pool"];
const POOL_CRITICALITY: &[&str] = &["pool", "criticality"];

/// Every metric family admission exports, in exposition order.
pub const METRICS: &[Metric] = &[
    Metric {
        name: "admission_slots_capacity",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots the pool has (its worker threads number the same).",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.capacity as u64),
    },
    Metric {
        name: "admission_slots_limit",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots callers may take now: the capacity, or an adaptive class's current limit.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.limit as u64),
    },
    Metric {
        name: "admission_slots_in_use",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots held right now, by callers, running work or orphans.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.in_use as u64),
    },
    Metric {
        name: "admission_waiting",
        kind: Kind::Gauge,
        unit: None,
        help: "Callers waiting for a slot right now (Wait, WaitFor and the bounded queue).",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.waiting as u64),
    },
    Metric {
        name: "admission_work_running",
        kind: Kind::Gauge,
        unit: None,
        help: "Work running on the pool's worker threads right now.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.running as u64),
    },
    Metric {
        name: "admission_orphans_running",
        kind: Kind::Gauge,
        unit: None,
        help: "Orphans running right now: work whose caller went away while it runs on, holding its slot.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.orphans_running as u64),
    },
    Metric {
        name: "admission_admitted",
        kind: Kind::Counter,
        unit: None,
        help: "Slots handed out.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.admitted),
    },
    Metric {
        name: "admission_refused",
        kind: Kind::Counter,
        unit: None,
        help: "Admissions refused (fail-fast, timed out, budget too short, or pool closed), by the refused caller's criticality.",
        labels: POOL_CRITICALITY,
        by_criticality: Some(|s| s.refused_by_criticality),
        read: Some(|s| s.refused),
    },
    Metric {
        name: "admission_reentrant",
        kind: Kind::Counter,
        unit: None,
        help: "Waits refused because the waiting task held every slot of the pool itself (ADMISSION_REENTRANT): a programming error, not counted as a refusal.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.reentrant),
    },
    Metric {
        name: "admission_orphaned",
        kind: Kind::Counter,
        unit: None,
        help: "Work whose caller went away before it ended; it kept its slot until then.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.orphaned),
    },
    Metric {
        name: "admission_orphan_failures",
        kind: Kind::Counter,
        unit: None,
        help: "Orphaned work that returned an error or panicked.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.orphan_failures),
    },
    Metric {
        name: "admission_panicked",
        kind: Kind::Counter,
        unit: None,
        help: "Work that panicked, orphaned or not.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.panicked),
    },
    Metric {
        name: "admission_coalesced",
        kind: Kind::Counter,
        unit: None,
        help: "Callers served by joining a coalesced walk instead of starting one.",
        labels: POOL,
        by_criticality: None,
        read: Some(|s| s.coalesced),
    },
    Metric {
        name: "admission_work_duration",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        help: "How long work ran on a worker thread.",
        labels: POOL,
        by_criticality: None,
        read: None,
    },
];

/// A `prometheus-client` collector for the pools added to it: every family
/// in [`METRICS`], labelled `pool`, read from the pools' snapshots at each
/// scrape.
///
/// Clones share the same list of pools.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_core::metrics::AdmissionMetrics;
/// use prometheus_client::registry::Registry;
///
/// let pool = Pool::new("registry", 2).unwrap();
/// let metrics = AdmissionMetrics::new();
/// metrics.add(&pool);
/// let mut registry = Registry::default();
/// metrics.register(&mut registry);
///
/// let mut text = String::new();
/// prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
/// assert!(text.contains(r#"admission_slots_capacity{pool="registry"} 2"#));
/// ```
#[derive(Debug, Clone, Default)]
pub struct AdmissionMetrics {
    pools: Arc<Mutex<Vec<Pool>>>,
}

impl AdmissionMetrics {
    /// A collector with no pools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds every pool `owner` has: a [`Pool`], the request pools, a
    /// reservation or a loop owner. Adding a pool twice is harmless.
    pub fn add<P: HasPools + ?Sized>(&self, owner: &P) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        owner.each_pool(&mut |pool| {
            if !pools.iter().any(|p| p.same_pool(pool)) {
                pools.push(pool.clone());
            }
        });
    }

    /// Registers the collector with `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    fn snapshots(&self) -> Vec<PoolStats> {
        self.pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(Pool::stats)
            .collect()
    }
}

fn encode_one(
    metric: &Metric,
    stats: &PoolStats,
    encoder: &mut MetricEncoder<'_>,
) -> std::fmt::Result {
    if let Some(split) = metric.by_criticality {
        for (level, value) in Criticality::ALL.into_iter().zip(split(stats)) {
            let labels = [
                ("pool", stats.name.as_str()),
                ("criticality", level.as_str()),
            ];
            ConstCounter::new(value).encode(encoder.encode_family(&labels)?)?;
        }
        return Ok(());
    }
    let labels = [("pool", stats.name.as_str())];
    let mut series = encoder.encode_family(&labels)?;
    match (metric.kind, metric.read) {
        (Kind::Gauge, Some(read)) => {
            ConstGauge::new(i64::try_from(read(stats)).unwrap_or(i64::MAX)).encode(series)
        }
        (Kind::Counter, Some(read)) => ConstCounter::new(read(stats)).encode(series),
        (Kind::Gauge | Kind::Counter, None) => {
            unreachable!("every gauge and counter in METRICS has a read function")
        }
        (Kind::Histogram, _) => {
            // The snapshot is cumulative; the encoder wants each bucket's own
            // count and sums them itself.
            let mut previous = 0;
            let buckets: Vec<(f64, u64)> = DURATION_BUCKETS
                .iter()
                .copied()
                .chain(std::iter::once(f64::INFINITY))
                .zip(stats.duration_buckets.iter().map(|&cumulative| {
                    let own = cumulative.saturating_sub(previous);
                    previous = cumulative;
                    own
                }))
                .collect();
            let count = stats.duration_buckets.last().copied().unwrap_or(0);
            series.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                stats.duration_sum.as_secs_f64(),
                count,
                &buckets,
                None,
            )
        }
    }
}

impl Collector for AdmissionMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> std::fmt::Result {
        let snapshots = self.snapshots();
        for metric in METRICS {
            let unit = metric.unit.map(|u| match u {
                "seconds" => Unit::Seconds,
                other => Unit::Other(other.to_owned()),
            });
            let kind = match metric.kind {
                Kind::Gauge => MetricType::Gauge,
                Kind::Counter => MetricType::Counter,
                Kind::Histogram => MetricType::Histogram,
            };
            let mut family =
                encoder.encode_descriptor(metric.name, metric.help, unit.as_ref(), kind)?;
            for stats in &snapshots {
                encode_one(metric, stats, &mut family)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gauge_and_counter_reads_its_own_value() {
        let pool = Pool::new("metrics-read", 3).unwrap();
        let _slot = pool.try_admit().unwrap();
        let stats = pool.stats();
        let value = |name: &str| {
            let metric = METRICS.iter().find(|m| m.name == name).unwrap();
            (metric.read.unwrap())(&stats)
        };
        assert_eq!(value("admission_slots_capacity"), 3);
        assert_eq!(
            value("admission_slots_limit"),
            3,
            "a fixed pool's limit is its capacity"
        );
        assert_eq!(value("admission_slots_in_use"), 1);
        assert_eq!(value("admission_admitted"), 1);
        for metric in METRICS {
            assert_eq!(
                metric.read.is_none(),
                metric.kind == Kind::Histogram,
                "{} must have a read function unless it is the histogram",
                metric.name
            );
        }
    }
}
