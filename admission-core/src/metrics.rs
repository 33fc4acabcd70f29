//! The admission metric families and the pools they are read from.
//!
//! This module owns the list of metric families (`METRICS`), the single
//! source the metrics reference (`docs/METRICS.md`) is generated from, each
//! with the way its series are read from a pool's snapshot, and
//! [`AdmissionMetrics`], the list of pools every back-end reads at once.
//! The back-ends live beside it, one per feature: `prometheus-client`
//! (`prometheus`), the `metrics` facade (`metrics`) and OpenTelemetry
//! (`opentelemetry`). It must never update a counter itself: the pools own
//! their counts, this only reads them, labelled `pool` (and the refusal
//! counter also `criticality` and `code`, the wait histogram `outcome`).

#[cfg(any(feature = "metrics", feature = "opentelemetry"))]
use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use crate::Criticality;
use crate::pool::{HasPools, Pool};
use crate::refusal::Code;
#[cfg(any(feature = "metrics", feature = "opentelemetry"))]
use crate::stats::DURATION_BUCKETS;
use crate::stats::{Durations, PoolStats};

#[cfg(feature = "metrics")]
mod facade;
#[cfg(feature = "opentelemetry")]
mod otel;
#[cfg(feature = "prometheus")]
mod prometheus;

/// The kind of a metric family.
#[doc(hidden)]
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
#[doc(hidden)]
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
    /// Where its series are read from in a snapshot.
    source: Source,
}

/// Where a family's series come from in a [`PoolStats`].
#[derive(Debug, Clone, Copy)]
enum Source {
    /// One value per pool.
    Value(fn(&PoolStats) -> u64),
    /// Counts by code and criticality: one series each (the refusals, and
    /// what shadow mode would have refused).
    ByCode(fn(&PoolStats) -> &[[u64; 3]; Code::ALL.len()]),
    /// The work-duration histogram.
    Work,
    /// The wait histograms, one per outcome.
    Waits,
}

/// One series of a family, read from one pool's snapshot.
#[derive(Debug)]
pub(crate) struct Sample<'a> {
    /// `pool` first, then the family's other labels, in its order.
    pub(crate) labels: Vec<(&'static str, &'a str)>,
    pub(crate) value: Value,
}

/// A series' value.
#[derive(Debug)]
pub(crate) enum Value {
    /// A gauge's or counter's value.
    Number(u64),
    /// A histogram over [`DURATION_BUCKETS`](crate::stats::DURATION_BUCKETS).
    Histogram(Durations),
}

/// One series as a Prometheus exposition names it: a histogram's
/// `_bucket` (labelled `le`), `_count` and `_sum` are series of their own.
/// The back-ends that take no pre-aggregated histogram (the `metrics`
/// facade, OpenTelemetry's observable instruments) record these.
#[cfg(any(feature = "metrics", feature = "opentelemetry"))]
#[derive(Debug)]
pub(crate) struct Flat<'a> {
    pub(crate) name: String,
    pub(crate) labels: Vec<(&'static str, Cow<'a, str>)>,
    pub(crate) value: FlatValue,
}

/// A flat series' value.
#[cfg(any(feature = "metrics", feature = "opentelemetry"))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FlatValue {
    /// A monotonic count (a counter, a histogram's buckets and count).
    Count(u64),
    /// A gauge's value.
    Level(u64),
    /// A histogram's sum, in seconds.
    Seconds(f64),
}

