//! Issue 28: the `metrics` facade and OpenTelemetry back-ends, each read
//! back from what it recorded: metrics-util's `DebuggingRecorder` and the
//! OpenTelemetry SDK's in-memory exporter. Both are fed from the same pool
//! statistics as the `prometheus-client` collector: two refusals of two
//! codes, one piece of work, one slot held.

#![cfg(any(feature = "metrics", feature = "opentelemetry"))]

use std::time::Duration;

use admission_core::metrics::AdmissionMetrics;
use admission_core::{Admission, Code, Pool};

/// A pool with one piece of work done, a refusal with
/// `ADMISSION_SATURATED` and one with `ADMISSION_WAIT_TIMEOUT`, and one
/// slot still held (returned).
async fn busy_pool(name: &str) -> (Pool, admission_core::pool::Slot) {
    let pool = Pool::new(name, 1).unwrap();
    pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast)
        .await
        .unwrap();
    let held = std::thread::scope(|s| s.spawn(|| pool.try_admit().unwrap()).join().unwrap());
    assert_eq!(pool.try_admit().unwrap_err().code(), Code::Saturated);
    let timed_out = pool
        .admit_timeout(Duration::from_millis(1))
        .await
        .unwrap_err();
    assert_eq!(timed_out.code(), Code::WaitTimedOut);
    (pool, held)
}

#[cfg(feature = "metrics")]
mod facade {
    use super::*;
    use metrics_util::CompositeKey;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    type Recorded = Vec<(
        CompositeKey,
        Option<metrics::Unit>,
        Option<metrics::SharedString>,
        DebugValue,
    )>;

    fn value<'a>(
        recorded: &'a Recorded,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<&'a DebugValue> {
        recorded.iter().find_map(|(key, _, _, value)| {
            let key = key.key();
            let matches = key.name() == name
                && labels.iter().all(|(k, v)| {
                    key.labels()
                        .any(|label| label.key() == *k && label.value() == *v)
                });
            matches.then_some(value)
        })
    }

    #[tokio::test(start_paused = true)]
    async fn the_facade_records_every_family_from_the_pools_statistics() {
        let (pool, held) = busy_pool("facade-pool").await;
        let metrics = AdmissionMetrics::new();
        metrics.add(&pool);
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        // Recorded twice: totals are set, not added.
        metrics::with_local_recorder(&recorder, || metrics.record());
        metrics::with_local_recorder(&recorder, || metrics.record());
        // One snapshot: the debugging recorder resets what a snapshot reads.
        let recorded: Recorded = snapshotter.snapshot().into_vec();

        let pool_label = ("pool", "facade-pool");
        for (code, n) in [
            ("ADMISSION_SATURATED", 1),
            ("ADMISSION_WAIT_TIMEOUT", 1),
            ("ADMISSION_SHUTTING_DOWN", 0),
        ] {
            assert_eq!(
                value(
                    &recorded,
                    "admission_refused_total",
                    &[pool_label, ("criticality", "default"), ("code", code)]
                ),
                Some(&DebugValue::Counter(n)),
                "{code}"
            );
        }
        assert_eq!(
            value(&recorded, "admission_slots_in_use", &[pool_label]),
            Some(&DebugValue::Gauge(1.0.into()))
        );
        assert_eq!(
            value(&recorded, "admission_admitted_total", &[pool_label]),
            Some(&DebugValue::Counter(2))
        );
        assert_eq!(
            value(
                &recorded,
                "admission_work_duration_seconds_bucket",
                &[pool_label, ("le", "+Inf")]
            ),
            Some(&DebugValue::Counter(1))
        );
        assert_eq!(
            value(
                &recorded,
                "admission_wait_duration_seconds_count",
                &[pool_label, ("outcome", "refused")]
            ),
            Some(&DebugValue::Counter(1)),
            "the timed-out wait"
        );
        let names: std::collections::BTreeSet<String> = recorded
            .iter()
            .map(|(key, ..)| key.key().name().to_owned())
            .collect();
        for metric in admission_core::metrics::METRICS {
            for series in metric.series_names() {
                assert!(names.contains(&series), "{series} recorded ({names:?})");
            }
        }
        drop(held);
    }
}

