//! The overload picture: goodput and admitted p99 against offered load,
//! one line per gate, as SVG.
//!
//! This module owns the drawing (with `plotters`, its SVG backend only).
//! It draws figures measured elsewhere and writes nothing but the SVG text
//! it returns.

use std::collections::BTreeMap;
use std::io;

use plotters::prelude::*;

use super::overload::Sweep;

/// Line colours, one per gate in the sweep's order.
const COLOURS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(127, 127, 127),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// Draws `sweep` as an SVG document: goodput (walks/s) on the left and
/// admitted p99 (ms) on the right, both against offered load in multiples
/// of capacity (log scale), one line per gate, capacity as a dashed line.
///
/// # Errors
///
/// An [`io::Error`] when `plotters` fails to draw.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::overload::Sweep;
/// use admission_lab::storm::plot::svg;
///
/// let sweep = Sweep { pinned: true, capacity: 90.0, points: Vec::new() };
/// let text = svg(&sweep, "no points").unwrap();
/// assert!(text.starts_with("<svg"));
/// assert!(text.contains("goodput"));
/// ```
pub fn svg(sweep: &Sweep, title: &str) -> io::Result<String> {
    let mut text = String::new();
    draw(sweep, title, &mut text).map_err(|err| io::Error::other(err.to_string()))?;
    Ok(text)
}

type Lines = BTreeMap<usize, (&'static str, Vec<(f64, f64)>, Vec<(f64, f64)>)>;

fn draw(sweep: &Sweep, title: &str, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    // Per gate, in the sweep's order: (multiple, goodput) and (multiple, p99 ms).
    let mut order: Vec<&'static str> = Vec::new();
    let mut lines: Lines = BTreeMap::new();
    for p in &sweep.points {
        let i = match order.iter().position(|g| *g == p.gate) {
            Some(i) => i,
            None => {
                order.push(p.gate);
                order.len() - 1
            }
        };
        let entry = lines
            .entry(i)
            .or_insert_with(|| (p.gate, Vec::new(), Vec::new()));
        let total = p.report.total();
        entry.1.push((p.multiple, total.goodput(p.report.window)));
        if let Some(p99) = total.good_p(99.0) {
            entry.2.push((p.multiple, p99.as_secs_f64() * 1e3));
        }
    }
    let max_x = sweep.points.iter().map(|p| p.multiple).fold(1.0, f64::max) * 1.2;
    let min_x = sweep
        .points
        .iter()
        .map(|p| p.multiple)
        .fold(max_x, f64::min)
        .min(0.5)
        * 0.8;
    let max_goodput = lines
        .values()
        .flat_map(|l| l.1.iter().map(|(_, y)| *y))
        .fold(sweep.capacity, f64::max)
        * 1.15;
    let max_p99 = lines
        .values()
        .flat_map(|l| l.2.iter().map(|(_, y)| *y))
        .fold(1.0, f64::max)
        * 1.15;

    let root = SVGBackend::with_string(out, (1100, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let (left, right) = root.split_horizontally(550);

    let mut goodput = ChartBuilder::on(&left)
        .caption(
            "goodput (2xx within the client timeout)",
            ("sans-serif", 15),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d((min_x..max_x).log_scale(), 0.0..max_goodput)?;
    goodput
        .configure_mesh()
        .x_desc("offered load (x capacity)")
        .y_desc("walks/s")
        .x_label_formatter(&|x| format!("{x}"))
        .draw()?;
    let capacity = sweep.capacity;
    goodput
        .draw_series(DashedLineSeries::new(
            [(min_x, capacity), (max_x, capacity)],
            6,
            4,
            BLACK.mix(0.5).stroke_width(1),
        ))?
        .label(format!("capacity {capacity:.0}/s"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.mix(0.5)));
    for (i, (gate, good, _)) in lines.values().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        goodput
            .draw_series(LineSeries::new(
                good.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(*gate)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        goodput.draw_series(good.iter().map(|&pt| Circle::new(pt, 3, colour.filled())))?;
    }
    goodput
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;

    let mut p99 = ChartBuilder::on(&right)
        .caption("admitted p99 (from scheduled arrival)", ("sans-serif", 15))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d((min_x..max_x).log_scale(), 0.0..max_p99)?;
    p99.configure_mesh()
        .x_desc("offered load (x capacity)")
        .y_desc("ms")
        .x_label_formatter(&|x| format!("{x}"))
        .draw()?;
    for (i, (gate, _, lat)) in lines.values().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        p99.draw_series(LineSeries::new(lat.iter().copied(), colour.stroke_width(2)))?
            .label(*gate)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
        p99.draw_series(lat.iter().map(|&pt| Circle::new(pt, 3, colour.filled())))?;
    }
    root.present()?;
    Ok(())
}

/// Draws goodput over time, one line per client kind, over the offered
/// load (dashed) and the trigger's span (shaded), as an SVG document.
///
/// # Errors
///
/// An [`io::Error`] when `plotters` fails to draw.
///
/// # Examples
///
/// ```
/// use admission_lab::storm::plot::timeline_svg;
///
/// let offered = vec![(0.5, 80.0), (1.5, 300.0)];
/// let text = timeline_svg("t", &offered, &[("naive", vec![(0.5, 80.0), (1.5, 10.0)])], (1.0, 2.0)).unwrap();
/// assert!(text.contains("naive"));
/// ```
pub fn timeline_svg(
    title: &str,
    offered: &[(f64, f64)],
    lines: &[(&str, Vec<(f64, f64)>)],
    trigger: (f64, f64),
) -> io::Result<String> {
    let mut text = String::new();
    draw_timeline(title, offered, lines, trigger, &mut text)
        .map_err(|err| io::Error::other(err.to_string()))?;
    Ok(text)
}

fn draw_timeline(
    title: &str,
    offered: &[(f64, f64)],
    lines: &[(&str, Vec<(f64, f64)>)],
    trigger: (f64, f64),
    out: &mut String,
) -> Result<(), Box<dyn std::error::Error>> {
    let max_x = offered.iter().map(|p| p.0).fold(1.0, f64::max) + 0.5;
    let max_y = offered
        .iter()
        .chain(lines.iter().flat_map(|l| l.1.iter()))
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.1;
    let root = SVGBackend::with_string(out, (900, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..max_x, 0.0..max_y)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("goodput (requests/s, by arrival second)")
        .draw()?;
    chart.draw_series(std::iter::once(Rectangle::new(
        [(trigger.0, 0.0), (trigger.1, max_y)],
        RGBColor(240, 240, 240).filled(),
    )))?;
    chart
        .draw_series(DashedLineSeries::new(
            offered.iter().copied(),
            6,
            4,
            BLACK.stroke_width(1),
        ))?
        .label("offered")
        .legend(|(x, y)| PathElement::new([(x, y), (x + 18, y)], BLACK));
    for (i, (name, points)) in lines.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}