impl Metric {
    /// This family's series for one pool's snapshot, histograms flattened.
    #[cfg(any(feature = "metrics", feature = "opentelemetry"))]
    pub(crate) fn flat<'a>(&self, stats: &'a PoolStats) -> Vec<Flat<'a>> {
        let base = self.exposed_name();
        let mut out = Vec::new();
        for sample in self.samples(stats) {
            let labels: Vec<(&'static str, Cow<'a, str>)> = sample
                .labels
                .iter()
                .map(|&(k, v)| (k, Cow::Borrowed(v)))
                .collect();
            match sample.value {
                Value::Number(n) => out.push(Flat {
                    name: base.clone(),
                    labels,
                    value: if self.kind == Kind::Gauge {
                        FlatValue::Level(n)
                    } else {
                        FlatValue::Count(n)
                    },
                }),
                Value::Histogram(durations) => {
                    let bounds = DURATION_BUCKETS
                        .iter()
                        .map(f64::to_string)
                        .chain(std::iter::once("+Inf".to_owned()));
                    for (le, &n) in bounds.zip(&durations.buckets) {
                        let mut labels = labels.clone();
                        labels.push(("le", Cow::Owned(le)));
                        out.push(Flat {
                            name: format!("{base}_bucket"),
                            labels,
                            value: FlatValue::Count(n),
                        });
                    }
                    out.push(Flat {
                        name: format!("{base}_count"),
                        labels: labels.clone(),
                        value: FlatValue::Count(durations.count()),
                    });
                    out.push(Flat {
                        name: format!("{base}_sum"),
                        labels,
                        value: FlatValue::Seconds(durations.sum.as_secs_f64()),
                    });
                }
            }
        }
        out
    }

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

    /// This family's series for one pool's snapshot.
    pub(crate) fn samples<'a>(&self, stats: &'a PoolStats) -> Vec<Sample<'a>> {
        let pool = ("pool", stats.name.as_str());
        let one = |value| {
            vec![Sample {
                labels: vec![pool],
                value,
            }]
        };
        match self.source {
            Source::Value(read) => one(Value::Number(read(stats))),
            Source::Work => one(Value::Histogram(Durations {
                buckets: stats.duration_buckets.clone(),
                sum: stats.duration_sum,
            })),
            Source::Waits => [
                ("admitted", &stats.waited_admitted),
                ("refused", &stats.waited_refused),
            ]
            .into_iter()
            .map(|(outcome, durations)| Sample {
                labels: vec![pool, ("outcome", outcome)],
                value: Value::Histogram(durations.clone()),
            })
            .collect(),
            Source::ByCode(read) => Code::ALL
                .into_iter()
                .zip(*read(stats))
                // Reentrant waits are not refusals: their own family.
                .filter(|(code, _)| code.is_overload())
                .flat_map(|(code, row)| {
                    Criticality::ALL
                        .into_iter()
                        .zip(row)
                        .map(move |(level, n)| Sample {
                            labels: vec![
                                pool,
                                ("criticality", level.as_str()),
                                ("code", code.as_str()),
                            ],
                            value: Value::Number(n),
                        })
                })
                .collect(),
        }
    }
}

const POOL: &[&str] = &["pool"];
const POOL_CRITICALITY_CODE: &[&str] = &["pool", "criticality", "code"];
const POOL_OUTCOME: &[&str] = &["pool", "outcome"];

