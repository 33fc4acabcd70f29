//! The one table the storm prints.
//!
//! This module owns [`Row`] and its rendering; it computes nothing but
//! percentiles and widths.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Phase, Tally, percentile};

/// One mode (a gate, with or without coalescing) under one phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The gate, `+coalesce` when it coalesces (or `url` for `--url`).
    pub mode: String,
    /// The scrapers' behaviour.
    pub phase: Phase,
    /// What the scrapers saw.
    pub tally: Tally,
    /// Registry walks that actually ran (started on a thread) during the
    /// phase: coalesced scrapes share one, and a walk whose scraper gave up
    /// still counts. `None` when the server is not in this process.
    pub walks_run: Option<u64>,
    /// The most walks running at once (the gauge inside the walk); `None`
    /// when the server is not in this process.
    pub max_walks: Option<u64>,
    /// Walks still running or queued when the phase ended.
    pub walks_left: Option<u64>,
    /// Growth of this process's resident memory over the phase, in KiB.
    pub memory_growth_kib: Option<i64>,
}

const HEADER: [&str; 14] = [
    "mode",
    "phase",
    "requests",
    "ok",
    "refused",
    "gave up",
    "errors",
    "ok p50",
    "ok p99",
    "refused p99",
    "walks run",
    "max walks at once",
    "walks left",
    "memory growth",
];

/// Renders `rows` as one aligned table, header first.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::{Phase, Row, Tally, render};
///
/// let row = Row {
///     mode: "admission".into(),
///     phase: Phase::Patient,
///     tally: Tally::default(),
///     walks_run: Some(0),
///     max_walks: Some(2),
///     walks_left: Some(0),
///     memory_growth_kib: None,
/// };
/// let table = render(&mut [row]);
/// assert!(table.starts_with("mode"));
/// assert!(table.contains("walks run"));
/// assert!(table.contains("max walks at once"));
/// ```
pub fn render(rows: &mut [Row]) -> String {
    let mut cells: Vec<Vec<String>> = vec![HEADER.iter().map(|h| (*h).to_owned()).collect()];
    for row in rows.iter_mut() {
        let tally = &mut row.tally;
        let ok_p50 = percentile(&mut tally.ok, 50.0);
        let ok_p99 = percentile(&mut tally.ok, 99.0);
        let refused_p99 = percentile(&mut tally.refused, 99.0);
        cells.push(vec![
            row.mode.clone(),
            row.phase.to_string(),
            tally.requests().to_string(),
            tally.ok.len().to_string(),
            tally.refused.len().to_string(),
            tally.gave_up.to_string(),
            tally.errors.to_string(),
            latency(ok_p50),
            latency(ok_p99),
            latency(refused_p99),
            or_dash(row.walks_run),
            or_dash(row.max_walks),
            or_dash(row.walks_left),
            row.memory_growth_kib.map_or_else(|| "-".to_owned(), memory),
        ]);
    }
    let widths: Vec<usize> = (0..HEADER.len())
        .map(|col| cells.iter().map(|r| r[col].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, line) in cells.iter().enumerate() {
        let mut text = String::new();
        for (col, cell) in line.iter().enumerate() {
            let sep = if col == 0 { "" } else { "  " };
            // Text columns align left, numbers right.
            if col < 2 {
                let _ = write!(text, "{sep}{cell:<w$}", w = widths[col]);
            } else {
                let _ = write!(text, "{sep}{cell:>w$}", w = widths[col]);
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
        if i == 0 {
            let total = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

fn or_dash(value: Option<u64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn latency(value: Option<Duration>) -> String {
    match value {
        None => "-".to_owned(),
        Some(d) if d < Duration::from_millis(1) => format!("{}us", d.as_micros()),
        Some(d) if d < Duration::from_secs(1) => format!("{:.1}ms", d.as_secs_f64() * 1e3),
        Some(d) => format!("{:.2}s", d.as_secs_f64()),
    }
}

fn memory(kib: i64) -> String {
    if kib.abs() < 1024 {
        format!("{kib:+} KiB")
    } else {
        format!("{:+.1} MiB", kib as f64 / 1024.0)
    }
}
