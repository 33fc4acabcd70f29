//! The exporter's connection counters as metric families.
//!
//! This module owns [`ConnectionMetrics`]: a `prometheus-client` collector
//! over [`admission_axum::serve::Connections`], read at scrape time. It
//! must never export a client's address or anything else a client sent.

use std::fmt;
use std::sync::{Arc, OnceLock};

use admission_axum::serve::{ConnectionStats, Connections};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// One exported family: name, help, type and how to read it.
type Family = (
    &'static str,
    &'static str,
    MetricType,
    fn(&ConnectionStats) -> u64,
);

/// The families, in exposition order.
const FAMILIES: [Family; 9] = [
    (
        "exporter_connections_open",
        "HTTP connections open now.",
        MetricType::Gauge,
        |s| s.open as u64,
    ),
    (
        "exporter_connections_max",
        "The bound on open HTTP connections.",
        MetricType::Gauge,
        |s| s.max as u64,
    ),
    (
        "exporter_connections_accepted",
        "HTTP connections accepted from the listener, refused ones included.",
        MetricType::Counter,
        |s| s.accepted,
    ),
    (
        "exporter_connections_refused",
        "HTTP connections closed at once at the bound (every open one had a request in flight).",
        MetricType::Counter,
        |s| s.refused,
    ),
    (
        "exporter_connections_evicted",
        "HTTP connections closed to make room because they had waited longest for a request head.",
        MetricType::Counter,
        |s| s.evicted,
    ),
    (
        "exporter_connections_header_timeouts",
        "HTTP connections closed because a request head was not complete in time.",
        MetricType::Counter,
        |s| s.header_timeouts,
    ),
    (
        "exporter_connections_idle_timeouts",
        "Kept-alive HTTP connections closed after the idle timeout.",
        MetricType::Counter,
        |s| s.idle_timeouts,
    ),
    (
        "exporter_connections_write_timeouts",
        "HTTP connections closed because the client took no byte of a response for the write-progress timeout.",
        MetricType::Counter,
        |s| s.write_timeouts,
    ),
    (
        "exporter_connections_accept_errors",
        "Accepts that failed, e.g. with the process out of descriptors.",
        MetricType::Counter,
        |s| s.accept_errors,
    ),
];

/// The connection counters of the server, once it serves; nothing is
/// exported before (the registry is built before the listener is served).
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnectionMetrics {
    connections: Arc<OnceLock<Connections>>,
}

impl ConnectionMetrics {
    /// Exports `connections` from now on (the first call wins).
    pub(crate) fn attach(&self, connections: Connections) {
        let _first = self.connections.set(connections);
    }

    /// Adds the families to `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }
}

impl Collector for ConnectionMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> fmt::Result {
        let Some(stats) = self.connections.get().map(Connections::stats) else {
            return Ok(());
        };
        for (name, help, kind, read) in FAMILIES {
            let family = encoder.encode_descriptor(name, help, None, kind)?;
            let value = read(&stats);
            match kind {
                MetricType::Counter => ConstCounter::new(value).encode(family)?,
                _ => ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX)).encode(family)?,
            }
        }
        Ok(())
    }
}