/// Every metric family admission exports, in exposition order (read by
/// the tests that keep docs/METRICS.md and the backends true; not part of
/// the API).
#[doc(hidden)]
pub const METRICS: &[Metric] = &[
    Metric {
        name: "admission_slots_capacity",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots the pool has (its worker threads number the same).",
        labels: POOL,
        source: Source::Value(|s| s.capacity as u64),
    },
    Metric {
        name: "admission_slots_limit",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots callers may take now: the capacity, or an adaptive class's current limit.",
        labels: POOL,
        source: Source::Value(|s| s.limit as u64),
    },
    Metric {
        name: "admission_slots_in_use",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots held right now, by callers, running work or orphans.",
        labels: POOL,
        source: Source::Value(|s| s.in_use as u64),
    },
    Metric {
        name: "admission_waiting",
        kind: Kind::Gauge,
        unit: None,
        help: "Callers waiting for a slot right now (Wait, WaitFor and the bounded queue).",
        labels: POOL,
        source: Source::Value(|s| s.waiting as u64),
    },
    Metric {
        name: "admission_work_running",
        kind: Kind::Gauge,
        unit: None,
        help: "Work running on the pool's worker threads right now.",
        labels: POOL,
        source: Source::Value(|s| s.running as u64),
    },
    Metric {
        name: "admission_orphans_running",
        kind: Kind::Gauge,
        unit: None,
        help: "Orphans running right now: work whose caller went away while it runs on, holding its slot.",
        labels: POOL,
        source: Source::Value(|s| s.orphans_running as u64),
    },
    Metric {
        name: "admission_admitted",
        kind: Kind::Counter,
        unit: None,
        help: "Slots handed out.",
        labels: POOL,
        source: Source::Value(|s| s.admitted),
    },
    Metric {
        name: "admission_refused",
        kind: Kind::Counter,
        unit: None,
        help: "Admissions refused (fail-fast, timed out, budget too short, or pool closed), by the refused caller's criticality and the refusal code (ADMISSION_SATURATED, ADMISSION_WAIT_TIMEOUT, ...).",
        labels: POOL_CRITICALITY_CODE,
        source: Source::ByCode(|s| &s.refused_by_code),
    },
    Metric {
        name: "admission_evicted",
        kind: Kind::Counter,
        unit: None,
        help: "Queued callers displaced from a full queue by a more critical caller; each is also a refusal with the pool's saturated code.",
        labels: POOL,
        source: Source::Value(|s| s.evicted),
    },
    Metric {
        name: "admission_shed_standing",
        kind: Kind::Counter,
        unit: None,
        help: "Queued callers let go by a standing queue once they had waited its target; each is also a refusal with ADMISSION_WAIT_TIMEOUT.",
        labels: POOL,
        source: Source::Value(|s| s.shed_standing),
    },
    Metric {
        name: "admission_reentrant",
        kind: Kind::Counter,
        unit: None,
        help: "Waits refused because the waiting task held every slot of the pool itself (ADMISSION_REENTRANT): a programming error, not counted as a refusal.",
        labels: POOL,
        source: Source::Value(|s| s.reentrant),
    },
    Metric {
        name: "admission_orphaned",
        kind: Kind::Counter,
        unit: None,
        help: "Work whose caller went away before it ended; it kept its slot until then.",
        labels: POOL,
        source: Source::Value(|s| s.orphaned),
    },
    Metric {
        name: "admission_orphan_failures",
        kind: Kind::Counter,
        unit: None,
        help: "Orphaned work that returned an error or panicked.",
        labels: POOL,
        source: Source::Value(|s| s.orphan_failures),
    },
    Metric {
        name: "admission_panicked",
        kind: Kind::Counter,
        unit: None,
        help: "Work that panicked, orphaned or not.",
        labels: POOL,
        source: Source::Value(|s| s.panicked),
    },
    Metric {
        name: "admission_coalesced",
        kind: Kind::Counter,
        unit: None,
        help: "Callers served by joining a coalesced walk instead of starting one.",
        labels: POOL,
        source: Source::Value(|s| s.coalesced),
    },
    Metric {
        name: "admission_work_duration",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        help: "How long work ran on a worker thread.",
        labels: POOL,
        source: Source::Work,
    },
    Metric {
        name: "admission_would_refuse",
        kind: Kind::Counter,
        unit: None,
        help: "Admissions a pool in shadow mode let through that enforcing would have refused (no slot free, budget too short), by the caller's criticality and the code it would have had; not in admission_refused.",
        labels: POOL_CRITICALITY_CODE,
        source: Source::ByCode(|s| &s.would_refuse_by_code),
    },
    Metric {
        name: "admission_would_wait",
        kind: Kind::Counter,
        unit: None,
        help: "Admissions a pool in shadow mode served at once that enforcing would have made wait for a slot.",
        labels: POOL,
        source: Source::Value(|s| s.would_wait),
    },
    Metric {
        name: "admission_slots_overdraft",
        kind: Kind::Gauge,
        unit: None,
        help: "Slots held past the capacity right now (shadow mode); also in admission_slots_in_use.",
        labels: POOL,
        source: Source::Value(|s| s.overdraft as u64),
    },
    Metric {
        name: "admission_flows_active",
        kind: Kind::Gauge,
        unit: None,
        help: "Flows (tenants, API keys: whatever the app names) active in the pool right now: holding slots, waiting, or refused within their asking window; one series per pool, never per flow.",
        labels: POOL,
        source: Source::Value(|s| s.active_flows as u64),
    },
    Metric {
        name: "admission_flow_weights",
        kind: Kind::Gauge,
        unit: None,
        help: "The sum of the active flows' weights: while the pool is contended a flow of weight w is held to admission_slots_limit * w / this many slots (0 while no flow is active).",
        labels: POOL,
        source: Source::Value(|s| s.flow_weights),
    },
    Metric {
        name: "admission_wait_duration",
        kind: Kind::Histogram,
        unit: Some("seconds"),
        help: "How long callers waited in line for a slot before they were admitted or refused, by outcome (admitted, refused); fail-fast callers and callers a free slot admitted at once never waited and are not in it.",
        labels: POOL_OUTCOME,
        source: Source::Waits,
    },
];

