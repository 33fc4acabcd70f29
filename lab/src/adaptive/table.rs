//! The figures the harness reports, computed from the runs' series, and
//! the Markdown tables they go in.
//!
//! This module owns [`PhaseFigures`] (one gate's figures over one phase),
//! the recovery time after a capacity step, and the three tables (offered
//! load, capacity step, timeout plateau). It measures nothing itself.

use std::fmt::Write as _;
use std::time::Duration;

use super::run::{Scenario, Series};

/// One gate's figures over one phase of a scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseFigures {
    /// Good answers per second of the phase.
    pub goodput: f64,
    /// Requests offered.
    pub offered: u64,
    /// Refusals (`503`).
    pub refused: u64,
    /// Requests that timed out at the client.
    pub timed_out: u64,
    /// The 99th percentile of the good answers' latency.
    pub p99: Option<Duration>,
    /// The gate's limit: its mean, coefficient of variation and maximum
    /// over the phase (`None` when it reports none).
    pub limit: Option<(f64, f64, usize)>,
}

impl PhaseFigures {
    /// `series`' figures over phase `phase` of `scenario`.
    pub fn of(series: &Series, scenario: &Scenario, phase: usize) -> PhaseFigures {
        let length = scenario.phases[phase].length.as_secs_f64();
        let mut good = Vec::new();
        let (mut offered, mut refused, mut timed_out) = (0, 0, 0);
        for slice in series.slices.iter().filter(|s| s.phase == phase) {
            let total = slice.report.total();
            offered += total.offered;
            refused += total.refused.len() as u64;
            timed_out += total.timed_out;
            good.extend_from_slice(&total.good);
        }
        good.sort_unstable();
        let p99 = (!good.is_empty()).then(|| {
            let rank = ((good.len() as f64 * 0.99).ceil() as usize).clamp(1, good.len());
            good[rank - 1]
        });
        let limits: Vec<f64> = series
            .limits
            .iter()
            .filter(|(_, p, _)| *p == phase)
            .map(|(_, _, l)| *l as f64)
            .collect();
        let limit = (!limits.is_empty()).then(|| {
            let n = limits.len() as f64;
            let mean = limits.iter().sum::<f64>() / n;
            let var = limits.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / n;
            let max = limits.iter().copied().fold(0.0, f64::max) as usize;
            (mean, if mean > 0.0 { var.sqrt() / mean } else { 0.0 }, max)
        });
        PhaseFigures {
            goodput: good.len() as f64 / length,
            offered,
            refused,
            timed_out,
            p99,
            limit,
        }
    }
}

/// How long after phase `phase` starts `series`' goodput, over a sliding
/// second, first reaches 95% of `reference` (good answers per second);
/// `None` when it never does within the phase.
pub fn recovery(series: &Series, phase: usize, reference: f64) -> Option<f64> {
    let slices: Vec<(f64, f64, f64)> = series
        .slices
        .iter()
        .filter(|s| s.phase == phase)
        .map(|s| {
            let good = s.report.total().good.len() as f64;
            (s.at, s.at + s.report.window.as_secs_f64(), good)
        })
        .collect();
    let start = slices.first()?.0;
    let (mut from, mut good) = (0, 0.0);
    for &(_, end, n) in &slices {
        good += n;
        while end - slices[from].0 > 1.0 + 1e-9 {
            good -= slices[from].2;
            from += 1;
        }
        let spanned = end - slices[from].0;
        if spanned >= 1.0 - 1e-9 && good / spanned >= 0.95 * reference {
            return Some(end - start);
        }
    }
    None
}

fn ms(d: Option<Duration>) -> String {
    d.map_or_else(
        || "-".to_owned(),
        |d| format!("{:.0}", d.as_secs_f64() * 1000.0),
    )
}

fn limit(l: Option<(f64, f64, usize)>) -> (String, String) {
    l.map_or_else(
        || ("-".to_owned(), "-".to_owned()),
        |(mean, cv, _)| (format!("{mean:.1}"), format!("{:.0}%", cv * 100.0)),
    )
}

/// The offered-load table: per load, one row per gate, goodput beside the
/// best fixed limit's in the same run.
pub fn load_table(runs: &[(f64, Scenario, Vec<Series>)]) -> String {
    let mut out = String::from(
        "| load | gate | goodput /s | of best fixed | refused | timed out | admitted p99 ms | limit mean | limit CV |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for (load, scenario, series) in runs {
        let last = scenario.phases.len() - 1;
        let figures: Vec<_> = series
            .iter()
            .map(|s| PhaseFigures::of(s, scenario, last))
            .collect();
        let best = figures.first().map_or(0.0, |f| f.goodput);
        for (s, f) in series.iter().zip(&figures) {
            let (mean, cv) = limit(f.limit);
            let _ = writeln!(
                out,
                "| {load}x | {} | {:.1} | {:.0}% | {} | {} | {} | {mean} | {cv} |",
                label(s),
                f.goodput,
                if best > 0.0 {
                    f.goodput / best * 100.0
                } else {
                    0.0
                },
                f.refused,
                f.timed_out,
                ms(f.p99),
            );
        }
    }
    out
}

/// The capacity-step table: goodput per phase and the recovery times
/// against the fixed oracle's goodput in the same phase.
pub fn step_table(scenario: &Scenario, series: &[Series]) -> String {
    let mut out = String::from(
        "| gate | goodput at C /s | at C/2 | back at C | recovery after halving s | after doubling s | limit mean at C/2 | back at C |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let n = scenario.phases.len();
    let (down, up) = (n - 2, n - 1);
    let reference = |p| {
        series
            .first()
            .map_or(0.0, |s| PhaseFigures::of(s, scenario, p).goodput)
    };
    let (ref_down, ref_up) = (reference(down), reference(up));
    for s in series {
        let f: Vec<_> = (n - 3..n)
            .map(|p| PhaseFigures::of(s, scenario, p))
            .collect();
        let time = |t: Option<f64>| t.map_or_else(|| "never".to_owned(), |t| format!("{t:.1}"));
        let _ = writeln!(
            out,
            "| {} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} |",
            label(s),
            f[0].goodput,
            f[1].goodput,
            f[2].goodput,
            time(recovery(s, down, ref_down)),
            time(recovery(s, up, ref_up)),
            limit(f[1].limit).0,
            limit(f[2].limit).0,
        );
    }
    out
}

/// The timeout-plateau table: how high the limit went while every request
/// timed out, and whether it came back after.
pub fn plateau_table(scenario: &Scenario, series: &[Series]) -> String {
    let mut out = String::from(
        "| gate | limit max in plateau | limit mean in plateau | goodput after /s | of best fixed | limit mean after |\n\
         | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let n = scenario.phases.len();
    let best = series
        .first()
        .map_or(0.0, |s| PhaseFigures::of(s, scenario, n - 1).goodput);
    for s in series {
        let plateau = PhaseFigures::of(s, scenario, n - 2);
        let after = PhaseFigures::of(s, scenario, n - 1);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.1} | {:.0}% | {} |",
            label(s),
            plateau
                .limit
                .map_or_else(|| "-".to_owned(), |l| l.2.to_string()),
            limit(plateau.limit).0,
            after.goodput,
            if best > 0.0 {
                after.goodput / best * 100.0
            } else {
                0.0
            },
            limit(after.limit).0,
        );
    }
    out
}

/// A gate's name, with a fixed limit's value.
pub fn label(series: &Series) -> String {
    match series.gate {
        super::Gate::Fixed(n) => format!("{} ({n})", series.gate.name()),
        gate => gate.name().to_owned(),
    }
}
