//! The OpenTelemetry back-end (feature `opentelemetry`).
//!
//! This module owns [`AdmissionMetrics::observe_with`]: observable
//! instruments on an OpenTelemetry [`Meter`] whose callbacks read the pools'
//! snapshots each time the meter's reader collects. It must never count
//! anything itself: counters report the pools' totals, gauges their values,
//! and a histogram is reported as the series a Prometheus exposition shows
//! (`_bucket` with an `le` attribute, `_count`, `_sum`), since OpenTelemetry
//! has no observable histogram to take pre-aggregated buckets.

use opentelemetry::KeyValue;
use opentelemetry::metrics::Meter;

use super::{AdmissionMetrics, FlatValue, Kind, METRICS, Metric};

impl AdmissionMetrics {
    /// Creates, on `meter`, one observable instrument per series name of
    /// every family in `METRICS` (the names a Prometheus
    /// scrape of the `prometheus` feature shows), each reporting, for every
    /// pool added, the values read from the pools' snapshots at collection
    /// time, with the same labels as attributes. They report for as long
    /// as the meter's provider lives: nothing needs to be kept.
    ///
    /// An OpenTelemetry-to-Prometheus exporter may add its own `_total`
    /// suffix to counters; configure it without counter suffixes to keep
    /// the names `ops/` queries.
    ///
    /// # Examples
    ///
    /// ```
    /// use admission_core::Pool;
    /// use admission_core::metrics::AdmissionMetrics;
    /// use opentelemetry::metrics::MeterProvider as _;
    /// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
    ///
    /// let exporter = InMemoryMetricExporter::default();
    /// let provider = SdkMeterProvider::builder()
    ///     .with_reader(PeriodicReader::builder(exporter.clone()).build())
    ///     .build();
    /// let pool = Pool::new("registry", 2).unwrap();
    /// let metrics = AdmissionMetrics::new();
    /// metrics.add(&pool);
    /// metrics.observe_with(&provider.meter("admission"));
    ///
    /// provider.force_flush().unwrap();
    /// let names: Vec<String> = exporter.get_finished_metrics().unwrap().iter()
    ///     .flat_map(|r| r.scope_metrics().flat_map(|s| s.metrics().map(|m| m.name().to_owned())).collect::<Vec<_>>())
    ///     .collect();
    /// assert!(names.iter().any(|n| n == "admission_slots_capacity"));
    /// ```
    pub fn observe_with(&self, meter: &Meter) {
        for metric in METRICS {
            for series in metric.series_names() {
                self.instrument(meter, metric, series);
            }
        }
    }

    /// Makes one instrument; the provider keeps its callback (the handle
    /// is not needed for it to report).
    fn instrument(&self, meter: &Meter, metric: &'static Metric, series: String) {
        let metrics = self.clone();
        let name = series.clone();
        // Each callback reads fresh snapshots and reports its own series.
        let values = move || {
            let mut out = Vec::new();
            for stats in metrics.snapshots() {
                for flat in metric.flat(&stats) {
                    if flat.name == name {
                        let attributes: Vec<KeyValue> = flat
                            .labels
                            .into_iter()
                            .map(|(k, v)| KeyValue::new(k, v.into_owned()))
                            .collect();
                        out.push((flat.value, attributes));
                    }
                }
            }
            out
        };
        let help = metric.help;
        match metric.kind {
            Kind::Histogram if series.ends_with("_sum") => {
                meter
                    .f64_observable_gauge(series)
                    .with_description(help)
                    .with_unit("s")
                    .with_callback(move |observer| {
                        for (value, attributes) in values() {
                            if let FlatValue::Seconds(s) = value {
                                observer.observe(s, &attributes);
                            }
                        }
                    })
                    .build();
            }
            Kind::Gauge => {
                meter
                    .u64_observable_gauge(series)
                    .with_description(help)
                    .with_callback(move |observer| {
                        for (value, attributes) in values() {
                            if let FlatValue::Level(n) = value {
                                observer.observe(n, &attributes);
                            }
                        }
                    })
                    .build();
            }
            Kind::Counter | Kind::Histogram => {
                meter
                    .u64_observable_counter(series)
                    .with_description(help)
                    .with_callback(move |observer| {
                        for (value, attributes) in values() {
                            if let FlatValue::Count(n) = value {
                                observer.observe(n, &attributes);
                            }
                        }
                    })
                    .build();
            }
        }
    }
}
