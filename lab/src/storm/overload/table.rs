//! The overload run as Markdown tables, and the issue's goals judged
//! against it.
//!
//! This module owns [`render`] and [`goals`]. It formats and compares
//! figures measured elsewhere; it never measures and never rounds a figure
//! before a goal is judged on it.

use std::fmt::Write as _;
use std::time::Duration;

use super::{Overload, Point, Sweep};
use crate::storm::open_loop::Criticality;

/// The label of the gate the queue goals are judged on.
pub const QUEUE_GATE: &str = "admission queue";

/// One goal of the issue: what it asks, what the run measured, and whether
/// that meets it (`None` when the run could not measure it).
#[derive(Debug, Clone, PartialEq)]
pub struct Goal {
    /// The goal as the issue states it.
    pub goal: String,
    /// The figure measured, with the margin.
    pub measured: String,
    /// Met, missed, or not measured.
    pub met: Option<bool>,
}

/// The whole run as Markdown: the sweep, the scenarios and the goals.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::overload::{Overload, OverloadConfig, Sweep, render};
///
/// let run = Overload {
///     config: OverloadConfig::default(),
///     sweep: Sweep { pinned: true, capacity: 90.0, points: Vec::new() },
///     unpinned: None,
///     criticality: Vec::new(),
///     deadline: Vec::new(),
/// };
/// let text = render(&run);
/// assert!(text.contains("| offered | gate | goodput/s |"));
/// assert!(text.contains("capacity 90.0 walks/s"));
/// ```
pub fn render(run: &Overload) -> String {
    let mut out = String::new();
    let c = &run.config;
    let _ = writeln!(
        out,
        "Sweep: {} workers, {} ms walk delay, {} series, client timeout {} ms, {} s per point, \
         {}; capacity {:.1} walks/s (mean walk {}).\n",
        c.workers,
        c.walk_delay.as_millis(),
        c.series,
        c.timeout.as_millis(),
        c.point.as_secs_f64(),
        pinned(&run.sweep),
        run.sweep.capacity,
        ms(walk_time(&run.sweep)),
    );
    sweep_table(&mut out, &run.sweep);
    if let Some(unpinned) = &run.unpinned {
        let _ = writeln!(
            out,
            "\nThe same sweep unpinned: capacity {:.1} walks/s.\n",
            unpinned.capacity
        );
        sweep_table(&mut out, unpinned);
    }
    if !run.criticality.is_empty() {
        let _ = writeln!(
            out,
            "\nCriticality: critical at 0.5x capacity and sheddable at 10x in one Poisson \
             stream, client timeout {} ms.\n",
            c.timeout.as_millis()
        );
        criticality_table(&mut out, &run.criticality);
    }
    if let Some(first) = run.deadline.first() {
        let _ = writeln!(
            out,
            "\nDeadlines: client timeout {} ms (1.5x the walk delay), 5x capacity; the budget \
             header carries the same {} ms when sent.\n",
            first.report.timeout.as_millis(),
            first.report.timeout.as_millis(),
        );
        deadline_table(&mut out, &run.deadline);
    }
    let _ = writeln!(out, "\n| goal | measured | met |\n| --- | --- | --- |");
    for goal in goals(run) {
        let met = match goal.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "not measured",
        };
        let _ = writeln!(out, "| {} | {} | {met} |", goal.goal, goal.measured);
    }
    out
}

fn pinned(sweep: &Sweep) -> &'static str {
    if sweep.pinned {
        "server pinned to CPU 0 and generator to CPU 1"
    } else {
        "unpinned"
    }
}

fn sweep_table(out: &mut String, sweep: &Sweep) {
    let _ = writeln!(
        out,
        "| offered | gate | goodput/s | goodput / offered | refused | timed out | \
         errors + dropped | admitted p50 | admitted p99 | refusal p99 | max walks at once |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for p in &sweep.points {
        let t = p.report.total();
        let _ = writeln!(
            out,
            "| {:.0}/s ({}x) | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} |",
            t.offered_rate(p.report.window),
            p.multiple,
            p.gate,
            t.goodput(p.report.window),
            pct(t.good.len() as u64, t.offered),
            pct(t.refused.len() as u64, t.offered),
            pct(t.timed_out, t.offered),
            t.errors + t.dropped,
            ms(t.good_p(50.0)),
            ms(t.good_p(99.0)),
            ms(t.refused_p(99.0)),
            p.walks.peak,
        );
    }
}

