//! `docs/METRICS.md` describes exactly the families in `METRICS`.
//!
//! The generator (and its byte-for-byte check) lives in the examples crate
//! (`cargo run -p admission-lab --bin metrics-reference`); what the core
//! pins here is the contract the reference states: one section per family of
//! `METRICS`, in exposition order, with its help text, type, unit, labels,
//! registered name and series, and no section for a family the code does not
//! export.

use admission_core::metrics::{Kind, METRICS, Metric};
use admission_core::stats::DURATION_BUCKETS;

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/METRICS.md");
const REGENERATE: &str = "cargo run -p admission-lab --bin metrics-reference";

fn committed() -> String {
    std::fs::read_to_string(PATH)
        .unwrap_or_else(|err| panic!("docs/METRICS.md is missing ({err}); run `{REGENERATE}`"))
        .replace("\r\n", "\n")
}

/// The `### ` sections of the reference: (heading, body).
fn sections(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            out.push((heading.trim_matches('`').to_owned(), String::new()));
        } else if line.starts_with("## ") {
            // A level-2 heading ends the family sections.
            if !out.is_empty() {
                out.push(("<end>".to_owned(), String::new()));
            }
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out.retain(|(heading, _)| heading != "<end>");
    out
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Gauge => "gauge",
        Kind::Counter => "counter",
        Kind::Histogram => "histogram",
    }
}

fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn the_reference_has_one_section_per_family_in_exposition_order() {
    let text = committed();
    let headings: Vec<String> = sections(&text).into_iter().map(|(h, _)| h).collect();
    let expected: Vec<String> = METRICS.iter().map(Metric::exposed_name).collect();
    assert_eq!(
        headings, expected,
        "docs/METRICS.md is out of date with admission_core::metrics::METRICS; run `{REGENERATE}`"
    );
}

#[test]
fn every_section_states_the_family_as_the_code_exports_it() {
    let text = committed();
    let sections = sections(&text);
    for metric in METRICS {
        let exposed = metric.exposed_name();
        let (_, body) = sections
            .iter()
            .find(|(heading, _)| *heading == exposed)
            .unwrap_or_else(|| panic!("a section for {exposed}; run `{REGENERATE}`"));
        let labels: Vec<String> = metric.labels.iter().map(|l| (*l).to_owned()).collect();
        for line in [
            metric.help.to_owned(),
            format!("- type: {}", kind_name(metric.kind)),
            format!("- unit: {}", metric.unit.unwrap_or("none")),
            format!("- labels: {}", code_list(&labels)),
            format!("- registered as: `{}`", metric.name),
            format!("- series: {}", code_list(&metric.series_names())),
        ] {
            assert!(
                body.lines().any(|l| l == line),
                "the section of {exposed} says `{line}`; run `{REGENERATE}`\n{body}"
            );
        }
        // The summary table carries the help text too.
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("| `{exposed}` |")) && l.contains(metric.help)),
            "the table lists {exposed} with its help text"
        );
    }
}

#[test]
fn the_histogram_section_lists_the_duration_buckets() {
    let text = committed();
    let buckets: Vec<String> = DURATION_BUCKETS
        .iter()
        .map(ToString::to_string)
        .chain(std::iter::once("+Inf".to_owned()))
        .collect();
    let line = format!("- buckets (`le`, seconds): {}", code_list(&buckets));
    assert!(
        text.lines().any(|l| l == line),
        "the reference lists the buckets as `{line}`; run `{REGENERATE}`"
    );
}
