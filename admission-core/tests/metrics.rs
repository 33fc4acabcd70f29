//! The `prometheus` feature: every family in `METRICS` shows up in a real
//! exposition with the `pool` label, and the values follow the pool.

#![cfg(feature = "prometheus")]

use admission_core::metrics::{AdmissionMetrics, METRICS};
use admission_core::{Admission, Pool};
use prometheus_client::registry::Registry;

fn scrape(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

#[tokio::test(flavor = "current_thread")]
async fn every_listed_family_is_exposed_with_the_pool_label() {
    let pool = Pool::new("metrics-pool", 2).unwrap();
    let metrics = AdmissionMetrics::new();
    metrics.add(&pool);
    metrics.add(&pool);
    let mut registry = Registry::default();
    metrics.register(&mut registry);

    pool.run(|| Ok::<_, std::fmt::Error>(()), Admission::FailFast)
        .await
        .unwrap();
    let held = pool.try_admit().unwrap();
    let text = scrape(&registry);
    for metric in METRICS {
        for series in metric.series_names() {
            assert!(
                text.lines().any(|l| l.starts_with(&format!("{series}{{"))
                    && l.contains(r#"pool="metrics-pool""#)),
                "{series} is exposed with the pool label"
            );
        }
    }
    assert!(text.contains(r#"admission_slots_in_use{pool="metrics-pool"} 1"#));
    assert!(text.contains(r#"admission_admitted_total{pool="metrics-pool"} 2"#));
    assert!(text.contains(r#"admission_work_duration_seconds_count{pool="metrics-pool"} 1"#));
    assert!(
        text.contains(r#"admission_work_duration_seconds_bucket{le="+Inf",pool="metrics-pool"} 1"#),
        "buckets are cumulative once, not twice"
    );
    assert!(
        text.contains(
            r#"admission_work_duration_seconds_bucket{le="0.001",pool="metrics-pool"} 1"#
        )
    );
    assert_eq!(
        text.matches("admission_slots_capacity{").count(),
        1,
        "added once"
    );
    drop(held);
}