fn criticality_table(out: &mut String, points: &[Point]) {
    let _ = writeln!(
        out,
        "| gate | budget header | critical offered | critical goodput | critical availability \
         | critical refused | critical p99 | sheddable offered | sheddable goodput \
         | max walks at once |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for p in points {
        let w = p.report.window;
        let crit = p.report.level(Criticality::Critical);
        let shed = p.report.level(Criticality::Sheddable);
        let _ = writeln!(
            out,
            "| {} | {} | {:.1}/s | {:.1}/s | {:.2}% | {} | {} | {:.1}/s | {:.1}/s | {} |",
            p.gate,
            if p.budget { "yes" } else { "no" },
            crit.offered_rate(w),
            crit.goodput(w),
            crit.availability() * 100.0,
            crit.refused.len(),
            ms(crit.good_p(99.0)),
            shed.offered_rate(w),
            shed.goodput(w),
            p.walks.peak,
        );
    }
}

fn deadline_table(out: &mut String, points: &[Point]) {
    let _ = writeln!(
        out,
        "| gate | budget header | offered | goodput/s | refused | timed out | admitted p99 \
         | slot time | orphaned slot time | orphaned share |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    for p in points {
        let t = p.report.total();
        let _ = writeln!(
            out,
            "| {} | {} | {:.0}/s | {:.1} | {} | {} | {} | {} | {} | {:.2}% |",
            p.gate,
            if p.budget { "sent" } else { "none" },
            t.offered_rate(p.report.window),
            t.goodput(p.report.window),
            pct(t.refused.len() as u64, t.offered),
            pct(t.timed_out, t.offered),
            ms(t.good_p(99.0)),
            ms(Some(p.walks.busy)),
            ms(Some(p.walks.orphaned)),
            p.walks.orphaned_share() * 100.0,
        );
    }
}

/// The issue's goals, judged on this run.
pub fn goals(run: &Overload) -> Vec<Goal> {
    let sweep = &run.sweep;
    let at = |gate: &str, multiple: f64| {
        sweep
            .points
            .iter()
            .find(|p| p.gate == gate && (p.multiple - multiple).abs() < 1e-9)
    };
    let mut goals = Vec::new();
    let queue = |multiple: f64| at(QUEUE_GATE, multiple).map(|p| (p, p.report.total()));

    goals.push(match queue(0.5) {
        Some((_, t)) => judge(
            "queue: at 0.5x capacity ≤ 1% refused",
            t.refused_share(),
            0.01,
            Cmp::AtMost,
            percent,
        ),
        None => missing("queue: at 0.5x capacity ≤ 1% refused"),
    });
    goals.push(match queue(0.9) {
        Some((p, t)) => judge(
            "queue: at 0.9x goodput ≥ 90% of the offered load",
            t.goodput(p.report.window) / t.offered_rate(p.report.window).max(f64::MIN_POSITIVE),
            0.9,
            Cmp::AtLeast,
            percent,
        ),
        None => missing("queue: at 0.9x goodput ≥ 90% of the offered load"),
    });
    goals.push(match queue(10.0) {
        Some((p, t)) => judge(
            "queue: at 10x goodput ≥ 95% of capacity",
            t.goodput(p.report.window) / sweep.capacity,
            0.95,
            Cmp::AtLeast,
            percent,
        ),
        None => missing("queue: at 10x goodput ≥ 95% of capacity"),
    });
    let walk = walk_time(sweep);
    let queue_points: Vec<&Point> = sweep
        .points
        .iter()
        .filter(|p| p.gate == QUEUE_GATE)
        .collect();
    goals.push(match (walk, queue_points.is_empty()) {
        (Some(walk), false) => {
            let worst = queue_points
                .iter()
                .filter_map(|p| p.report.total().good_p(99.0))
                .max()
                .unwrap_or_default();
            let mut goal = judge(
                "queue: admitted p99 ≤ 2x the walk's own time at every load",
                worst.as_secs_f64() / walk.as_secs_f64(),
                2.0,
                Cmp::AtMost,
                times,
            );
            goal.measured = format!("worst p99 {} = {}", ms(Some(worst)), goal.measured);
            goal
        }
        _ => missing("queue: admitted p99 ≤ 2x the walk's own time at every load"),
    });
    for gate in ["admission fail-fast", QUEUE_GATE] {
        let what = format!("{gate}: refusal p99 ≤ 2 ms at 10x");
        goals.push(
            match at(gate, 10.0).and_then(|p| p.report.total().refused_p(99.0)) {
                Some(p99) => judge(&what, p99.as_secs_f64() * 1e3, 2.0, Cmp::AtMost, |v| {
                    format!("{v:.2} ms")
                }),
                None => missing(&what),
            },
        );
    }
    for budget in [false, true] {
        let crit = run
            .criticality
            .iter()
            .find(|p| p.gate == QUEUE_GATE && p.budget == budget);
        let with = if budget { " (budget header)" } else { "" };
        let what =
            format!("critical at 0.5x + sheddable at 10x: critical availability ≥ 99.9%{with}");
        goals.push(match crit {
            Some(p) => judge(
                &what,
                p.report.level(Criticality::Critical).availability(),
                0.999,
                Cmp::AtLeast,
                |v| format!("{:.2}%", v * 100.0),
            ),
            None => missing(&what),
        });
        let what = format!("no critical refusal while critical demand is below capacity{with}");
        goals.push(match crit {
            Some(p) => {
                let refused = p.report.level(Criticality::Critical).refused.len();
                Goal {
                    goal: what,
                    measured: format!("{refused} critical refusals"),
                    met: Some(refused == 0),
                }
            }
            None => missing(&what),
        });
    }
    let deadline = |budget: bool| {
        run.deadline
            .iter()
            .find(|p| p.gate == QUEUE_GATE && p.budget == budget)
    };
    goals.push(match (deadline(true), deadline(false)) {
        (Some(with), without) => {
            let mut goal = judge(
                "timeouts at 1.5x the walk, 5x load: orphaned slot time ≤ 1% with deadlines",
                with.walks.orphaned_share(),
                0.01,
                Cmp::AtMost,
                percent,
            );
            if let Some(without) = without {
                goal.measured = format!(
                    "{} (without the budget header: {})",
                    goal.measured,
                    percent(without.walks.orphaned_share())
                );
            }
            goal
        }
        _ => missing("timeouts at 1.5x the walk, 5x load: orphaned slot time ≤ 1% with deadlines"),
    });
    let admission: Vec<&Point> = sweep
        .points
        .iter()
        .chain(&run.criticality)
        .chain(&run.deadline)
        .filter(|p| p.gate.starts_with("admission"))
        .collect();
    let peak = admission.iter().map(|p| p.walks.peak).max().unwrap_or(0);
    goals.push(Goal {
        goal: format!(
            "never more than N = {} walks at once (admission gates)",
            run.config.workers
        ),
        measured: format!("most at once: {peak}"),
        met: (!admission.is_empty()).then_some(peak <= run.config.workers as u64),
    });
    goals
}

