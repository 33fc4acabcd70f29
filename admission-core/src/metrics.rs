//! Admission metrics for a `prometheus-client` registry (feature
//! `prometheus`).
//!
//! This module owns the list of metric families ([`METRICS`]), the single
//! source the metrics reference is generated from, and a collector that reads
//! pool snapshots at scrape time. It must never update a counter itself: the
//! pools own their counts, this only renders them, with the one label `pool`.

use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use crate::lease::RequestPools;
use crate::pool::{DURATION_BUCKETS, Pool, PoolStats};
use crate::reserve::Reservation;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Every metric family admission exports, in exposition order.
pub const METRICS: &[Metric] = &[
    Metric {
        name: "admission_slots_capacity",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots the pool has (its worker threads number the same).",
        labels: POOL,
    },
    Metric {
        name: "admission_slots_in_use",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots held right now, by callers, running work or orphans.",
        labels: POOL,
    },
    Metric {
        name: "admission_work_running",
        kind: Kind::Gauge,
        unit: None,
        help: "Work running on the pool's worker threads right now.",
        labels: POOL,
    },
    Metric {
        name: "admission_admitted",
        kind: Kind::Counter,
        unit: None,
        help: "Slots handed out.",
        labels: POOL,
    },
    Metric {
        name: "admission_refused",
        kind: Kind::Counter,
        unit: None,
        help: "Admissions refused (fail-fast, timed out, or pool closed).",
        labels: POOL,
    },
    Metric {
        name: "admission_orphaned",
        kind: Kind::Counter,
        unit: None,
        help: "Work whose caller went away before it ended; it kept its slot until then.",
        labels: POOL,
    },
    Metric {
        name: "admission_orphan_failures",
        kind: Kind::Counter,
        unit: None,
        help: "Orphaned work that returned an error or panicked.",
        labels: POOL,
    },
    Metric {
        name: "admission_panicked",
        kind: Kind::Counter,
        unit: None,
        help: "Work that panicked, orphaned or not.",
        labels: POOL,
    },
    Metric {
        name: "admission_coalesced",
        kind: Kind::Counter,
        unit: None,
        help: "Callers served by joining a coalesced walk instead of starting one.",
        labels: POOL,
    },
    Metric {
        name: "admission_work_duration",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        help: "How long work ran on a worker thread.",
        labels: POOL,
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

    /// Adds a pool; adding it twice is harmless.
    pub fn add(&self, pool: &Pool) {
        let mut pools = self.pools.lock().unwrap_or_else(PoisonError::into_inner);
        if !pools.iter().any(|p| p.same_pool(pool)) {
            pools.push(pool.clone());
        }
    }

    /// Adds both request classes' pools.
    pub fn add_requests(&self, requests: &RequestPools) {
        for pool in requests.pools() {
            self.add(pool);
        }
    }

    /// Adds a loop owner's reservation.
    pub fn add_reservation(&self, reservation: &Reservation) {
        self.add(reservation.pool());
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

fn value(metric: &Metric, stats: &PoolStats) -> u64 {
    match metric.name {
        "admission_slots_capacity" => stats.capacity as u64,
        "admission_slots_in_use" => stats.in_use as u64,
        "admission_work_running" => stats.running as u64,
        "admission_admitted" => stats.admitted,
        "admission_refused" => stats.refused,
        "admission_orphaned" => stats.orphaned,
        "admission_orphan_failures" => stats.orphan_failures,
        "admission_panicked" => stats.panicked,
        "admission_coalesced" => stats.coalesced,
        _ => 0,
    }
}

fn encode_one(
    metric: &Metric,
    stats: &PoolStats,
    encoder: &mut MetricEncoder<'_>,
) -> std::fmt::Result {
    let labels = [("pool", stats.name.as_str())];
    let mut series = encoder.encode_family(&labels)?;
    match metric.kind {
        Kind::Gauge => {
            ConstGauge::new(i64::try_from(value(metric, stats)).unwrap_or(i64::MAX)).encode(series)
        }
        Kind::Counter => ConstCounter::new(value(metric, stats)).encode(series),
        Kind::Histogram => {
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

/// The command that regenerates `docs/METRICS.md` from [`reference_markdown`].
pub const REFERENCE_COMMAND: &str = "cargo run -p admission-examples --bin metrics-reference";

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
        Kind::Histogram => "histogram",
    }
}

/// The metrics reference (`docs/METRICS.md`), generated from [`METRICS`]:
/// every family's exposed name, type, unit, labels, help text and the series
/// a scrape shows for it.
///
/// # Examples
///
/// ```
/// use admission_core::metrics::{METRICS, reference_markdown};
///
/// let reference = reference_markdown();
/// for metric in METRICS {
///     assert!(reference.contains(&format!("`{}`", metric.exposed_name())));
/// }
/// ```
pub fn reference_markdown() -> String {
    use std::fmt::Write as _;

    let code = |items: &[String]| {
        items
            .iter()
            .map(|item| format!("`{item}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let names = |items: &[&str]| items.iter().map(|&s| s.to_owned()).collect::<Vec<_>>();

    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "# Metrics reference\n\n\
         <!-- Generated from `admission_core::metrics::METRICS`; do not edit.\n     \
         Regenerate with `{REFERENCE_COMMAND}`. -->\n\n\
         Every metric family admission exports through\n\
         `admission_core::metrics::AdmissionMetrics` (feature `prometheus`), in\n\
         exposition order. Each pool added to the collector gets one series per\n\
         family, labelled `pool` with the pool's name; Prometheus adds `job` and\n\
         `instance` when it scrapes. The values are read from the pools' own\n\
         counts at scrape time.\n\n\
         | metric | type | unit | labels | help |\n\
         | --- | --- | --- | --- | --- |\n"
    );
    for metric in METRICS {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} |",
            metric.exposed_name(),
            kind_name(metric.kind),
            metric.unit.unwrap_or("-"),
            code(&names(metric.labels)),
            metric.help.replace('|', "\\|"),
        );
    }
    out.push_str("\n## Families\n");
    for metric in METRICS {
        let _ = write!(
            out,
            "\n### `{}`\n\n{}\n\n\
             - type: {}\n\
             - unit: {}\n\
             - labels: {}\n\
             - registered as: `{}`\n\
             - series: {}\n",
            metric.exposed_name(),
            metric.help,
            kind_name(metric.kind),
            metric.unit.unwrap_or("none"),
            code(&names(metric.labels)),
            metric.name,
            code(&metric.series_names()),
        );
        if metric.kind == Kind::Histogram {
            let bounds: Vec<String> = DURATION_BUCKETS
                .iter()
                .map(f64::to_string)
                .chain(std::iter::once("+Inf".to_owned()))
                .collect();
            let _ = writeln!(
                out,
                "- buckets (`le`, {}): {}",
                metric.unit.unwrap_or("value"),
                code(&bounds),
            );
        }
    }
    out
}
