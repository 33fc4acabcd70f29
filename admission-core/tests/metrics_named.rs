//! Issue 37.9: two sets of request pools in one process, one named, export
//! disjoint series through the `metrics` facade and Prometheus: each
//! class's refusals and capacity under its own `pool` label, none
//! overwriting the other's (before names, both were `pool="work"`).

#![cfg(all(feature = "metrics", feature = "prometheus"))]

use admission_core::metrics::AdmissionMetrics;
use admission_core::{Class, RequestPools};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// A fail-fast set (2 work, 4 control slots) with one work refusal and an
/// `admin` set (1 and 1) with two.
fn two_sets() -> (RequestPools, RequestPools, AdmissionMetrics) {
    let public = RequestPools::new(2, 4).unwrap();
    let admin = RequestPools::builder()
        .name("admin")
        .work(1)
        .control(1)
        .build()
        .unwrap();
    let held = (
        public.try_lease(Class::Work).unwrap(),
        public.try_lease(Class::Work).unwrap(),
        admin.try_lease(Class::Work).unwrap(),
    );
    assert!(public.try_lease(Class::Work).is_err());
    assert!(admin.try_lease(Class::Work).is_err());
    assert!(admin.try_lease(Class::Work).is_err());
    drop(held);
    let metrics = AdmissionMetrics::new();
    metrics.add(&public);
    metrics.add(&admin);
    (public, admin, metrics)
}

#[test]
fn two_sets_export_disjoint_series_through_the_facade() {
    let (_public, _admin, metrics) = two_sets();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || metrics.record());
    let recorded = snapshotter.snapshot().into_vec();
    let value = |name: &str, pool: &str, code: Option<&str>| {
        let found: Vec<_> = recorded
            .iter()
            .filter(|(key, ..)| {
                let key = key.key();
                key.name() == name
                    && key.labels().any(|l| l.key() == "pool" && l.value() == pool)
                    && code.is_none_or(|code| {
                        key.labels().any(|l| l.key() == "code" && l.value() == code)
                            && key
                                .labels()
                                .any(|l| l.key() == "criticality" && l.value() == "default")
                    })
            })
            .map(|(.., value)| value)
            .collect();
        assert_eq!(found.len(), 1, "one series for {name} {pool} {code:?}");
        found.into_iter().next().unwrap()
    };
    let refused = "admission_refused_total";
    let saturated = Some("ADMISSION_SATURATED");
    assert_eq!(value(refused, "work", saturated), &DebugValue::Counter(1));
    assert_eq!(
        value(refused, "admin.work", saturated),
        &DebugValue::Counter(2)
    );
    let capacity = "admission_slots_capacity";
    assert_eq!(
        value(capacity, "control", None),
        &DebugValue::Gauge(4.0.into())
    );
    assert_eq!(
        value(capacity, "admin.control", None),
        &DebugValue::Gauge(1.0.into())
    );
}

#[test]
fn two_sets_export_disjoint_series_through_prometheus() {
    let (_public, _admin, metrics) = two_sets();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let line = |prefix: &str, pool: &str| {
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter(|line| line.contains(&format!("pool=\"{pool}\"")))
            .filter(|line| !line.contains("code=") || line.contains("ADMISSION_SATURATED"))
            .filter(|line| !line.contains("criticality=") || line.contains("\"default\""))
            .collect();
        assert_eq!(lines.len(), 1, "{prefix} {pool}: {lines:?}");
        lines[0].rsplit(' ').next().unwrap().to_owned()
    };
    assert_eq!(line("admission_refused_total", "work"), "1");
    assert_eq!(line("admission_refused_total", "admin.work"), "2");
    assert_eq!(line("admission_slots_capacity", "control"), "4");
    assert_eq!(line("admission_slots_capacity", "admin.control"), "1");
}

/// Shadow mode on the scrape: what enforcing would have refused, what
/// would have waited, and the slots held past the capacity, per pool.
#[test]
fn shadow_mode_is_on_the_scrape() {
    let requests = RequestPools::new(1, 1).unwrap();
    requests.set_shadow(true);
    let _one = requests.try_lease(Class::Work).unwrap();
    let _past = requests.try_lease(Class::Work).unwrap();
    let metrics = AdmissionMetrics::new();
    metrics.add(&requests);
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let series = |name: &str, labels: &str| {
        let found: Vec<&str> = text
            .lines()
            .filter(|line| line.starts_with(&format!("{name}{{")) && line.contains(labels))
            .collect();
        assert_eq!(found.len(), 1, "{name} {labels}: {found:?}");
        found[0].rsplit(' ').next().unwrap().to_owned()
    };
    let saturated = r#"pool="work",criticality="default",code="ADMISSION_SATURATED""#;
    assert_eq!(series("admission_would_refuse_total", saturated), "1");
    assert_eq!(series("admission_refused_total", saturated), "0");
    assert_eq!(series("admission_slots_overdraft", r#"pool="work""#), "1");
    assert_eq!(series("admission_slots_in_use", r#"pool="work""#), "2");
    assert_eq!(series("admission_would_wait_total", r#"pool="work""#), "0");
}
