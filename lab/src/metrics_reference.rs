//! The metrics reference generator: `docs/METRICS.md` from
//! `admission_core::metrics::METRICS`, the single list of families the
//! collector exports.
//!
//! This module owns the reference's text. It must never describe a family
//! the core does not list: every line comes from `METRICS`.

use admission_core::metrics::{Kind, METRICS};
use admission_core::stats::DURATION_BUCKETS;

/// The command that regenerates `docs/METRICS.md`.
const REFERENCE_COMMAND: &str = "cargo run -p admission-lab --bin metrics-reference";

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
/// use admission_core::metrics::METRICS;
/// use admission_lab::metrics_reference::reference_markdown;
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

    let codes = code(
        &admission_core::Code::ALL
            .iter()
            .filter(|c| c.is_overload())
            .map(|c| c.as_str().to_owned())
            .collect::<Vec<_>>(),
    );
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write!(
        out,
        "# Metrics reference\n\n\
         <!-- Generated from `admission_core::metrics::METRICS`; do not edit.\n     \
         Regenerate with `{REFERENCE_COMMAND}`. -->\n\n\
         Every metric family admission exports through\n\
         `admission_core::metrics::AdmissionMetrics`, in exposition order, to\n\
         a `prometheus-client` registry (feature `prometheus`), the `metrics`\n\
         facade (feature `metrics`) or an OpenTelemetry `Meter` (feature\n\
         `opentelemetry`). Each pool added gets one series per family,\n\
         labelled `pool` with the pool's name (the refusal counter one per\n\
         `criticality` and `code`, the wait histogram one per `outcome`);\n\
         Prometheus adds `job` and `instance` when it scrapes. The values are\n\
         read from the pools' own counts at scrape time.\n\n\
         The `code` label carries the stable refusal codes: {codes}.\n\n\
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
