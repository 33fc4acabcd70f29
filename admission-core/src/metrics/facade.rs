//! The `metrics` facade back-end (feature `metrics`).
//!
//! This module owns [`AdmissionMetrics::record`]: it writes every family
//! of `METRICS`, read from the pools' snapshots, into
//! whatever recorder the application installed (`metrics-exporter-prometheus`,
//! an OpenTelemetry bridge, a test's debugging recorder). It must never
//! count anything itself: counters are set to the pools' totals
//! (`absolute`), gauges to their values, and a histogram is written as the
//! series a Prometheus exposition shows (`_bucket` labelled `le`, `_count`,
//! `_sum`), since the facade's histograms take single values, not buckets.

use super::{AdmissionMetrics, FlatValue, METRICS};

impl AdmissionMetrics {
    /// Writes every family, for every pool added, into the `metrics`
    /// facade's current recorder. Call it where the recorder is read (before
    /// a scrape, or on a timer); each call reads fresh snapshots. Counters
    /// and histogram counts are set to the pools' totals, so calling it
    /// twice counts nothing twice.
    ///
    /// The series are named as a Prometheus scrape of the `prometheus`
    /// feature names them (`admission_refused_total`,
    /// `admission_work_duration_seconds_bucket{le="0.005"}`, ...), so the
    /// dashboard and alert rules in `ops/` work on either.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    /// use admission_core::metrics::AdmissionMetrics;
    /// use metrics_util::debugging::{DebugValue, DebuggingRecorder};
    ///
    /// let recorder = DebuggingRecorder::new();
    /// let snapshotter = recorder.snapshotter();
    /// let pool = Pool::new("registry", 2).unwrap();
    /// let metrics = AdmissionMetrics::new();
    /// metrics.add(&pool);
    /// metrics::with_local_recorder(&recorder, || metrics.record());
    ///
    /// let capacity = snapshotter.snapshot().into_vec().into_iter().find_map(|(key, _, _, value)| {
    ///     (key.key().name() == "admission_slots_capacity").then_some(value)
    /// });
    /// assert_eq!(capacity, Some(DebugValue::Gauge(2.0.into())));
    /// ```
    pub fn record(&self) {
        let snapshots = self.snapshots();
        for metric in METRICS {
            for stats in &snapshots {
                for series in metric.flat(stats) {
                    let labels: Vec<metrics::Label> = series
                        .labels
                        .into_iter()
                        .map(|(k, v)| metrics::Label::new(k, v.into_owned()))
                        .collect();
                    match series.value {
                        FlatValue::Count(n) => metrics::counter!(series.name, labels).absolute(n),
                        #[expect(clippy::cast_precision_loss, reason = "a gauge below 2^52")]
                        FlatValue::Level(n) => metrics::gauge!(series.name, labels).set(n as f64),
                        FlatValue::Seconds(s) => metrics::gauge!(series.name, labels).set(s),
                    }
                }
            }
        }
    }
}