#[derive(Debug, Clone, Copy)]
enum Cmp {
    AtMost,
    AtLeast,
}

fn judge(goal: &str, value: f64, bound: f64, cmp: Cmp, show: impl Fn(f64) -> String) -> Goal {
    let met = match cmp {
        Cmp::AtMost => value <= bound,
        Cmp::AtLeast => value >= bound,
    };
    let margin = if met {
        String::new()
    } else {
        format!(", missed by {}", show((value - bound).abs()))
    };
    Goal {
        goal: goal.to_owned(),
        measured: format!("{}{margin}", show(value)),
        met: Some(met),
    }
}

fn missing(goal: &str) -> Goal {
    Goal {
        goal: goal.to_owned(),
        measured: "-".to_owned(),
        met: None,
    }
}

/// Mean thread time per walk over the sweep's admission points: the walk's
/// own time, without any wait.
fn walk_time(sweep: &Sweep) -> Option<Duration> {
    let (busy, started) = sweep
        .points
        .iter()
        .filter(|p| p.gate.starts_with("admission"))
        .fold((Duration::ZERO, 0u64), |(b, s), p| {
            (b + p.walks.busy, s + p.walks.started)
        });
    (started > 0).then(|| busy / u32::try_from(started).unwrap_or(u32::MAX))
}

fn percent(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

fn times(v: f64) -> String {
    format!("{v:.2}x")
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", part as f64 * 100.0 / whole as f64)
    }
}

fn ms(d: Option<Duration>) -> String {
    match d {
        None => "-".to_owned(),
        Some(d) if d < Duration::from_millis(1) => format!("{} µs", d.as_micros()),
        Some(d) if d < Duration::from_secs(10) => format!("{:.1} ms", d.as_secs_f64() * 1e3),
        Some(d) => format!("{:.1} s", d.as_secs_f64()),
    }
}
