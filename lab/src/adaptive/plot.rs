//! One picture per scenario: goodput per slice and the gate's limit over
//! time, one line per gate, as SVG.
//!
//! This module owns the drawing (with `plotters`, its SVG backend only).
//! It draws series measured elsewhere and returns the SVG text.

use std::io;

use plotters::prelude::*;

use super::run::{Scenario, Series};
use super::table::label;

const COLOURS: [RGBColor; 4] = [
    RGBColor(127, 127, 127),
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
];

/// Draws `series` (one per gate) of `scenario`: goodput (good answers per
/// second, per slice) above, the limit below, both against time.
///
/// # Errors
///
/// An [`io::Error`] when `plotters` fails to draw.
///
/// # Examples
///
/// ```
/// use admission_lab::adaptive::{Scenario, svg};
///
/// let scenario = Scenario { name: "empty".into(), phases: Vec::new() };
/// assert!(svg(&scenario, &[]).unwrap().starts_with("<svg"));
/// ```
pub fn svg(scenario: &Scenario, series: &[Series]) -> io::Result<String> {
    let mut text = String::new();
    draw(scenario, series, &mut text).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(text)
}

fn draw(
    scenario: &Scenario,
    series: &[Series],
    out: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(out, (900, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(340);
    let end: f64 = scenario
        .phases
        .iter()
        .map(|p| p.length.as_secs_f64())
        .sum::<f64>()
        .max(1.0);
    let goodput = |s: &Series| -> Vec<(f64, f64)> {
        s.slices
            .iter()
            .map(|sl| {
                let secs = sl.report.window.as_secs_f64().max(1e-3);
                (
                    sl.at + secs / 2.0,
                    sl.report.total().good.len() as f64 / secs,
                )
            })
            .collect()
    };
    let top_max = series
        .iter()
        .flat_map(|s| goodput(s).into_iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&top)
        .caption(format!("{}: goodput", scenario.name), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..end, 0.0..top_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("good answers /s")
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(goodput(s), colour.stroke_width(2)))?
            .label(label(s))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()?;

    let limit_max = series
        .iter()
        .flat_map(|s| s.limits.iter().map(|l| l.2 as f64))
        .fold(1.0, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&bottom)
        .caption("limit", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..end, 0.0..limit_max)?;
    chart
        .configure_mesh()
        .x_desc("seconds")
        .y_desc("concurrency limit")
        .draw()?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart.draw_series(LineSeries::new(
            s.limits.iter().map(|l| (l.0, l.2 as f64)),
            colour.stroke_width(2),
        ))?;
    }
    root.present()?;
    Ok(())
}
