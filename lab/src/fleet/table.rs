//! The fleet table: one Markdown row per scenario.
//!
//! This module owns the table's columns and their formatting; it computes
//! nothing a [`Row`] does not already hold.

use std::fmt::Write as _;

use super::{Front, Row};

/// The rows as one Markdown table, then one line per rolling restart.
///
/// # Examples
///
/// ```
/// use admission_lab::fleet::render;
///
/// let table = render(&[]);
/// assert!(table.starts_with("| run |"));
/// ```
pub fn render(rows: &[Row]) -> String {
    let mut out = String::from(
        "| run | offered/s | sent | 503s % | goodput/s | timeouts | errors | admitted p99 ms \
         | peak walks per replica (pool) | balancer retries |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |\n",
    );
    for row in rows {
        let o = &row.outcomes;
        let p99 = o.good_p(99.0).map_or_else(
            || "-".to_owned(),
            |d| format!("{:.1}", d.as_secs_f64() * 1e3),
        );
        let peaks = row
            .peak_walks
            .iter()
            .map(|p| p.map_or_else(|| "?".to_owned(), |p| p.to_string()))
            .collect::<Vec<_>>()
            .join(" / ");
        let retries = match (row.scenario.front, row.balancer_retries) {
            (Front::Haproxy { .. }, Some((r, d))) => format!("{r} retried, {d} redispatched"),
            (Front::Envoy, Some((r, w))) => format!("{r} retried, {w} after Retry-After"),
            _ => "-".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | {:.0} | {} | {:.2} | {:.1} | {} | {} | {p99} | {peaks} ({}) | {retries} |",
            row.scenario.name,
            o.offered_rate(row.window),
            o.sent(),
            row.refused_percent(),
            o.goodput(row.window),
            o.timed_out,
            o.errors,
            row.workers,
        );
    }
    for row in rows.iter().filter(|r| r.scenario.rolling_restart) {
        let exits = row
            .restarts
            .iter()
            .enumerate()
            .map(|(i, (took, ok))| {
                format!(
                    "r{} {} in {} ms",
                    i + 1,
                    if *ok { "exited 0" } else { "exited non-zero" },
                    took.as_millis()
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let done = row.restarts_done.map_or_else(String::new, |d| {
            format!("; all back by {:.1} s", d.as_secs_f64())
        });
        let _ = writeln!(out, "\n{}: {exits}{done}", row.scenario.name);
    }
    out
}
