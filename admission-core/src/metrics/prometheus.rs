//! The `prometheus-client` back-end (feature `prometheus`).
//!
//! This module owns the collector that renders every family of
//! `METRICS` from the pools' snapshots at scrape time. It
//! must never keep a value between scrapes: each scrape reads the pools.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

use super::{AdmissionMetrics, Kind, METRICS, Value};
use crate::stats::{DURATION_BUCKETS, Durations};

impl AdmissionMetrics {
    /// Registers a collector for the pools added (now and later) with
    /// `registry`: every family in `METRICS`, labelled
    /// `pool`, read from the pools' snapshots at each scrape.
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
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

/// The bucket counts the encoder wants: each bucket's own (the snapshot is
/// cumulative), with its upper bound.
fn own_buckets(durations: &Durations) -> Vec<(f64, u64)> {
    let mut previous = 0;
    DURATION_BUCKETS
        .iter()
        .copied()
        .chain(std::iter::once(f64::INFINITY))
        .zip(durations.buckets.iter().map(|&cumulative| {
            let own = cumulative.saturating_sub(previous);
            previous = cumulative;
            own
        }))
        .collect()
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
                for sample in metric.samples(stats) {
                    let mut series = family.encode_family(&sample.labels)?;
                    match (metric.kind, sample.value) {
                        (Kind::Gauge, Value::Number(n)) => {
                            ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX)).encode(series)?;
                        }
                        (Kind::Counter, Value::Number(n)) => ConstCounter::new(n).encode(series)?,
                        (_, Value::Histogram(durations)) => series.encode_histogram::<NoLabelSet>(
                            durations.sum.as_secs_f64(),
                            durations.count(),
                            &own_buckets(&durations),
                            None,
                        )?,
                        (Kind::Histogram, Value::Number(_)) => {
                            unreachable!("a histogram family reads histograms")
                        }
                    }
                }
            }
        }
        Ok(())
    }
}