/// The pools the metrics are read from, for every back-end: a
/// `prometheus-client` collector (feature `prometheus`), the `metrics`
/// facade (feature `metrics`) and OpenTelemetry instruments (feature
/// `opentelemetry`) all read the same pools' snapshots.
///
/// Clones share the same list of pools.
///
/// # Examples
///
/// ```
/// use admission_core::Pool;
/// use admission_core::metrics::AdmissionMetrics;
///
/// let pool = Pool::new("registry", 2).unwrap();
/// let metrics = AdmissionMetrics::new();
/// metrics.add(&pool);
/// metrics.add(&pool);
/// assert_eq!(metrics.snapshots().len(), 1, "added once");
/// ```
#[derive(Debug, Clone, Default)]
pub struct AdmissionMetrics {
    pools: Arc<Mutex<Vec<Pool>>>,
}

impl AdmissionMetrics {
    /// A list with no pools yet.
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

    /// A snapshot of every pool added, in the order they were added.
    pub fn snapshots(&self) -> Vec<PoolStats> {
        self.pools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(Pool::stats)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbers(metric: &str, stats: &PoolStats) -> Vec<(Vec<(&'static str, String)>, u64)> {
        let metric = METRICS.iter().find(|m| m.name == metric).unwrap();
        metric
            .samples(stats)
            .into_iter()
            .map(|s| {
                let labels = s.labels.iter().map(|&(k, v)| (k, v.to_owned())).collect();
                match s.value {
                    Value::Number(n) => (labels, n),
                    Value::Histogram(_) => panic!("{} is a number", metric.name),
                }
            })
            .collect()
    }

    /// Flows are one series per pool: how many are active and their
    /// weights, never a series per flow key.
    #[test]
    fn flows_are_exported_as_two_gauges_per_pool() {
        let pool = Pool::new("metrics-flows", 4).unwrap();
        let keys = ["a", "b", "c"];
        let _held: Vec<_> = keys
            .iter()
            .zip(1..)
            .map(|(key, weight)| {
                crate::Caller::default()
                    .with_flow(key)
                    .with_weight(weight)
                    .scope_sync(|| pool.try_admit())
                    .unwrap()
            })
            .collect();
        let stats = pool.stats();
        assert_eq!(
            numbers("admission_flows_active", &stats),
            [(vec![("pool", "metrics-flows".to_owned())], 3)]
        );
        assert_eq!(
            numbers("admission_flow_weights", &stats),
            [(vec![("pool", "metrics-flows".to_owned())], 6)]
        );
    }

    #[test]
    fn every_family_reads_its_own_value_with_its_labels() {
        let pool = Pool::new("metrics-read", 3).unwrap();
        let _slot = pool.try_admit().unwrap();
        let stats = pool.stats();
        let value = |name: &str| numbers(name, &stats)[0].1;
        assert_eq!(value("admission_slots_capacity"), 3);
        assert_eq!(
            value("admission_slots_limit"),
            3,
            "a fixed pool's limit is its capacity"
        );
        assert_eq!(value("admission_slots_in_use"), 1);
        assert_eq!(value("admission_admitted"), 1);
        for metric in METRICS {
            for sample in metric.samples(&stats) {
                let names: Vec<&str> = sample.labels.iter().map(|(k, _)| *k).collect();
                assert_eq!(
                    names, metric.labels,
                    "{} labels its series as listed",
                    metric.name
                );
                assert_eq!(
                    matches!(sample.value, Value::Histogram(_)),
                    metric.kind == Kind::Histogram,
                    "{} reads a value of its kind",
                    metric.name
                );
            }
        }
    }

    #[test]
    fn refusals_are_split_by_code_and_criticality_without_reentrant() {
        let pool = Pool::new("metrics-codes", 1).unwrap();
        let _slot = pool.try_admit().unwrap();
        assert!(pool.try_admit().is_err());
        let refused = numbers("admission_refused", &pool.stats());
        assert_eq!(refused.len(), 7 * 3, "seven overload codes by three levels");
        assert!(
            refused
                .iter()
                .all(|(labels, _)| labels[2].1 != "ADMISSION_REENTRANT")
        );
        let saturated_default: Vec<_> = refused.iter().filter(|(_, n)| *n > 0).collect();
        assert_eq!(saturated_default.len(), 1);
        assert_eq!(
            saturated_default[0].0,
            [
                ("pool", "metrics-codes".to_owned()),
                ("criticality", "default".to_owned()),
                ("code", "ADMISSION_SATURATED".to_owned())
            ]
        );
    }
}
