//! The tenants run's tables and picture.
//!
//! This module owns how a [`Tenants`] run is rendered: one Markdown table
//! per number of heavy tenants, the goals judged on the fair gates, and a
//! two-panel SVG. It computes nothing from the network and writes nothing
//! but the text it returns.

use std::fmt::Write as _;
use std::io;

use plotters::prelude::*;

use super::{TenantGate, TenantPoint, Tenants};

/// Light tenants served at least this share on the fair gates.
const LIGHT_SERVED: f64 = 0.99;
/// The queued fair gate's light p99 at most this many work times.
const LIGHT_P99_WORKS: f64 = 3.0;
/// The fair gates' goodput at least this share of the measured capacity.
const GOODPUT: f64 = 0.95;

impl TenantPoint {
    /// `2xx` answers per second, every tenant.
    pub fn goodput(&self) -> f64 {
        self.light.goodput(self.window) + self.flood.goodput(self.window)
    }

    /// The heavy tenants' share of the goodput, in 0..=1.
    pub fn flood_share(&self) -> f64 {
        let all = self.goodput();
        if all == 0.0 {
            0.0
        } else {
            self.flood.goodput(self.window) / all
        }
    }
}

/// The Markdown tables and the goals' verdicts.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::tenants::{Tenants, TenantsConfig, render};
///
/// let run = Tenants { config: TenantsConfig::default(), pinned: false, capacity: 190.0, points: Vec::new() };
/// assert!(render(&run).contains("light served"));
/// ```
pub fn render(run: &Tenants) -> String {
    let config = &run.config;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "A class of {} slots, {} ms of work a request (capacity {:.0}/s nominal, {:.1}/s measured: the goodput column's base), {} light tenants offering {:.0}% of the nominal each, heavy tenants {:.0}x together; {} s of Poisson arrivals per point, client timeout {} ms, {}.\n",
        config.slots,
        config.work.as_millis(),
        config.capacity(),
        run.capacity,
        config.light,
        100.0 * config.light_share,
        config.heavy_multiple,
        config.point.as_secs_f64(),
        config.timeout.as_millis(),
        if run.pinned {
            "server and generator pinned to a CPU each"
        } else {
            "unpinned"
        },
    );
    let mut goals = Vec::new();
    for &heavy in &config.heavy {
        let _ = writeln!(
            out,
            "{heavy} heavy tenant{}:\n",
            if heavy == 1 { "" } else { "s" }
        );
        out.push_str(
            "| gate | light served | light p99 | heavy share of goodput | goodput (of capacity) | peak memory | generator lag |\n\
             | --- | --- | --- | --- | --- | --- | --- |\n",
        );
        for point in run.points.iter().filter(|p| p.heavy == heavy) {
            let p99 = point.light.good_p(99.0).map_or("—".to_owned(), |d| {
                format!("{:.1} ms", d.as_secs_f64() * 1e3)
            });
            let _ = writeln!(
                out,
                "| {} | {:.1}% | {p99} | {:.1}% | {:.1}/s ({:.1}%) | {:.1} MiB | {:.1} ms |",
                point.gate.name(),
                100.0 * point.light.availability(),
                100.0 * point.flood_share(),
                point.goodput(),
                100.0 * point.goodput() / run.capacity,
                point.memory.hwm_kib as f64 / 1024.0,
                point.max_lag.as_secs_f64() * 1e3,
            );
            if heavy > 0 && matches!(point.gate, TenantGate::FairFailFast | TenantGate::FairQueue) {
                goals.push(judge(run, point));
            }
        }
        out.push('\n');
    }
    out.push_str("Goals (fair gates):\n\n");
    for goal in goals {
        let _ = writeln!(out, "* {goal}");
    }
    out
}

fn judge(run: &Tenants, point: &TenantPoint) -> String {
    let config = &run.config;
    let served = point.light.availability();
    let mut verdicts = vec![format!(
        "light served {:.1}% ≥ {:.0}%: {}",
        100.0 * served,
        100.0 * LIGHT_SERVED,
        met(served >= LIGHT_SERVED)
    )];
    if point.gate == TenantGate::FairQueue {
        let bound = config.work.mul_f64(LIGHT_P99_WORKS);
        let p99 = point.light.good_p(99.0);
        verdicts.push(format!(
            "light p99 {} ≤ {:.0} ms: {}",
            p99.map_or("—".to_owned(), |d| format!(
                "{:.1} ms",
                d.as_secs_f64() * 1e3
            )),
            bound.as_secs_f64() * 1e3,
            met(p99.is_some_and(|d| d <= bound))
        ));
    }
    let share = point.goodput() / run.capacity;
    verdicts.push(format!(
        "goodput {:.1}% ≥ {:.0}% of capacity: {}",
        100.0 * share,
        100.0 * GOODPUT,
        met(share >= GOODPUT)
    ));
    format!(
        "{} with {} heavy: {}",
        point.gate.name(),
        point.heavy,
        verdicts.join("; ")
    )
}

fn met(yes: bool) -> &'static str {
    if yes { "met" } else { "**not met**" }
}

/// Line colours, one per gate in [`TenantGate::ALL`]'s order.
const COLOURS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(127, 127, 127),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Draws the run as an SVG document: light tenants served (left) and
/// goodput as a share of capacity (right) against the number of heavy
/// tenants, one line per gate.
///
/// # Errors
///
/// An [`io::Error`] when `plotters` fails to draw.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::tenants::{Tenants, TenantsConfig, plot};
///
/// let run = Tenants { config: TenantsConfig::default(), pinned: true, capacity: 190.0, points: Vec::new() };
/// assert!(plot(&run).unwrap().starts_with("<svg"));
/// ```
pub fn plot(run: &Tenants) -> io::Result<String> {
    let mut text = String::new();
    draw(run, &mut text).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(text)
}

/// What a panel plots of a point, given the capacity.
type Measure = fn(&TenantPoint, f64) -> f64;

fn draw(run: &Tenants, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let max_x = run.config.heavy.iter().copied().max().unwrap_or(1) as f64 + 0.5;
    let root = SVGBackend::with_string(out, (1100, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        "one noisy tenant: light tenants served and goodput, by gate",
        ("sans-serif", 18),
    )?;
    let (left, right) = root.split_horizontally(550);
    let panels: [(_, &str, Measure); 2] = [
        (&left, "light tenants served (%)", |p, _| {
            100.0 * p.light.availability()
        }),
        (&right, "goodput (% of capacity)", |p, capacity| {
            100.0 * p.goodput() / capacity
        }),
    ];
    for (area, caption, value) in panels {
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 15))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0.5..max_x, 0.0..105.0)?;
        chart
            .configure_mesh()
            .x_desc("heavy tenants (10x capacity together)")
            .y_desc("%")
            .draw()?;
        for (i, gate) in TenantGate::ALL.into_iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let line: Vec<(f64, f64)> = run
                .points
                .iter()
                .filter(|p| p.gate == gate)
                .map(|p| (p.heavy as f64, value(p, run.capacity)))
                .collect();
            chart
                .draw_series(LineSeries::new(
                    line.iter().copied(),
                    colour.stroke_width(2),
                ))?
                .label(gate.name())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart.draw_series(line.iter().map(|&pt| Circle::new(pt, 3, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
    }
    root.present()?;
    Ok(())
}
