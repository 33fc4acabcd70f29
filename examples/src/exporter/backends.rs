//! The exporter's second metrics back-end (`--metrics-backend`).
//!
//! This module owns [`publish`]: the admission families, read from the same
//! pools as `/metrics`, published through the `metrics` facade (served by
//! `metrics-exporter-prometheus`) or OpenTelemetry (printed by the SDK's
//! stdout exporter). It must never touch `/metrics` or the walks.

use std::io;
use std::time::Duration;

use admission_core::metrics::AdmissionMetrics;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};

use super::config::MetricsBackend;

/// How often the facade is written from the pools' statistics.
const RECORD_EVERY: Duration = Duration::from_secs(1);

/// Publishes `metrics` through `backend` for the rest of the process.
pub(crate) fn publish(
    metrics: &AdmissionMetrics,
    backend: Option<MetricsBackend>,
    interval: Duration,
) -> io::Result<()> {
    match backend {
        None => {}
        Some(MetricsBackend::Facade(addr)) => {
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .with_http_listener(addr)
                .install()
                .map_err(io::Error::other)?;
            let metrics = metrics.clone();
            std::thread::Builder::new()
                .name("metrics-facade".to_owned())
                .spawn(move || {
                    loop {
                        metrics.record();
                        std::thread::sleep(RECORD_EVERY);
                    }
                })?;
            tracing::info!(%addr, "admission metrics also served through the metrics facade");
        }
        Some(MetricsBackend::OpenTelemetry) => {
            let reader = PeriodicReader::builder(opentelemetry_stdout::MetricExporter::default())
                .with_interval(interval)
                .build();
            let provider = SdkMeterProvider::builder().with_reader(reader).build();
            metrics.observe_with(&provider.meter("admission"));
            // It publishes for the life of the process.
            Box::leak(Box::new(provider));
            tracing::info!(
                "admission metrics also printed through OpenTelemetry's stdout exporter"
            );
        }
    }
    Ok(())
}