#[cfg(feature = "opentelemetry")]
mod otel {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    /// One exported data point: (instrument, attributes, value).
    type Point = (String, Vec<(String, String)>, f64);

    /// Every data point exported.
    fn points(exporter: &InMemoryMetricExporter) -> Vec<Point> {
        let mut out = Vec::new();
        for resource in exporter.get_finished_metrics().unwrap() {
            for scope in resource.scope_metrics() {
                for metric in scope.metrics() {
                    let name = metric.name().to_owned();
                    let attrs = |kvs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
                        kvs.map(|kv| (kv.key.as_str().to_owned(), kv.value.as_str().into_owned()))
                            .collect::<Vec<_>>()
                    };
                    #[expect(clippy::cast_precision_loss, reason = "small test counts")]
                    match metric.data() {
                        AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                            for p in sum.data_points() {
                                out.push((
                                    name.clone(),
                                    attrs(&mut p.attributes()),
                                    p.value() as f64,
                                ));
                            }
                        }
                        AggregatedMetrics::U64(MetricData::Gauge(gauge)) => {
                            for p in gauge.data_points() {
                                out.push((
                                    name.clone(),
                                    attrs(&mut p.attributes()),
                                    p.value() as f64,
                                ));
                            }
                        }
                        AggregatedMetrics::F64(MetricData::Gauge(gauge)) => {
                            for p in gauge.data_points() {
                                out.push((name.clone(), attrs(&mut p.attributes()), p.value()));
                            }
                        }
                        other => panic!("{name}: an unexpected kind of data {other:?}"),
                    }
                }
            }
        }
        out
    }

    fn find(points: &[Point], name: &str, labels: &[(&str, &str)]) -> f64 {
        let found: Vec<f64> = points
            .iter()
            .filter(|(n, attrs, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| attrs.iter().any(|(ak, av)| ak == k && av == v))
            })
            .map(|(.., v)| *v)
            .collect();
        assert_eq!(found.len(), 1, "one point of {name} {labels:?}: {found:?}");
        found[0]
    }

    #[tokio::test(start_paused = true)]
    async fn opentelemetry_instruments_report_every_family_from_the_pools_statistics() {
        let (pool, held) = busy_pool("otel-pool").await;
        let metrics = AdmissionMetrics::new();
        metrics.add(&pool);
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        metrics.observe_with(&provider.meter("admission"));
        provider.force_flush().unwrap();

        let points = points(&exporter);
        let pool_label = ("pool", "otel-pool");
        for (code, n) in [
            ("ADMISSION_SATURATED", 1.0),
            ("ADMISSION_WAIT_TIMEOUT", 1.0),
            ("ADMISSION_BUDGET_TOO_SHORT", 0.0),
        ] {
            assert_eq!(
                find(
                    &points,
                    "admission_refused_total",
                    &[pool_label, ("criticality", "default"), ("code", code)]
                ),
                n,
                "{code}"
            );
        }
        assert_eq!(
            find(&points, "admission_slots_capacity", &[pool_label]),
            1.0
        );
        assert_eq!(find(&points, "admission_slots_in_use", &[pool_label]), 1.0);
        assert_eq!(
            find(
                &points,
                "admission_work_duration_seconds_bucket",
                &[pool_label, ("le", "+Inf")]
            ),
            1.0
        );
        assert_eq!(
            find(
                &points,
                "admission_wait_duration_seconds_sum",
                &[pool_label, ("outcome", "refused")]
            ),
            0.001,
            "the timed-out wait, 1 ms on the paused clock"
        );
        for metric in admission_core::metrics::METRICS {
            for series in metric.series_names() {
                assert!(
                    points.iter().any(|(n, ..)| *n == series),
                    "{series} reported"
                );
            }
        }
        drop(held);
        provider.shutdown().unwrap();
    }
}
